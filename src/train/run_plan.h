// The run plan: every setting a training run goes by, resolved once at its start from the TrainConfig and
// the device, with the policies that the keys leave implicit made explicit (the compute and gradient
// dtypes, master weights, stochastic rounding, the recompute policy behind `auto`, loss scaling, the kernel
// options and the environment variables that override them). The trainer prints it as the run header and
// saves it in every checkpoint (trainer_state.json's "run_plan"), so that a checkpoint tells how it was
// computed, including what no key of the configuration shows.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "dist/launch.h"
#include "model/decoder.h"
#include "model/memory_plan.h"
#include "ops/context.h"
#include "ops/kernel_options.h"
#include "train/train_config.h"

namespace lt::train {

struct RunPlan {
  Device device = Device::CPU;
  std::string device_name;                    // ops::device_description
  DType compute_dtype = DType::F32;           // weights and activations
  DType gradient_dtype = DType::F32;          // parameter gradients (and LoRA adapters): master_dtype
  std::optional<DType> master_weights;        // wider copies AdamW updates (full/partial), if any
  bool stochastic_rounding = false;           // bf16 weights updated in place, without masters
  bool loss_scaling = false;                  // fp16: dynamic loss scale
  bool tf32 = false;                          // f32 GEMMs in TF32
  int64_t accumulation_steps = 1;             // micro-batches per optimizer step
  std::optional<model::Recompute> recompute;  // nullopt: the decoder's default (none whole, full chunked)
  std::string recompute_resolved;             // what runs: none | full | selective | elementwise | norms
  // What goes to host memory: none | kept activations (offload_only narrows it) | checkpoints (chunked), and
  // there the attention outputs too where they fit in half the host memory (resolve_attention_offload).
  std::string offload;
  bool offload_attention = false;  // the attention outputs in host memory (resolve_attention_offload)
  // schedule layer_major: the layer-input checkpoints on the device (resolve_checkpoint_placement; -1: all)
  model::ScheduleOrder schedule = model::ScheduleOrder::ChunkMajor;
  int64_t device_checkpoints = -1;
  int64_t num_layers = 0;                             // with schedule layer_major, for the header
  ops::KernelOptions kernels;                         // the configuration's, with the environment's overrides
  std::vector<ops::EnvironmentOverride> environment;  // the overrides in effect

  bool operator==(const RunPlan&) const = default;
};

// `config` is validated; `device` and `compute_dtype` are the run's (config.device, compute_dtype).
RunPlan resolve_run_plan(const TrainConfig& config, Device device, DType compute_dtype);

// The context the run's ops take (ops/context.h): the plan's kernel options, and TF32 on a GPU when asked.
ops::Context run_context(const RunPlan& plan, Device device);
// The GPU a CUDA run of this process uses: its local rank's in `launch` (dist::gpu_for_rank; GPU 0 when
// none is visible, for planning); ops::kNoDevice for a CPU run.
int run_gpu(Device device, const dist::Launch& launch = dist::detect_launch());

// Decides, once for the run's largest micro-batch (rows x tokens), whether a chunked run that offloads its
// checkpoints offloads the attention outputs too (model::default_attention_offload: where they fit in half
// the host memory), and names the decision in plan.offload.
void resolve_attention_offload(RunPlan& plan, const TrainConfig& config, const model::ModelConfig& model,
                               DType dtype, int64_t rows, int64_t tokens);

// Layer-major runs: the checkpoint split the memory plan chose (model/checkpoint_placement.h), named in
// plan.offload.
void resolve_checkpoint_placement(RunPlan& plan, const model::MemoryPlan& memory_plan);

// The kernel options the configuration asks for (attention, deterministic, gemm_tune, profile_ops), before
// the environment's overrides.
ops::KernelOptions kernel_options_from_config(const TrainConfig& config);

// "key: value" per resolved setting, in a fixed order (the header and the saved file list the same).
std::vector<std::pair<std::string, std::string>> run_plan_entries(const RunPlan& plan);
// The header printed at the start of a run: one "  key: value" line per entry, environment overrides named.
std::string format_run_header(const RunPlan& plan);
// The same entries as a JSON object, with "environment": {variable: value} (for trainer_state.json).
nlohmann::json run_plan_json(const RunPlan& plan);

}  // namespace lt::train
