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
#include "io/output_dir.h"
#include "io/peft_config.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/nf4_weights.h"
#include "model/weights.h"
#include "ops/context.h"
#include "train/train_config.h"
#include "train/zero3_slices.h"

namespace lt::train {

// What this build and machine can run: device cuda without a GPU (or in a CPU build), bf16/fp16 on CPU,
// fp16/fp64 on CUDA and adapter qlora are refused naming the key.
void check_engine_settings(const TrainConfig& config);

// The run's claim on output_dir (io/output_dir.h): refused when it is, is inside or contains base_model,
// data_path, init_adapter or a resume checkpoint of another directory (resuming one of output_dir's own
// checkpoints is the usual case), or holds others' files without overwrite_output_dir; held (locked) for
// the run.
std::unique_ptr<io::OutputDir> claim_output_dir(const TrainConfig& config);
// Device::Auto: cuda when this build has a usable GPU, else cpu; then Precision::Auto: bf16 on cuda,
// fp32 on cpu (what a newcomer's run should compute in). Other values are left as they are.
void resolve_auto_device(Device& device, Precision& precision);
// The device/precision pair alone (what eval and generate check); `who` starts the message.
void check_device_precision(Device device, Precision precision, const std::string& who);
// Fp64 -> F64, Fp32 -> F32, Bf16 -> BF16, Fp16 -> F16; the text form for a command-line value.
DType compute_dtype(Precision precision);
DType compute_dtype(const std::string& precision);
// The dtype of trained tensors' masters and gradients for a compute dtype: the GPU's bf16 policy keeps
// LoRA adapters and every parameter gradient in f32; otherwise the compute dtype itself.
DType master_dtype(DType compute);
// The dtype of master weights (`master_weights`): f32 for bf16/f16, f64 for f32.
DType wide_master_dtype(DType compute);
// Whether full/partial fine-tuning keeps master weights: when asked, and always under fp16, whose 10-bit
// mantissa and narrow range lose most AdamW updates (bf16 without masters rounds stochastically instead).
bool keeps_master_weights(const TrainConfig& config);

struct LoadedModel {
  model::ModelConfig config;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  std::unique_ptr<Arena> arena;  // holds the weights, on `device`
  model::ModelWeights weights;
  // QLoRA (train/qlora_model.h): the projections in 4 bits and their dequantization scratch, on `device`;
  // weights' layers point at them and their projection tensors are empty. Null otherwise.
  std::unique_ptr<Arena> nf4_arena;
  std::unique_ptr<model::Nf4Weights> nf4;
  // zero3 over several ranks (train/zero3_sliced_load.h): this rank's slices of the trained layer tensors,
  // whose tensors in `weights` are empty; the trainer takes them over. Null: every tensor is in `weights`.
  std::unique_ptr<Zero3Slices> zero3_slices;
};

// Refuses an adapter directory given where a model is expected, pointing to --adapter.
void check_not_adapter_dir(const std::string& model_dir);
// base_model's config.json and, unless random_init, its safetensors weights; random_init draws HF's
// initialization from `seed`.
// The weights end up on `device` (read on the host, then uploaded).
LoadedModel load_model(const ops::Context& ctx, const std::string& model_dir, DType dtype, bool random_init,
                       uint64_t seed, Device device = Device::CPU);

// The same weights on `device` in `dtype` (converted); `model` is consumed.
LoadedModel to_device(const ops::Context& ctx, LoadedModel model, DType dtype, Device device);

// A PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) loaded for `model` in
// `dtype`: what `eval --adapter` and `generate --adapter` add to a base model.
struct LoadedAdapter {
  io::LoraAdapterConfig config;
  std::unique_ptr<Arena> arena;  // holds the adapters
  model::LoraWeights weights;
};
LoadedAdapter load_adapter(const ops::Context& ctx, const std::string& adapter_dir,
                           const model::ModelConfig& model, DType dtype, Device device = Device::CPU);

// The base model's tokenizer; nullptr when the directory has none and `required` is false. A tokenizer
// whose ids reach past the model's `model_vocab` embedding rows is refused here, at load, naming both.
std::unique_ptr<data::Tokenizer> load_model_tokenizer(const std::string& model_dir, bool required,
                                                      int64_t model_vocab);

// The examples of `path` (any format of data/dataset_load.h). A pre-tokenized file needs no tokenizer
// (tokenizer may be null; ids are checked against the model's vocabulary).
data::Dataset load_examples(const std::string& path, const data::Tokenizer* tokenizer,
                            const model::ModelConfig& model, const data::DatasetOptions& options);
data::DatasetOptions dataset_options(const TrainConfig& config, const std::string& model_dir);
// The training set: data_path, or the `datasets` files joined by their dataset_weights (data/dataset_mix.h).
data::Dataset load_training_data(const TrainConfig& config, const data::Tokenizer* tokenizer,
                                 const model::ModelConfig& model);

}  // namespace lt::train
