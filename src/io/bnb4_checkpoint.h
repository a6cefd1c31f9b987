// Checkpoints in transformers + bitsandbytes' 4-bit layout (FORMATS.md, "bitsandbytes NF4"): every decoder
// projection's weight stored as packed 4-bit codes with its block scales and quant state, everything else
// (embeddings, norms, the LM head, biases) in its own dtype, and a quantization_config in config.json.
// Loading keeps the codes as they are (ops::Quant4Weight) and can dequantize them into ModelWeights; saving
// writes what transformers' from_pretrained loads with bitsandbytes.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/quant4.h"

namespace lt::io {

// config.json's quantization_config for bitsandbytes 4-bit (BitsAndBytesConfig's names and defaults).
struct Bnb4Config {
  ops::Quant4Type quant_type = ops::Quant4Type::NF4;  // bnb_4bit_quant_type
  bool double_quant = false;                          // bnb_4bit_use_double_quant
  DType compute_dtype = DType::F32;                   // bnb_4bit_compute_dtype
};

// The quantized projections of one checkpoint, by HF weight name ("model.layers.0.self_attn.q_proj.weight").
struct Bnb4Weights {
  Bnb4Config quant;
  std::map<std::string, ops::Quant4Weight> projections;
};

// The weights transformers quantizes: every decoder projection's matrix (q, k, v, o, gate, up, down);
// never biases, embeddings, norms or the LM head.
bool is_quantized_kind(model::WeightKind kind);

// The quantization_config of config.json in `dir` (nullopt when there is none). A config that is not
// bitsandbytes 4-bit with uint8 storage is refused naming the field.
std::optional<Bnb4Config> read_bnb4_quantization(const std::string& dir);
nlohmann::json bnb4_quantization_json(const Bnb4Config& quant);
// The model config of a 4-bit checkpoint: config.json less its quantization_config.
model::ModelConfig load_bnb4_model_config(const std::string& dir);

// Quantizes the projections of `weights` (F32, BF16 or F16: the dtype quantization reads, recorded as each
// quant state's dtype) as bitsandbytes' quantize_4bit would.
Bnb4Weights quantize_projections(const model::ModelConfig& config, const model::ModelWeights& weights,
                                 const Bnb4Config& quant);

// Reads the 4-bit checkpoint in `dir`: the unquantized tensors into `weights` (allocated for `config`, any
// floating dtype; without `dequantize` its projections may be empty tensors), and the projections as stored.
// With `dequantize`, each projection of `weights` also gets its dequantized values (code * absmax in f32, one
// rounding to weights.dtype; f64 widens that f32 exactly). Every tensor and quant-state field is checked: a
// missing or surplus tensor, a shape, dtype, block size, code table or quant type that is not what the config
// says is refused naming the tensor.
Bnb4Weights load_bnb4_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                 model::ModelWeights& weights, bool dequantize);

// Writes `dir` (created or replaced, atomically): config.json with the quantization_config, the
// unquantized tensors of `weights` in weights.dtype, and each projection of `quantized` as bitsandbytes
// stores it. Returns the files written.
std::vector<std::string> save_bnb4_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                              const model::ModelWeights& weights,
                                              const Bnb4Weights& quantized);

// The dtype transformers would quantize the checkpoint in `model_dir` from: `torch_dtype` "auto" keeps the
// checkpoint's own dtype (config.json's torch_dtype/dtype, else its first tensor's), as
// from_pretrained(..., dtype="auto") or an explicit dtype of that kind does; otherwise "bfloat16",
// "float16" or "float32" (transformers called with no dtype rounds to float16 first). `who` starts the
// message of a refusal (e.g. "quantize: --torch_dtype").
DType quantization_source_dtype(const std::string& model_dir, const model::ModelConfig& config,
                                const std::string& torch_dtype, const std::string& who);

// Bytes of the quantized model: 4-bit projections with their scales, everything else at `plain_dtype`.
int64_t bnb4_model_bytes(const model::ModelConfig& config, const Bnb4Config& quant, DType plain_dtype);

}  // namespace lt::io
