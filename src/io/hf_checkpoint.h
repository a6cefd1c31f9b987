// Hugging Face checkpoints: a directory with config.json and model.safetensors, or the shards listed by
// model.safetensors.index.json. Loading maps HF tensor names onto ModelWeights (model/weights.h) converting
// F64/F32/BF16/F16 to the compute dtype; saving writes what transformers' from_pretrained reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/weights.h"

namespace lt::io {

// Fills `weights` (allocated for `config`, host memory) from the checkpoint at `path_or_dir`.
// Accepted besides the plain names: `.base_layer.` inside a name (PEFT: `q_proj.base_layer.weight`); fused
// `self_attn.qkv_proj` (rows q, k, v) and `mlp.gate_up_proj` (rows gate, up), split on load;
// `rotary_emb.inv_freq` (ignored); `lm_head.weight` in a tied checkpoint when it equals the embedding.
// Errors name the checkpoint and the tensor: a missing one, a shape that is not the config's (with the
// expected shape), names that mean nothing to the model (listed).
// `streamed` (when given) reads the tensors it does not hold one at a time (model::StreamedWeights).
void load_hf_weights(const std::string& path_or_dir, const model::ModelConfig& config,
                     model::ModelWeights& weights, const model::StreamedWeights* streamed = nullptr);

struct HfSaveOptions {
  // Storage dtype (F32, BF16, F16, F64); default: config.json's declared dtype, else the weights' dtype.
  std::optional<DType> dtype = std::nullopt;
  // Shards hold at most this many bytes of tensor data (a larger single tensor gets a shard of its own);
  // more than one shard writes model-0000i-of-0000n.safetensors and model.safetensors.index.json.
  uint64_t max_shard_bytes = uint64_t(5) << 30;
};

// Writes `dir` (created, or replaced when leantune wrote it: io::AtomicDirectory) with config.json
// (model::model_config_json: the typed fields, the dtype saved) and the weights. Written into a temporary
// sibling directory first and renamed into place, so a reader never sees half a checkpoint; the directory
// carries leantune's owner marker (io/output_dir.h). Returns the file names written (config.json first; the
// marker is not listed).
std::vector<std::string> save_hf_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                            const model::ModelWeights& weights,
                                            const HfSaveOptions& options = {});

// config.json for a checkpoint of `config` stored in `dtype` (its dtype / torch_dtype fields say so).
nlohmann::json hf_config_json(const model::ModelConfig& config, DType dtype);

// Writes `dir` (created or replaced) with `config_json` and `tensors` (host memory, any dtype, in this
// order) in model.safetensors, or in shards of at most max_shard_bytes with model.safetensors.index.json.
// Assembled in a temporary sibling directory and renamed into place. Returns the files written.
struct NamedTensor;
std::vector<std::string> write_hf_directory(const std::string& dir, const nlohmann::json& config_json,
                                            const std::vector<NamedTensor>& tensors,
                                            uint64_t max_shard_bytes);

// "bfloat16" / "float16" / "float32" / "float64" <-> DType (nullopt for anything else).
std::optional<DType> dtype_from_torch_name(const std::string& name);
std::string torch_dtype_name(DType dtype);

}  // namespace lt::io
