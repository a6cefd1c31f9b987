// What a run needs before its first step: the compute dtype, the model (config + weights in one arena),
// and the examples (train / validation). Shared by `leantune train`, `eval` and `generate`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "data/dataset_types.h"
#include "data/example.h"
#include "data/tokenizer.h"
#include "io/peft_config.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "train/train_config.h"

namespace lt::train {

// The engine so far is CPU-only: device cuda, bf16/fp16 on CPU, and adapter qlora are refused naming the key.
void check_engine_settings(const TrainConfig& config);
// "fp64" -> F64, "fp32" -> F32 (after check_engine_settings).
DType compute_dtype(const std::string& precision);

struct LoadedModel {
  model::ModelConfig config;
  DType dtype = DType::F32;
  std::unique_ptr<Arena> arena;  // holds the weights
  model::ModelWeights weights;
};

// base_model's config.json and, unless random_init, its safetensors weights; random_init draws HF's
// initialization from `seed`.
LoadedModel load_model(const std::string& model_dir, DType dtype, bool random_init, uint64_t seed);

// A PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) loaded for `model` in
// `dtype`: what `eval --adapter` and `generate --adapter` add to a base model.
struct LoadedAdapter {
  io::LoraAdapterConfig config;
  std::unique_ptr<Arena> arena;  // holds the adapters
  model::LoraWeights weights;
};
LoadedAdapter load_adapter(const std::string& adapter_dir, const model::ModelConfig& model, DType dtype);

// The base model's tokenizer; nullptr when the directory has none and `required` is false.
std::unique_ptr<data::Tokenizer> load_model_tokenizer(const std::string& model_dir, bool required);

// The examples of `path` (any format of data/dataset_load.h). A pre-tokenized file needs no tokenizer
// (tokenizer may be null; ids are checked against the model's vocabulary).
data::Dataset load_examples(const std::string& path, const data::Tokenizer* tokenizer,
                            const model::ModelConfig& model, const data::DatasetOptions& options);
data::DatasetOptions dataset_options(const TrainConfig& config, const std::string& model_dir);

}  // namespace lt::train
