#include "train/run_training.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "core/timer.h"
#include "data/batch.h"
#include "data/dataset_split.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "dist/nccl_communicator.h"
#include "io/bnb4_checkpoint.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/lr_schedule.h"
#include "train/qlora_model.h"
#include "train/trainable.h"
#include "train/zero3_sliced_load.h"

namespace lt::train {
namespace {

// The end-of-run summary: what ran, how long, the losses, where the results are.
std::string run_summary(const TrainResult& r, double seconds, const TrainConfig& config, bool lora) {
  std::string out = fmt::format("done: steps {}-{} of {} in {:.1f} s", r.start_step + 1, r.final_step,
                                r.total_steps, seconds);
  if (!r.losses.empty())
    out += fmt::format("; train loss {:.4f} -> {:.4f}", r.losses.front(), r.losses.back());
  if (!r.evals.empty())
    out += fmt::format("; eval loss {:.4f} at step {}", r.evals.back().eval_loss, r.evals.back().step);
  out += fmt::format("\n  {}: {}",
                     lora ? "adapter (PEFT: adapter_config.json, adapter_model.safetensors)"
                          : "model (config.json, safetensors)",
                     config.output_dir);
  if (!r.last_checkpoint.empty()) out += fmt::format("\n  last checkpoint: {}", r.last_checkpoint);
  return out;
}

}  // namespace

std::unique_ptr<dist::Communicator> join_processes(const dist::Launch& launch, Device device,
                                                   double timeout_s) {
  if (device == Device::CUDA && launch.launcher != "none") {
    // Said on stderr (unbuffered) by every rank of several: a start-up that waits shows where it waits.
    const bool several = launch.world_size > 1;
    if (several)
      fmt::print(stderr, "{}: joining over NCCL (waits up to ddp_timeout, {} s)\n", dist::describe(launch),
                 timeout_s);
    const Timer joined;
    ops::Context comm_ctx;  // the run's GPU and compute stream (the default one), as run_context makes them
    comm_ctx.device = run_gpu(device, launch);
    std::unique_ptr<dist::Communicator> comm = dist::make_nccl_communicator(launch, timeout_s, comm_ctx);
    if (several) fmt::print(stderr, "{}: joined in {:.1f} s\n", dist::describe(launch), joined.seconds());
    return comm;
  }  // world size 1 too: its overhead
  if (launch.world_size == 1) return nullptr;
  LT_CHECK(
      launch.by_mpi() && dist::mpi_available(),
      "{}: training over {} processes on the CPU runs over MPI; start it with mpirun (this build {} MPI)",
      dist::describe(launch), launch.world_size, dist::mpi_available() ? "has" : "lacks");
  return dist::make_mpi_communicator();
}

TrainResult run_training(const TrainConfig& config, const TrainerHooks& hooks, dist::Communicator* comm) {
  const Timer run_timer;
  check_engine_settings(config);
  std::unique_ptr<dist::Communicator> own_comm;
  if (!comm) {
    own_comm = join_processes(dist::detect_launch(), config.device, config.ddp_timeout);
    comm = own_comm.get();
  }
  check_paths(config);
  // Claimed before the model and data are read: a refused output_dir costs nothing. Rank 0 alone writes.
  std::unique_ptr<io::OutputDir> output = comm && !comm->is_main() ? nullptr : claim_output_dir(config);
  if (config.finetune == Finetune::Lora)
    run_adapter_config(config);  // init_adapter's layout vs the run's keys
  const DType dtype = compute_dtype(config.precision);
  const Device device = config.device;
  std::string qlora_summary;
  // The ops' context of the whole run (the trainer makes the same from its plan).
  const ops::Context ctx = run_context(resolve_run_plan(config, device, dtype), device);
  // A 4-bit base trains only as QLoRA: full or 16-bit-LoRA training would silently start from its rounded
  // weights, where the user most likely has (and should give) the 16-bit model.
  LT_CHECK(is_qlora(config) || config.random_init || !io::read_bnb4_quantization(config.base_model),
           "config: base_model '{}' is a 4-bit (bitsandbytes) checkpoint; train it with finetune lora and "
           "bits 4 (QLoRA), or give the 16-bit model for finetune {} with bits {}",
           config.base_model, name_of(model::kFinetuneNames, config.finetune), config.bits);
  // zero3 over several ranks (full or partial fine-tuning): each rank loads only its slices of the trained
  // layer tensors (train/zero3_sliced_load.h), so a model that fits the ranks only sharded starts.
  const int world = comm ? comm->world_size() : 1;
  std::optional<model::ModelConfig> sliced;  // the model's config when it loads sliced
  if (config.sharding == dist::Sharding::Zero3 && world > 1 && !is_qlora(config)) {
    check_not_adapter_dir(config.base_model);
    sliced = model::load_model_config(config.base_model);
    if (!loads_zero3_slices(config, *sliced, world)) sliced.reset();
  }
  LoadedModel model;
  if (is_qlora(config))
    model = load_qlora_model(ctx, config.base_model, qlora_options(config), dtype, config.random_init,
                             uint64_t(config.seed), device, &qlora_summary);
  else if (sliced)
    model = load_zero3_sliced_model(ctx, config.base_model, dtype, config.random_init, uint64_t(config.seed),
                                    device, trainable_fn(config, *sliced), /*frozen=*/true, world,
                                    comm->rank());
  else
    model = load_model(ctx, config.base_model, dtype, config.random_init, uint64_t(config.seed), device);
  trainable_fn(config,
               model.config);  // a layer range the model does not have is refused before any data work
  std::unique_ptr<data::Tokenizer> tokenizer =
      load_model_tokenizer(config.base_model, false, model.config.vocab_size);
  data::Dataset dataset = load_training_data(config, tokenizer.get(), model.config);
  const std::string data_report = data::describe_dataset(dataset, config.cutoff_len);
  data::SplitExamples split = data::split_examples(std::move(dataset.examples), double(config.val_set_size),
                                                   uint64_t(config.seed), dataset.source);
  std::string eval_report;
  if (!config.eval_data_path.empty()) {
    data::Dataset eval = load_examples(config.eval_data_path, tokenizer.get(), model.config,
                                       dataset_options(config, config.base_model));
    eval_report = data::describe_dataset(eval, config.cutoff_len);
    split.val = std::move(eval.examples);
  }
  int32_t pad_id = tokenizer ? data::padding_id(*tokenizer) : 0;  // padding is never scored nor attended
  const bool quiet = hooks.quiet || (comm && !comm->is_main());
  if (!quiet)
    fmt::print(hooks.out,
               "model {} ({} layers, hidden {}, vocab {}), {}, {} on {}; data {}: {} train / {} validation "
               "examples\n",
               config.base_model, model.config.num_layers, model.config.hidden_size, model.config.vocab_size,
               config.random_init ? "random init" : "pretrained weights",
               name_of(kPrecisionNames, config.precision), ops::device_description(device), dataset.source,
               split.train.size(), split.val.size());
  if (!quiet) fmt::print(hooks.out, "data: {}\n", data_report);
  if (!quiet && !eval_report.empty())
    fmt::print(hooks.out, "eval data {}: {}\n", config.eval_data_path, eval_report);
  Trainer trainer(config, model, std::move(split.train), std::move(split.val), pad_id, std::move(output),
                  comm);
  if (!quiet && comm && comm->world_size() > 1)
    fmt::print(hooks.out,
               "{} processes over {}, sharding {}; each step's {} micro-batches split among them\n",
               comm->world_size(), comm->backend(), name_of(kShardingNames, config.sharding),
               config.batch_size / config.micro_batch_size);
  if (!quiet) {
    int64_t parameters = 0;
    for (const ParamGroup& p : trainer.trainable()) parameters += p.param.numel();
    fmt::print(
        hooks.out,
        "{} steps ({} per epoch, {} micro-batches of {} per step), {} trainable tensors ({} parameters)\n",
        trainer.total_steps(), trainer.steps_per_epoch(), config.batch_size / config.micro_batch_size,
        config.micro_batch_size, trainer.trainable().size(), parameters);
    const int64_t warmup =
        resolve_warmup_steps(config.warmup_steps, config.warmup_ratio, trainer.total_steps());
    fmt::print(hooks.out, "schedule: {} from learning_rate {} after {} warmup steps, weight_decay {}\n",
               name_of(kLrScheduleNames, config.lr_scheduler_type), config.learning_rate, warmup,
               config.weight_decay);
    // A warmup as long as the run never reaches the asked learning rate: say so rather than train slowly.
    if (warmup >= trainer.total_steps() && warmup > 0)
      fmt::print(stderr,
                 "warning: the warmup ({} steps) covers the whole run ({} steps): the learning rate never "
                 "reaches learning_rate {}; lower warmup_steps or warmup_ratio\n",
                 warmup, trainer.total_steps(), config.learning_rate);
    if (device == Device::CUDA)
      fmt::print(hooks.out, "attention: {}\n", ops::attention_backend_summary(trainer.context()));
    if (const model::LoraWeights* lora = trainer.lora())
      fmt::print(hooks.out, "LoRA: {} adapters on [{}], base weights frozen; {}\n", lora->specs.size(),
                 fmt::join(trainer.adapter_config()->target_modules, ", "),
                 config.init_adapter.empty() ? fmt::format("fresh init (seed {})", config.seed)
                                             : "continuing " + config.init_adapter);
    if (!qlora_summary.empty())
      fmt::print(hooks.out, "{}; each dequantized to {} right before its GEMM\n", qlora_summary,
                 dtype_name(dtype));
  }
  TrainResult result = trainer.run(hooks);
  if (!quiet && !result.interrupted)
    fmt::print(hooks.out, "{}\n",
               run_summary(result, run_timer.seconds(), config, trainer.lora() != nullptr));
  return result;
}

}  // namespace lt::train
