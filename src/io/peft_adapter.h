// PEFT LoRA adapter directories: adapter_config.json (io/peft_config.h) and adapter_model.safetensors with
// PEFT's tensor names (`base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight` (r, in),
// `...lora_B.weight` (out, r); mlp.* likewise), fp32, metadata format pt. What PeftModel.from_pretrained
// reads, and what PEFT's save_pretrained writes.
#pragma once

#include <string>
#include <vector>

#include "io/peft_config.h"
#include "model/config.h"
#include "model/lora.h"

namespace lt::io {

// The adapters `config` puts on `model` (targets, rank_pattern / alpha_pattern and rsLoRA as PEFT resolves
// them). Throws when a listed target names none of the model's projections (PEFT refuses those too), or
// when nothing is targeted.
std::vector<model::LoraSpec> lora_specs(const model::ModelConfig& model, const LoraAdapterConfig& config);

// The file names inside an adapter directory.
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kAdapterConfigFile = "adapter_config.json";

// Writes <dir>/adapter_model.safetensors (every A and B as `file_dtype`: F32, PEFT's usual, or F64 for
// float64 training, which PEFT loads as well) and <dir>/adapter_config.json, each atomically; creates `dir`
// if needed and leaves other files in it alone. `lora` must be the layout of lora_specs(model, config).
// Returns the two paths.
std::vector<std::string> save_peft_adapter(const std::string& dir, const model::ModelConfig& model,
                                           const LoraAdapterConfig& config, const model::LoraWeights& lora,
                                           DType file_dtype = DType::F32);

// Fills `lora` (allocated from lora_specs(model, config)) from <dir>/adapter_model.safetensors, converting
// to lora's dtype. Every expected tensor must be there with its shape; tensors the config does not explain
// are refused (listed). Errors name the file, the tensor and the expected shape.
void load_peft_adapter_weights(const std::string& dir, const model::ModelConfig& model,
                               const LoraAdapterConfig& config, model::LoraWeights& lora);

}  // namespace lt::io
