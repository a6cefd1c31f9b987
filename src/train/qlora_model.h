// QLoRA's base model: LoRA (finetune: lora) over projections held in bitsandbytes' 4-bit layout
// (model/nf4_weights.h). The base comes either from a 16/32-bit HF checkpoint, quantized on load exactly
// as transformers + bitsandbytes' load_in_4bit would (the same bytes: ops/quant4.h), or from a 4-bit
// checkpoint saved by transformers (or `leantune quantize`), whose codes are used as stored. Embeddings,
// norms, biases and the LM head stay dense in the compute dtype.
#pragma once

#include <cstdint>
#include <string>

#include "ops/context.h"
#include "ops/quant4.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {

// Whether the run is QLoRA: finetune lora with adapter qlora, bits 4 or load_in_4bit.
bool is_qlora(const TrainConfig& config);

struct QloraOptions {
  ops::Quant4Type quant_type = ops::Quant4Type::NF4;  // bnb_4bit_quant_type
  bool double_quant = true;                           // bnb_4bit_use_double_quant
  std::string torch_dtype = "auto";                   // the dtype a 16/32-bit base is quantized from
};
// The run's quantization settings, checked (a quant type or compute dtype that is not what the run can do
// is refused naming the key).
QloraOptions qlora_options(const TrainConfig& config);

// base_model as a QLoRA base in `dtype` on `device`; random_init draws HF's initialization from `seed` in
// float32 (unless torch_dtype says otherwise) and quantizes that. `summary` (when given) gets one line
// saying where the 4-bit weights came from.
LoadedModel load_qlora_model(const ops::Context& ctx, const std::string& model_dir,
                             const QloraOptions& options, DType dtype, bool random_init, uint64_t seed,
                             Device device, std::string* summary = nullptr);

}  // namespace lt::train
