// The training loop. One optimizer step = the micro-batches of batch_size / micro_batch_size (the last step
// of an epoch takes whatever is left of it). The step's loss is the sum of token CEs over every scored label
// of all its micro-batches divided by their count, which is counted before the first forward and passed
// to the decoder as the gradient scale: accumulating micro-batches equals one large batch exactly.
// Then: global-norm clipping, AdamW at the schedule's learning rate, evaluation every eval_steps and at the
// end, checkpoints every save_steps, at the end and on SIGINT/SIGTERM, and the final model in output_dir.
// With optimizer_in_backward, AdamW steps each layer during the backward instead, and every layer's
// gradients share one layer-sized buffer (train/optimizer_in_backward.h): the same bits, less memory.
//
// The trainable tensors are a list of (name, param, grad): full and partial fine-tuning fill it from the
// model's weights (train/trainable.h); LoRA (finetune: lora) freezes every base weight and lists its
// adapters instead, initialized from the run's seed or loaded from init_adapter. LoRA dropout masks come
// from (seed, step, micro-batch of the step), so a resumed run draws the same masks. A LoRA run's
// checkpoints and final output are PEFT adapter directories (adapter_config.json, adapter_model.safetensors).
//
// Several processes (`comm` of world size N): each rank runs its contiguous share of every step's
// micro-batches (dist/rank_split.h), the step's scored tokens and loss are summed over ranks, and the
// gradients meet the other ranks as `sharding` says (train/data_parallel.h: ddp, zero1, zero2). Rank 0 alone
// prints and writes into output_dir; every rank reads a checkpoint to resume.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "data/data_loader.h"
#include "data/example.h"
#include "dist/communicator.h"
#include "io/peft_config.h"
#include "model/lora.h"
#include "model/shared_layer_grads.h"
#include "ops/context.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/optimizer_in_backward.h"
#include "train/run_plan.h"
#include "train/run_setup.h"
#include "train/train_config.h"
#include "train/zero3_step_in_backward.h"

namespace lt::train {

struct TrainerHooks {
  std::function<void(const StepMetrics&)> on_step = nullptr;  // after each step is logged
  // Extra checkpoint files (checkpoint.h); with a sharded optimizer it runs on every rank, before the
  // rank's shard is written (sharded_checkpoint.h).
  std::function<void(const std::string& dir)> write_extra = nullptr;
  std::function<void(const std::string& doomed)> between_rename_and_delete =
      nullptr;              // rotation (checkpoint.h)
  std::FILE* out = stdout;  // progress and messages
  bool quiet = false;       // no progress output
};

struct TrainResult {
  int64_t start_step = 0;  // 0, or the step resumed from
  int64_t final_step = 0;
  int64_t total_steps = 0;
  std::vector<double> losses;  // per step run by this call, in order
  std::vector<EvalMetrics> evals;
  bool interrupted = false;     // stopped by a signal (a checkpoint was written)
  std::string last_checkpoint;  // "" when none was written
};

class Trainer {
 public:
  // `config` is already validated and passed check_engine_settings; `model` is loaded in the compute
  // dtype on the run's device. Allocates gradients (trainable tensors only, in master_dtype), optimizer
  // state and the activation arena on that device; restores the checkpoint when config.resume is set.
  // `output` is the run's claim on output_dir (claim_output_dir); null: the constructor claims it.
  // `comm` carries what the step reduces over processes (scored-token counts, loss, gradients); nullptr:
  // one process (dist::SingleCommunicator).
  Trainer(const TrainConfig& config, LoadedModel& model, std::vector<data::Example> train,
          std::vector<data::Example> val, int32_t pad_id, std::unique_ptr<io::OutputDir> output = nullptr,
          dist::Communicator* comm = nullptr);
  ~Trainer();

  TrainResult run(const TrainerHooks& hooks = {});

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }
  const std::vector<ParamGroup>& trainable() const { return data_parallel_->full(); }
  const model::ModelWeights& grads() const { return grads_; }
  size_t grads_bytes() const { return grad_arena_ ? grad_arena_->capacity() : 0; }
  // What this rank holds of master weights (zero1, zero2, zero3: its slices of every trained tensor); 0
  // without master weights.
  size_t master_weights_bytes() const { return master_arena_ ? master_arena_->capacity() : 0; }
  // LoRA runs: the adapters being trained and their adapter_config.json; nullptr otherwise.
  const model::LoraWeights* lora() const { return lora_arena_ ? &lora_ : nullptr; }
  const io::LoraAdapterConfig* adapter_config() const { return lora_arena_ ? &adapter_config_ : nullptr; }
  // The settings the run resolved at its start (printed as the run header, saved in checkpoints).
  const RunPlan& plan() const { return plan_; }
  // The context every op of the run takes (the plan's kernel options and TF32).
  const ops::Context& context() const { return ctx_; }

 private:
  struct StepResult {
    double loss = 0;
    int64_t label_tokens = 0, tokens = 0;
    double forward_s = 0, backward_s = 0;
  };
  // The step's micro-batches of this rank, then the gradients reduced over the ranks (DataParallel).
  StepResult forward_backward(int64_t step, int64_t data_epoch, int64_t first, int64_t end);
  // Unscales (fp16), clips and, unless the scaler skips the step, applies AdamW: returns the true gradient
  // norm and whether the update was made.
  std::pair<double, bool> apply_gradients(const StepResult& r, double lr);
  void setup_lora();
  void setup_master_weights(const model::TrainableFn& trainable);
  // zero1, zero2, zero3: the masters of this rank's slices only (DataParallel::make_master_slices), made
  // from the working weights (zero3's sliced load: from its layer slices); resuming, load_master_slices cuts
  // them from the checkpoint's whole masters
  // (`whole`, host memory) and rounds the working weights from those.
  void slice_master_weights();
  void load_master_slices(const model::ModelWeights& whole);
  // zero3's sliced load (train/zero3_sliced_load.h): the model's slices must be this run's (its ranks, its
  // trained layer tensors exactly, and with `frozen` its frozen layer tensors).
  void check_sliced_load(const model::TrainableFn& trainable, bool frozen) const;
  // Resuming the sliced load: the checkpoint's layer tensors (in `dtype`: the masters' with master
  // weights, else the model's) are read one at a time, and this rank's part of each is copied into its
  // slices (the master slice and the working slice rounded from it, or the working slice), so no whole
  // layer tensor is read into memory but the one being cut.
  model::StreamedWeights resume_streamed(DType dtype);
  // lora_compute_ = lora_ and model_.weights = masters_ (master_weights), at the start and after a resume;
  // after every update AdamW writes them itself (ParamGroup::compute_copy).
  void refresh_lora_compute();
  void refresh_working_weights();
  model::ModelWeights& saved_weights();                // masters_ with master_weights, else model_.weights
  const model::LoraWeights* lora_for_compute() const;  // what the decoder takes (nullptr: no LoRA)
  void save_final(const model::ModelWeights& weights, const TrainResult& result);
  // What checkpoints and the final model hold (saved_weights: the masters with master_weights), whole (a
  // collective when the masters or the layers are sliced): gathered a tensor at a time into host memory
  // (`holder`) on the main rank, which alone writes them; the other ranks get no weights.
  model::ModelWeights whole_weights(std::unique_ptr<Arena>& holder);
  EvalMetrics run_eval(int64_t step, double epoch);
  std::string write_checkpoint(const TrainerState& state, const TrainerHooks& hooks);

  TrainConfig config_;
  std::unique_ptr<dist::Communicator> own_comm_;  // the single-process one, when none was given
  dist::Communicator* comm_ = nullptr;
  LoadedModel& model_;
  std::unique_ptr<io::OutputDir> output_;  // locked for the trainer's lifetime
  std::vector<data::Example> train_, val_;
  int32_t pad_id_;
  std::unique_ptr<Arena> grad_arena_;
  model::ModelWeights grads_;
  // optimizer_in_backward: every layer's gradients share one layer-sized buffer (grads_ are its views), and
  // AdamW steps each layer during backward.
  model::SharedLayerGrads shared_grads_;
  std::unique_ptr<OptimizerInBackward> in_backward_;
  // master_weights: wider copies of the trainable weights that AdamW updates; masters_ is the model with
  // those in place of the trained tensors (what checkpoints save and resume loads), the working weights
  // (model_.weights, compute dtype) are refreshed from them after every update. zero1, zero2 and zero3 keep
  // only this rank's slices, in data_parallel_ (master_arena_ then holds those; masters_ is empty, and no
  // whole master exists on the device; zero3's layer tensors use theirs as Zero3Layers::Shard::master).
  std::unique_ptr<Arena> master_arena_;
  model::ModelWeights masters_;
  std::unique_ptr<Arena> lora_arena_;  // LoRA runs: adapters and their gradients (master dtype)
  io::LoraAdapterConfig adapter_config_;
  model::LoraWeights lora_, lora_grads_;
  std::unique_ptr<Arena> lora_compute_arena_;  // when the compute dtype differs from the master's (GPU bf16)
  model::LoraWeights lora_compute_;            //   the adapters in the compute dtype, for the decoder
  std::unique_ptr<DataParallel> data_parallel_;  // how the step meets the other ranks (`sharding`)
  std::unique_ptr<Zero3Layers> zero3_;           // zero3 with trained layer tensors: their slices
  // zero2 over several ranks with trained layer tensors: their gradient slices (layer_gradient_shards.h).
  std::unique_ptr<LayerGradientShards> layer_grads_;
  LayerRounds* rounds_ = nullptr;  // zero3_ or layer_grads_: the step's rounds of layer collectives
  std::unique_ptr<Zero3StepInBackward> zero3_in_backward_;  // zero3 with optimizer_in_backward
  std::unique_ptr<AdamW> optimizer_;                        // over data_parallel_->optimizer_groups()
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Arena> activations_;
  std::unique_ptr<Arena> offload_arena_;  // offload_activations: host (page-locked on the GPU) kept tensors
  std::string memory_plan_summary_;       // one line, printed when the run starts
  RunPlan plan_;
  ops::Context ctx_;
  std::unique_ptr<data::DataLoader> loader_;
  int64_t accum_ = 1;            // micro-batches per optimizer step
  int64_t steps_per_epoch_ = 0;  // optimizer steps
  int64_t total_steps_ = 0;
  TrainerState state_;
  std::unique_ptr<LossScaler> scaler_;  // precision fp16 only
};

}  // namespace lt::train
