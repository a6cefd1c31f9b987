// Training checkpoints: OUTPUT_DIR/checkpoint-STEP/ holds everything a run needs to continue exactly where
// it stopped, and is written atomically (built in a temporary sibling, fsynced, renamed), so a crash leaves
// either no checkpoint-STEP or a complete one.
//   config.json, model.safetensors   the weights in the compute dtype (HF layout; lossless for resume), or
//   with LoRA: adapter_config.json, adapter_model.safetensors, the PEFT adapter in the compute dtype (the
//                                    base is frozen: it is the base model's, not saved again)
//   optimizer.safetensors            AdamW's state_tensors(): "step", "<name>.exp_avg", "<name>.exp_avg_sq"
//                                    (sharding zero1/zero2/zero3: one file per rank and a manifest instead,
//                                    written by every rank: train/sharded_checkpoint.h)
//   trainer_state.json               step, epoch, data position, scheduler, RNG (see TrainerState), and
//                                    the run plan (run_plan.h)
//   train_config.yaml                the full resolved configuration
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/peft_config.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "ops/context.h"
#include "train/adamw.h"
#include "train/lr_schedule.h"
#include "train/run_plan.h"
#include "train/train_config.h"

namespace lt::train {

// A training checkpoint's whole optimizer state (one process's, ddp's; a sharded run writes rank files).
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";

// Where the run stands after `step` optimizer steps.
struct TrainerState {
  int64_t step = 0;         // optimizer steps done
  int64_t data_epoch = 0;   // the next step's first micro-batch: epoch
  int64_t data_index = 0;   //   and micro-batch index within that epoch's order
  double epoch = 0;         // fractional epochs done (for logs)
  uint64_t rng_seed = 0;    // Philox key of the run; the counter is derived from step (Philox is
  uint64_t rng_offset = 0;  // counter-based: this pair is the whole RNG state)
  double last_lr = 0;       // learning rate of the last step
  int64_t total_steps = 0;  // the schedule's length when saved
  // fp16's dynamic loss scaler (train/loss_scaler.h); scale 0: the run has none.
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
};

struct CheckpointContents {
  const TrainConfig* config;
  const model::ModelConfig* model;
  const model::ModelWeights* weights;  // saved unless `lora` is set
  AdamW* optimizer;
  const LrSchedule* schedule;
  TrainerState state;
  // Writes more files into the checkpoint's temporary directory before it is committed (LoRA adapters;
  // tests use it to fail mid-write).
  std::function<void(const std::string& dir)> write_extra = nullptr;
  const model::LoraWeights* lora = nullptr;        // LoRA run: the adapters, saved instead of the weights
  const io::LoraAdapterConfig* adapter = nullptr;  //   and their adapter_config.json
  // Runs when save_total_limit rotation has renamed an old checkpoint away and before it is deleted (tests
  // interrupt rotation there).
  std::function<void(const std::string& doomed)> between_rename_and_delete = nullptr;
  const RunPlan* plan = nullptr;  // the run's resolved settings, saved in trainer_state.json's "run_plan"
};

std::string checkpoint_dir_name(int64_t step);  // "checkpoint-STEP"

// `tensors` with every device tensor replaced by a host copy whose bytes live in `staging`.
std::vector<io::NamedTensor> on_host(const ops::Context& ctx, std::vector<io::NamedTensor> tensors,
                                     std::vector<std::vector<char>>& staging);

// Writes OUTPUT_DIR/checkpoint-STEP atomically, then removes the oldest checkpoints beyond
// save_total_limit (0 keeps all; only leantune's own, see list_checkpoints; rename-then-delete, so a kill
// never leaves a listed partial one). Returns the checkpoint's path.
std::string save_checkpoint(const ops::Context& ctx, const std::string& output_dir,
                            const CheckpointContents& contents, int64_t save_total_limit);

// The parts of save_checkpoint that a checkpoint written by several ranks (train/sharded_checkpoint.h)
// shares with it. write_weights: the weights (or the LoRA adapter) into `dir`; save_hf_checkpoint replaces
// its target directory as a whole, so it goes before anything else is written there.
void write_weights(const ops::Context& ctx, const std::string& dir, const CheckpointContents& contents);
// trainer_state.json (with the run plan) and train_config.yaml into `dir`.
void write_trainer_files(const std::string& dir, const CheckpointContents& contents);
// Commits `dir` (renamed to its final name) and rotates output_dir's checkpoints; returns the final path.
std::string publish_checkpoint(io::AtomicDirectory& dir, const std::string& output_dir,
                               const CheckpointContents& contents, int64_t save_total_limit);

// Checkpoint directories of output_dir, by ascending step: named checkpoint-STEP exactly as leantune names
// them, carrying leantune's marker (io/output_dir.h) and complete (trainer_state.json present).
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir);

// resume "latest": the newest checkpoint of output_dir (an error if there is none); otherwise the path.
std::string resolve_resume_dir(const std::string& resume, const std::string& output_dir);

TrainerState read_trainer_state(const std::string& checkpoint_dir);
// The checkpoint's data position must be one this data and batching reach: data.index within the epoch's
// micro-batches and on a step boundary, and global_step the steps that lead there. Refuses (naming the
// file and field) a state that cannot be right, before any step runs.
void check_resume_position(const std::string& checkpoint_dir, const TrainerState& state,
                           int64_t micro_batches_per_epoch, int64_t micro_batches_per_step);
// A resumed run must read the same data in the same order: refuses (naming the key) a config whose
// data_path, seed, shuffle, batch_size, micro_batch_size, packing, group_by_length, cutoff_len,
// val_set_size or finetune differ from the checkpoint's train_config.yaml.
void check_resume_compatible(const std::string& checkpoint_dir, const TrainConfig& config);
// Restores weights (or, given `lora`, the adapters of layout `adapter`: the base weights stay as loaded)
// and optimizer state; returns the trainer state. Errors name the checkpoint and file. `streamed` (zero3's
// sliced load): the weights it does not hold are read one at a time and handed to its consume
// (model::StreamedWeights), the others into `weights`.
TrainerState load_checkpoint(const ops::Context& ctx, const std::string& checkpoint_dir,
                             const model::ModelConfig& model, model::ModelWeights& weights, AdamW& optimizer,
                             model::LoraWeights* lora = nullptr,
                             const io::LoraAdapterConfig* adapter = nullptr,
                             const model::StreamedWeights* streamed = nullptr);
// load_checkpoint without the optimizer state (a sharded checkpoint's is in shards).
TrainerState load_weights_and_state(const ops::Context& ctx, const std::string& checkpoint_dir,
                                    const model::ModelConfig& model, model::ModelWeights& weights,
                                    model::LoraWeights* lora = nullptr,
                                    const io::LoraAdapterConfig* adapter = nullptr,
                                    const model::StreamedWeights* streamed = nullptr);
// The restored optimizer's step count must be the trainer state's (an error naming the checkpoint).
void check_optimizer_step(const std::string& checkpoint_dir, const AdamW& optimizer,
                          const TrainerState& state);

}  // namespace lt::train
