#include "train/trainer.h"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/timer.h"
#include "dist/rank_split.h"
#include "dist/single_communicator.h"
#include "io/peft_adapter.h"
#include "io/tensorboard.h"
#include "model/chunked_decoder.h"
#include "model/schedule.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "ops/op_profile.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/final_model.h"
#include "train/grad_clip.h"
#include "train/memory_check.h"
#include "train/model_batch.h"
#include "train/model_card.h"
#include "train/progress.h"
#include "train/qlora_model.h"
#include "train/rank_zero.h"
#include "train/sharded_checkpoint.h"
#include "train/stop_signal.h"
#include "train/trainable.h"

namespace lt::train {

namespace {

// The schedule of every micro-batch of the run; the arenas are sized with the same options.
model::ScheduleOptions run_schedule_options(const TrainConfig& c, const RunPlan& plan) {
  return {.chunk_size = c.chunk_size,
          .order = c.schedule,
          .device_checkpoints = plan.device_checkpoints,
          .recompute = c.recompute,
          .offload = c.offload_activations,
          .offload_only = c.offload_only,
          .offload_attention = plan.offload_attention,
          // Whole sequences: the head's backward (and a trainable head's gradient) rides on the forward's
          // logits.
          .head_backward_in_forward = true};
}

// How long the other ranks wait for rank 0 to write a checkpoint or the final model (a large model on a
// slow disk) before they call it lost.
constexpr double kWriteTimeoutS = 3600;

// The process's peak resident memory on CPU; on the GPU, the device memory in use now (after the step,
// everything the run holds: arenas, library workspaces, the CUDA context).
int64_t peak_memory_bytes(Device device) {
  if (device == Device::CPU) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return int64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
  }
  const ops::DeviceMemoryInfo info = ops::device_memory_info(device);
  return int64_t(info.total_bytes - info.free_bytes);
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, LoadedModel& model, std::vector<data::Example> train,
                 std::vector<data::Example> val, int32_t pad_id, std::unique_ptr<io::OutputDir> output,
                 dist::Communicator* comm)
    : config_(config),
      model_(model),
      output_(std::move(output)),
      train_(std::move(train)),
      val_(std::move(val)),
      pad_id_(pad_id) {
  if (!comm) own_comm_ = std::make_unique<dist::SingleCommunicator>();
  comm_ = comm ? comm : own_comm_.get();
  // Rank 0 alone writes into output_dir (logs, checkpoints, the final model); the others only read it.
  if (!output_ && comm_->is_main()) output_ = claim_output_dir(config_);
  // zero3 updates each rank's slices once their reduce-scatter is done (zero3_step_in_backward.h); the
  // other strategies would step a layer before the other ranks' gradients arrive.
  const bool zero3_in_backward = config_.optimizer_in_backward && config_.sharding == dist::Sharding::Zero3;
  LT_CHECK(!config_.optimizer_in_backward || zero3_in_backward ||
               (comm_->world_size() == 1 && config_.sharding == dist::Sharding::None),
           "config: optimizer_in_backward steps each layer before the other ranks' gradients arrive; it "
           "needs one process and sharding none, or sharding zero3, not {} processes and sharding {}",
           comm_->world_size(), name_of(kShardingNames, config_.sharding));
  const model::ModelConfig& mc = model_.config;
  LT_CHECK(!train_.empty(), "{}: no training examples", fmt::join(dataset_paths(config_), " + "));
  const model::TrainableFn trainable = trainable_fn(config_, mc);
  LT_CHECK(is_qlora(config_) == (model_.nf4 != nullptr),
           "config: a QLoRA run (adapter qlora, bits 4 or load_in_4bit) needs its base in 4 bits "
           "(train/qlora_model.h's load_qlora_model) and only such a run takes one; the model given is {}",
           model_.nf4 ? "4-bit" : "dense");
  plan_ = resolve_run_plan(config_, model_.device, model_.dtype);
  ctx_ = run_context(plan_, model_.device);
  MemoryResource& memory = ops::memory_resource(model_.device);
  // Gradients in the master dtype: f32 under the GPU's bf16 policy, so that accumulating over chunks and
  // micro-batches does not round in bf16.
  const DType grad_dtype = master_dtype(model_.dtype);
  // zero3's sliced load (train/zero3_sliced_load.h): the trained layer tensors arrive as this rank's slices
  // and their gradients are made as slices (Zero3Layers takes both over at once, below); zero2 over several
  // ranks makes the trained layer tensors' gradients as slices too (layer_gradient_shards.h); only the other
  // trained tensors get whole gradients here, so no rank ever holds the layers' whole gradients.
  const bool sliced_load = model_.zero3_slices != nullptr;
  const bool zero2_slices = config_.sharding == dist::Sharding::Zero2 && comm_->world_size() > 1 &&
                            LayerGradientShards::slices_anything(mc, trainable);
  const model::TrainableFn zero2_sliced = [&](const model::WeightSpec& spec) {
    return zero2_slices && spec.layer >= 0 && trainable(spec);
  };
  // zero3 shards the frozen layer tensors too (a LoRA run's base, a partial run's untrained ones), unless
  // the base is 4-bit (QLoRA: its packed bytes stay whole).
  const bool zero3_frozen = model_.nf4 == nullptr;
  if (sliced_load) check_sliced_load(trainable, zero3_frozen);
  const model::TrainableFn whole_grads = [&](const model::WeightSpec& spec) {
    return trainable(spec) && !zero2_sliced(spec) &&
           !(sliced_load && model_.zero3_slices->slices.count(spec.hf_name));
  };
  if (config_.optimizer_in_backward && !zero3_in_backward) {
    grad_arena_ = std::make_unique<Arena>(
        "grads", memory, std::max<size_t>(model::shared_layer_grads_bytes(mc, grad_dtype, trainable), 1));
    shared_grads_ = model::allocate_shared_layer_grads(ctx_, mc, grad_dtype, *grad_arena_, trainable);
    grads_ = shared_grads_.grads;
  } else {
    grad_arena_ = std::make_unique<Arena>(
        "grads", memory, std::max<size_t>(model::grads_bytes(mc, grad_dtype, whole_grads), 1));
    grads_ = model::allocate_grads(ctx_, mc, grad_dtype, *grad_arena_, whole_grads);
  }
  if (sliced_load) {
    // Its master slices (with master weights) are widened from these slices by slice_master_weights.
    zero3_ = std::make_unique<Zero3Layers>(ctx_, *comm_, mc, model_.weights, model_.arena, grads_,
                                           grad_arena_, config_.overlap_gathers, Zero3Layers::MasterSlices(),
                                           /*gradient_slices=*/!zero3_in_backward, zero3_frozen,
                                           model_.zero3_slices.get());
    model_.zero3_slices.reset();  // copied into the weights' new arena
  }
  // zero2 over several ranks: the layers' gradients are made as this rank's slices and two layer buffers
  // (layer_gradient_shards.h) before anything else is allocated. One process keeps them whole (its slice is
  // the whole tensor).
  if (zero2_slices) {
    layer_grads_ = std::make_unique<LayerGradientShards>(ctx_, *comm_, mc, grads_, grad_arena_,
                                                         config_.overlap_gathers, /*keep_slices=*/true,
                                                         zero2_sliced);
    layer_grads_->set_layer_major(config_.schedule == model::ScheduleOrder::LayerMajor);
    rounds_ = layer_grads_.get();
  }
  // zero1, zero2, zero3: a rank keeps the masters of its slices only (slice_master_weights, with the
  // optimizer; zero3's layer tensors then take theirs over).
  const bool sliced_masters = keeps_master_weights(config_) && (config_.sharding == dist::Sharding::Zero1 ||
                                                                config_.sharding == dist::Sharding::Zero2 ||
                                                                config_.sharding == dist::Sharding::Zero3);
  if (keeps_master_weights(config_) && !sliced_masters) setup_master_weights(trainable);
  // Each step also rounds the masters into the weights the model computes with (compute_copy).
  std::vector<ParamGroup> params = master_arena_ ? trainable_tensors(mc, masters_, grads_, &model_.weights)
                                                 : trainable_tensors(mc, model_.weights, grads_);
  if (config_.finetune == Finetune::Lora) {
    setup_lora();
    for (ParamGroup& p :
         lora_param_groups(lora_, lora_grads_, lora_compute_arena_ ? &lora_compute_ : nullptr))
      params.push_back(std::move(p));
  }
  LT_CHECK(!params.empty(),
           "config: finetune {} with trainable [{}] and trainable_layers '{}' trains no tensor",
           name_of(model::kFinetuneNames, config_.finetune),
           fmt::format("{}", fmt::join(config_.trainable, ", ")), config_.trainable_layers);
  AdamWOptions adamw = adamw_options(config_);
  adamw.stochastic_rounding = plan_.stochastic_rounding;  // bf16 weights updated without masters
  adamw.seed = uint64_t(config_.seed);
  data_parallel_ = std::make_unique<DataParallel>(ctx_, *comm_, config_.sharding, std::move(params), memory,
                                                  config_.overlap_gathers);
  if (layer_grads_) data_parallel_->attach_gradient_slices(*layer_grads_);
  if (zero3_) data_parallel_->attach_layers(*zero3_);  // the sliced load: params list the moved tensors
  if (sliced_masters) slice_master_weights();
  if (zero3_ && data_parallel_->shards_masters()) {
    const DataParallel& dp = *data_parallel_;
    zero3_->set_master_slices([&dp](const std::string& n) { return dp.master_slice(n); });
  }
  optimizer_ = std::make_unique<AdamW>(ctx_, data_parallel_->optimizer_groups(), adamw);
  if (zero3_in_backward) {
    LT_CHECK(
        !lora_arena_ && config_.chunk_size == 0 &&
            gradient_accumulation_steps(config_) == comm_->world_size() &&
            config_.precision != Precision::Fp16 && config_.max_grad_norm == 0,
        "config: optimizer_in_backward with sharding zero3 needs finetune full or partial, chunk_size 0, "
        "one micro-batch per rank and step (batch_size {} = micro_batch_size {} x {} processes), no fp16 "
        "and max_grad_norm 0",
        config_.batch_size, config_.micro_batch_size, comm_->world_size());
  } else if (config_.optimizer_in_backward) {
    LT_CHECK(!lora_arena_ && config_.chunk_size == 0 && gradient_accumulation_steps(config_) == 1 &&
                 config_.precision != Precision::Fp16 && config_.max_grad_norm == 0,
             "config: optimizer_in_backward needs finetune full or partial, chunk_size 0, batch_size = "
             "micro_batch_size, no fp16 and max_grad_norm 0 (validate() refuses the others)");
    in_backward_ = std::make_unique<OptimizerInBackward>(ctx_, mc, *optimizer_, shared_grads_);
  }

  accum_ = gradient_accumulation_steps(config_);
  const int64_t pack_len = config_.cutoff_len;
  loader_ =
      std::make_unique<data::DataLoader>(std::span<const data::Example>(train_),
                                         data::LoaderOptions{.micro_batch_size = config_.micro_batch_size,
                                                             .shuffle = config_.shuffle,
                                                             .seed = uint64_t(config_.seed),
                                                             .group_by_length = config_.group_by_length,
                                                             .packing = config_.packing,
                                                             .pack_len = config_.packing ? pack_len : 0,
                                                             .pad_id = pad_id_});
  steps_per_epoch_ = (loader_->steps_per_epoch() + accum_ - 1) / accum_;
  total_steps_ = config_.max_steps > 0 ? config_.max_steps
                                       : int64_t(std::ceil(config_.num_epochs * double(steps_per_epoch_)));
  total_steps_ = std::max<int64_t>(total_steps_, 1);
  schedule_ = std::make_unique<LrSchedule>(lr_schedule(config_, total_steps_));

  const int64_t rows = config_.micro_batch_size;
  const int64_t tokens =
      std::max(config_.packing ? pack_len : longest_example(train_), longest_example(val_));
  // The memory plan of the run (refused here, before any step, when it exceeds memory_limit); a 4-bit
  // checkpoint's projections are planned with their own double quantization.
  TrainConfig planned = config_;
  if (model_.nf4) planned.bnb_4bit_use_double_quant = model_.nf4->double_quant;
  const model::MemoryPlan memory_plan = check_run_memory(planned, mc, model_.dtype, rows, tokens, lora_.specs,
                                                         model_.device, comm_->world_size());
  memory_plan_summary_ = model::format_memory_plan_summary(memory_plan);
  resolve_attention_offload(plan_, config_, mc, model_.dtype, rows, tokens);
  resolve_checkpoint_placement(plan_, memory_plan);
  const model::ScheduleOptions options = run_schedule_options(config_, plan_);
  activations_ = std::make_unique<Arena>(
      "activations", memory,
      model::schedule_arena_bytes(mc, model_.dtype, rows, tokens, options, lora_.specs));
  if (config_.offload_activations)
    offload_arena_ = std::make_unique<Arena>(
        "offloaded activations", ops::staging_memory(model_.device),
        model::schedule_offload_bytes(mc, model_.dtype, rows, tokens, options, lora_.specs));

  int64_t trained_elements = 0;
  for (const ParamGroup& p : data_parallel_->full()) trained_elements += p.param.numel();
  check_same_run(*comm_,
                 {{"the training examples", int64_t(train_.size())},
                  {"micro-batches per step", accum_},
                  {"the total steps", total_steps_},
                  {"the trainable elements", trained_elements},
                  {"the sharding", int64_t(config_.sharding)},
                  {"the gradient buckets", data_parallel_->gradient_buckets()}},
                 kWriteTimeoutS);
  state_.rng_seed = uint64_t(config_.seed);
  if (config_.resume.empty()) {
    // A fresh run among another run's checkpoints would mix them up (and rotation could delete its own).
    const auto existing = list_checkpoints(config_.output_dir);
    LT_CHECK(
        existing.empty(),
        "config: 'output_dir' is '{}', which already holds checkpoints ({}); continue that run with --resume "
        "latest, or choose another output_dir",
        config_.output_dir, existing.back().second);
  } else {
    const std::string dir = resolve_resume_dir(config_.resume, config_.output_dir);
    check_resume_compatible(dir, config_);
    check_resume_position(dir, read_trainer_state(dir), loader_->steps_per_epoch(), accum_);
    // This rank's optimizer state, from rank files of any world size or a whole file (sharded_checkpoint.h).
    // Sliced masters: the checkpoint's whole masters are read into host memory, then cut. The sliced load:
    // its layer tensors are read one at a time and cut into their slices (resume_streamed).
    const DType saved_dtype = sliced_masters ? wide_master_dtype(model_.dtype) : model_.dtype;
    const std::optional<model::StreamedWeights> streamed =
        sliced_load ? std::optional(resume_streamed(saved_dtype)) : std::nullopt;
    model::HostWeights whole_masters;
    if (sliced_masters)
      whole_masters = model::host_allocation(
          mc, saved_dtype, streamed ? streamed->held : model::TrainableFn(model::train_all));
    state_ = resume_checkpoint(ctx_, dir, mc, sliced_masters ? whole_masters.weights : saved_weights(),
                               *data_parallel_, comm_->rank(), *optimizer_, lora_arena_ ? &lora_ : nullptr,
                               lora_arena_ ? &adapter_config_ : nullptr, streamed ? &*streamed : nullptr);
    if (sliced_masters) load_master_slices(whole_masters.weights);
  }
  if (config_.precision == Precision::Fp16) {
    scaler_ = std::make_unique<LossScaler>(LossScalerOptions{
        .initial_scale = config_.loss_scale_init, .growth_interval = config_.loss_scale_growth_interval});
    if (state_.loss_scale > 0) scaler_->restore(state_.loss_scale, state_.loss_scale_good_steps);
  }
  refresh_lora_compute();
  refresh_working_weights();
  if (!zero3_ && config_.sharding == dist::Sharding::Zero3 &&
      Zero3Layers::shards_anything(mc, trainable, zero3_frozen)) {
    // The whole load: the layer tensors are cut from the whole weights and gradients now. With master
    // weights the layer tensors' master slices are DataParallel's (zero3_layers.h).
    DataParallel& dp = *data_parallel_;
    zero3_ = std::make_unique<Zero3Layers>(
        ctx_, *comm_, mc, model_.weights, model_.arena, grads_, grad_arena_, config_.overlap_gathers,
        dp.shards_masters()
            ? Zero3Layers::MasterSlices([&dp](const std::string& n) { return dp.master_slice(n); })
            : Zero3Layers::MasterSlices(),
        /*gradient_slices=*/!zero3_in_backward, zero3_frozen);
    dp.attach_layers(*zero3_, trainable_tensors(mc, model_.weights, grads_), *optimizer_);
  }
  if (zero3_) {
    zero3_->set_layer_major(config_.schedule == model::ScheduleOrder::LayerMajor);
    rounds_ = zero3_.get();
    if (zero3_in_backward && !zero3_->shards().empty())  // trained layer tensors to step (else refused below)
      zero3_in_backward_ = std::make_unique<Zero3StepInBackward>(ctx_, *comm_, *zero3_, *optimizer_, memory);
  }
  LT_CHECK(!zero3_in_backward || zero3_in_backward_,
           "config: optimizer_in_backward with sharding zero3 updates the decoder layers' slices during the "
           "backward, but this run trains no layer tensor (trainable: {}); set optimizer_in_backward: false",
           fmt::format("{}", fmt::join(config_.trainable, ", ")));
}

Trainer::~Trainer() = default;

Trainer::StepResult Trainer::forward_backward(int64_t step, int64_t data_epoch, int64_t first, int64_t end) {
  // This rank's micro-batches of the step (all of them in one process) first: the label count over every
  // rank is the loss's denominator.
  const dist::IndexRange mine = dist::rank_share(first, end, comm_->rank(), comm_->world_size());
  std::vector<ModelBatch> batches;
  StepResult r;
  for (int64_t i = mine.begin; i < mine.end; ++i) {
    batches.push_back(to_model_batch(loader_->batch(data_epoch, i)));
    r.label_tokens += batches.back().label_tokens;
    r.tokens += batches.back().tokens;
  }
  double counts[2] = {double(r.label_tokens), double(r.tokens)};  // exact in f64 below 2^53
  comm_->all_reduce(Tensor(counts, DType::F64, {2}), dist::ReduceOp::Sum);
  r.label_tokens = int64_t(counts[0]), r.tokens = int64_t(counts[1]);
  // A step whose examples score no token has loss 0 and zero gradients (the denominator only scales).
  const int64_t denominator = std::max<int64_t>(r.label_tokens, 1);
  if (in_backward_)
    in_backward_->begin_step(step + 1, schedule_->lr(step));  // zeroes the gradients
  else
    model::zero_grads(ctx_, model_.config, grads_);
  if (zero3_in_backward_) zero3_in_backward_->begin_step(step + 1, schedule_->lr(step));
  const bool lora = lora_arena_ != nullptr;
  if (lora) model::zero_lora(ctx_, lora_grads_);
  // zero3, zero2's gradient slices: every rank runs as many rounds as the rank with most micro-batches
  // (layer_rounds.h).
  const size_t rounds =
      rounds_ ? size_t(dist::rank_share(first, end, 0, comm_->world_size()).size()) : batches.size();
  if (rounds_) rounds_->begin_step(int64_t(rounds));
  for (size_t i = 0; i < rounds; ++i) {
    if (i >= batches.size()) {
      rounds_->pad_round(rounds_->round_chunks(0));
      continue;
    }
    ModelBatch& batch = batches[i];
    const Arena::Mark mark = activations_->mark();
    const Arena::Mark offload_mark = offload_arena_ ? offload_arena_->mark() : Arena::Mark{0, 0};
    const model::LoraDropout dropout{.p = config_.lora_dropout,
                                     .seed = uint64_t(config_.seed),
                                     .step = step,
                                     .micro_batch = mine.begin - first + int64_t(i)};  // index in the step
    // One schedule for whole sequences (chunk_size 0) and chunks (same gradients, O(C) memory).
    const model::ScheduleOptions options = run_schedule_options(config_, plan_);
    std::unique_ptr<model::Schedule> schedule =
        model::make_schedule(ctx_, model_.config, model_.dtype, batch.B, batch.T, options, *activations_,
                             lora_.specs, offload_arena_.get());
    schedule->set_head_gradient(model::head_weight(model_.config, grads_));
    model::LayerHooks hooks;
    if (in_backward_)
      hooks = {.before_backward = [this](int64_t layer) { in_backward_->layer_starts_backward(layer); },
               .after_backward = [this](int64_t layer) { in_backward_->layer_done(layer); }};
    if (rounds_) hooks = rounds_->hooks();
    if (data_parallel_->overlaps() && i + 1 == batches.size())
      hooks = data_parallel_->backward_hooks();  // the step's gradients are complete
    // Each layer's updated weights arrive (overlapped all-gather) before its forward.
    schedule->set_layer_hooks(model::chained(data_parallel_->parameter_hooks(), hooks));
    const int64_t round_chunks = rounds_ ? rounds_->round_chunks(schedule->num_chunks()) : 0;
    if (scaler_) schedule->set_loss_scale(scaler_->scale());
    Timer forward;
    r.loss += schedule->forward(model_.weights, batch.view(), denominator, lora_for_compute(), dropout);
    r.forward_s += forward.seconds();
    if (rounds_) rounds_->pad_passes(round_chunks - schedule->num_chunks());
    if (in_backward_) in_backward_->set_loss(r.loss);  // one micro-batch: the step's loss
    Timer backward;
    schedule->backward(model_.weights, grads_, lora ? &lora_grads_ : nullptr);
    if (rounds_) rounds_->finish_micro_batch();
    ops::synchronize(ctx_, model_.device);  // GPU work is asynchronous: time it to its end
    r.backward_s += backward.seconds();
    schedule.reset();  // its buffers go back to the arenas below
    activations_->release(mark);
    if (offload_arena_) offload_arena_->release(offload_mark);
  }
  data_parallel_->finish_parameters();  // a rank without micro-batches ran no forward hook
  // Each rank holds the gradient of its micro-batches over the global denominator: the sum is the step's.
  // Before the loss: a rank without micro-batches issues the buckets the others started in the backward.
  if (!in_backward_) data_parallel_->reduce_gradients();
  comm_->all_reduce(Tensor(&r.loss, DType::F64, {1}), dist::ReduceOp::Sum);  // each rank's share of the mean
  return r;
}

std::pair<double, bool> Trainer::apply_gradients(const StepResult& r, double lr) {
  if (in_backward_) return {in_backward_->finish_step(), true};  // stepped during backward
  if (zero3_in_backward_) {  // the layers stepped during backward, the model-level tensors now
    const double norm = zero3_in_backward_->finish_step(r.loss);
    data_parallel_->gather_parameters();
    return {norm, true};
  }
  double grad_norm = 0;
  if (scaler_) {
    // An overflowed fp16 forward (loss inf) is skipped like overflowed gradients.
    // The norm is over every rank's gradients: an overflow on any rank skips the step on every rank.
    grad_norm = std::isfinite(r.loss)
                    ? data_parallel_->unscale_and_clip(scaler_->scale(), config_.max_grad_norm)
                    : r.loss;
    if (!scaler_->update(std::isfinite(grad_norm), state_.step + 1)) return {grad_norm, false};
  } else {
    grad_norm = data_parallel_->clip(config_.max_grad_norm);
    LT_CHECK(std::isfinite(grad_norm) && std::isfinite(r.loss),
             "step {}: the loss ({}) or the gradient norm ({}) is not finite; lower learning_rate or check "
             "the data",
             state_.step + 1, r.loss, grad_norm);
  }
  optimizer_->step(lr);  // also refreshes the compute copies (LoRA's, master weights' working weights)
  data_parallel_->gather_parameters();
  return {grad_norm, true};
}

EvalMetrics Trainer::run_eval(int64_t step, double epoch) {
  data_parallel_->finish_parameters();  // the last step's overlapped gathers
  // Each rank evaluates its share of the batches, and their sums are added (evaluate.h EvalShare). zero3:
  // each layer gathered into a slot before its forward (Zero3Layers::evaluation_hooks), never the whole
  // model, with the rounds padded so that every rank issues the same gathers.
  EvalShare share;
  share.rank = comm_->rank();
  share.world = comm_->world_size();
  if (zero3_ && zero3_->shards_any()) {
    share.hooks = zero3_->evaluation_hooks();
    share.round_passes = [this](int64_t mine) { return zero3_->evaluation_round_passes(mine); };
    share.pad_passes = [this](int64_t passes) { zero3_->pad_evaluation(passes); };
  }
  Timer timer;
  const EvalResult e =
      evaluate(ctx_, model_.config, model_.dtype, model_.weights, val_, config_.micro_batch_size, pad_id_,
               *activations_, lora_for_compute(), config_.chunk_size, offload_arena_.get(),
               {.order = config_.schedule, .device_checkpoints = plan_.device_checkpoints}, {}, share);
  double sums[2] = {e.loss_sum, double(e.tokens)};  // token counts are exact in f64 below 2^53
  comm_->all_reduce(Tensor(sums, DType::F64, {2}), dist::ReduceOp::Sum);
  const auto tokens = int64_t(sums[1]);
  const double loss = tokens > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN();
  return {.step = step, .epoch = epoch, .eval_loss = loss, .eval_tokens = tokens, .eval_s = timer.seconds()};
}

std::string Trainer::write_checkpoint(const TrainerState& state, const TrainerHooks& hooks) {
  std::unique_ptr<Arena> gathered;  // zero3: the whole model while it is written
  const model::ModelWeights weights = whole_weights(gathered);
  CheckpointContents c{.config = &config_,
                       .model = &model_.config,
                       .weights = &weights,
                       .optimizer = optimizer_.get(),
                       .schedule = schedule_.get(),
                       .state = state,
                       .write_extra = hooks.write_extra,
                       .lora = lora_arena_ ? &lora_ : nullptr,
                       .adapter = lora_arena_ ? &adapter_config_ : nullptr,
                       .between_rename_and_delete = hooks.between_rename_and_delete,
                       .plan = &plan_};
  // A sharded optimizer: every rank writes its own slices (sharded_checkpoint.h).
  if (data_parallel_->shards_optimizer())
    return save_sharded_checkpoint(ctx_, *comm_, config_.output_dir, c, data_parallel_->state_layout(),
                                   config_.sharding, config_.save_total_limit, kWriteTimeoutS);
  std::string path = config_.output_dir + "/" + checkpoint_dir_name(state.step);
  write_on_rank_zero(
      *comm_, "a checkpoint",
      [&] { path = save_checkpoint(ctx_, config_.output_dir, c, config_.save_total_limit); }, kWriteTimeoutS);
  return path;
}

TrainResult Trainer::run(const TrainerHooks& hooks) {
  TrainResult result;
  result.start_step = result.final_step = state_.step;
  result.total_steps = total_steps_;
  // Rank 0 alone prints and writes logs; the other ranks compute the same numbers.
  std::optional<MetricsLog> metrics;
  std::optional<io::TensorBoardWriter> tensorboard;
  if (comm_->is_main()) metrics.emplace(config_.output_dir, state_.step);
  if (comm_->is_main()) tensorboard.emplace(config_.output_dir + "/runs");
  const bool quiet = hooks.quiet || !comm_->is_main();
  std::FILE* out = hooks.out;
  ProgressReporter progress(out, !quiet && isatty(fileno(out)), total_steps_,
                            quiet ? 0 : config_.logging_steps, state_.step);
  auto say = [&](const std::string& text) {
    if (!quiet) progress.message(text);
  };
  say(format_run_header(plan_) + "memory plan: " + memory_plan_summary_);
  if (state_.step > 0)
    say(fmt::format("resumed from step {} (epoch {}, micro-batch {} of its order)", state_.step,
                    state_.data_epoch, state_.data_index));
  const int64_t micro_per_epoch = loader_->steps_per_epoch();
  Timer run_timer;

  while (state_.step < total_steps_) {
    Timer step_timer;
    const int64_t first = state_.data_index, end = std::min(first + accum_, micro_per_epoch);
    StepResult r = forward_backward(state_.step, state_.data_epoch, first, end);

    Timer opt_timer;
    const double lr = schedule_->lr(state_.step);
    const double loss_scale = scaler_ ? scaler_->scale() : 0.0;
    const auto [grad_norm, applied] = apply_gradients(r, lr);
    if (!applied)
      say(fmt::format("step {}: fp16 gradients not finite at loss scale {}; update skipped, scale now {}",
                      state_.step + 1, loss_scale, scaler_->scale()));
    ops::synchronize(ctx_, model_.device);  // the step's time includes its GPU work
    const double optimizer_s = opt_timer.seconds();
    ops::op_profile_step(ctx_);  // profile_ops only

    state_.step += 1;
    state_.data_index = end;
    if (end == micro_per_epoch) state_.data_epoch += 1, state_.data_index = 0;
    state_.epoch = double(state_.data_epoch) + double(state_.data_index) / double(micro_per_epoch);
    state_.rng_offset = uint64_t(state_.step);
    state_.last_lr = lr;
    state_.total_steps = total_steps_;
    if (scaler_) state_.loss_scale = scaler_->scale(), state_.loss_scale_good_steps = scaler_->good_steps();

    const double step_s = step_timer.seconds();
    StepMetrics m{.step = state_.step,
                  .epoch = state_.epoch,
                  .loss = r.loss,
                  .lr = lr,
                  .grad_norm = grad_norm,
                  .tokens = r.label_tokens,
                  .tokens_per_s = double(r.tokens) / std::max(step_s, 1e-9),
                  .forward_s = r.forward_s,
                  .backward_s = r.backward_s,
                  .optimizer_s = optimizer_s,
                  .peak_memory_bytes = peak_memory_bytes(model_.device),
                  .loss_scale = loss_scale,
                  .skipped = !applied};
    if (metrics) metrics->log(m);
    for (auto [tag, value] : {std::pair<const char*, double>{"train/loss", m.loss},
                              {"train/learning_rate", m.lr},
                              {"train/grad_norm", m.grad_norm},
                              {"train/epoch", m.epoch},
                              {"train/tokens_per_s", m.tokens_per_s}})
      if (tensorboard) tensorboard->add_scalar(tag, value, m.step);
    if (scaler_ && tensorboard) tensorboard->add_scalar("train/loss_scale", m.loss_scale, m.step);
    result.losses.push_back(r.loss);
    result.final_step = state_.step;
    if (comm_->is_main()) progress.step(m, run_timer.seconds());
    if (hooks.on_step) hooks.on_step(m);

    const bool last = state_.step == total_steps_;
    if (!val_.empty() && ((config_.eval_steps > 0 && state_.step % config_.eval_steps == 0) || last)) {
      EvalMetrics e = run_eval(state_.step, state_.epoch);
      if (metrics) metrics->log(e);
      if (tensorboard) tensorboard->add_scalar("eval/loss", e.eval_loss, e.step);
      result.evals.push_back(e);
      say(fmt::format("eval at step {}: loss {:.4f} over {} tokens ({:.1f} s)", e.step, e.eval_loss,
                      e.eval_tokens, e.eval_s));
    }
    const bool stop = stop_requested_on_any_rank(*comm_);
    if (config_.save_strategy != SaveStrategy::No &&
        ((config_.save_steps > 0 && state_.step % config_.save_steps == 0) || last || stop)) {
      result.last_checkpoint = write_checkpoint(state_, hooks);
      say(fmt::format("saved {}", result.last_checkpoint));
    }
    if (stop && !last) {
      result.interrupted = true;
      progress.finish();
      say(fmt::format("stopped by a signal after step {}; continue with --resume latest", state_.step));
      return result;
    }
  }
  progress.finish();
  if (const std::string profile = ops::op_profile_report(ctx_); !profile.empty()) say(profile);
  std::unique_ptr<Arena> gathered;  // zero3: the whole model while it is written
  const model::ModelWeights whole = whole_weights(gathered);
  write_on_rank_zero(
      *comm_, "the final model", [&] { save_final(whole, result); }, kWriteTimeoutS);
  say(fmt::format("final {} written to {}", lora_arena_ ? "LoRA adapter (PEFT)" : "model",
                  config_.output_dir));
  return result;
}

}  // namespace lt::train
