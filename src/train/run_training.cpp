#include "train/run_training.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include "core/error.h"
#include "data/batch.h"
#include "data/dataset_split.h"
#include "dist/launch.h"
#include "ops/device.h"
#include "train/config_bridge.h"
#include "train/config_enums.h"
#include "train/trainable.h"

namespace lt::train {

TrainResult run_training(const TrainConfig& config, const TrainerHooks& hooks, dist::Communicator* comm) {
  if (!comm) {
    const dist::Launch launch = dist::detect_launch();
    LT_CHECK(launch.world_size == 1,
             "{}: training over {} processes is not wired yet (see issue #18); start leantune train as one "
             "process",
             dist::describe(launch), launch.world_size);
  }
  check_engine_settings(config);
  check_paths(config);
  // Claimed before the model and data are read: a refused output_dir costs nothing.
  std::unique_ptr<io::OutputDir> output = claim_output_dir(config);
  if (config.finetune == Finetune::Lora)
    run_adapter_config(config);  // init_adapter's layout vs the run's keys
  const DType dtype = compute_dtype(config.precision);
  const Device device = config.device;
  LoadedModel model = load_model(config.base_model, dtype, config.random_init, uint64_t(config.seed), device);
  trainable_fn(config,
               model.config);  // a layer range the model does not have is refused before any data work
  std::unique_ptr<data::Tokenizer> tokenizer =
      load_model_tokenizer(config.base_model, false, model.config.vocab_size);
  data::Dataset dataset = load_examples(config.data_path, tokenizer.get(), model.config,
                                        dataset_options(config, config.base_model));
  data::SplitExamples split = data::split_examples(std::move(dataset.examples), double(config.val_set_size),
                                                   uint64_t(config.seed), config.data_path);
  int32_t pad_id = tokenizer ? data::padding_id(*tokenizer) : 0;  // padding is never scored nor attended
  if (!hooks.quiet)
    fmt::print(hooks.out,
               "model {} ({} layers, hidden {}, vocab {}), {}, {} on {}; data {}: {} train / {} validation "
               "examples\n",
               config.base_model, model.config.num_layers, model.config.hidden_size, model.config.vocab_size,
               config.random_init ? "random init" : "pretrained weights",
               name_of(kPrecisionNames, config.precision), ops::device_description(device), config.data_path,
               split.train.size(), split.val.size());
  Trainer trainer(config, model, std::move(split.train), std::move(split.val), pad_id, std::move(output),
                  comm);
  if (!hooks.quiet) {
    int64_t parameters = 0;
    for (const ParamGroup& p : trainer.trainable()) parameters += p.param.numel();
    fmt::print(
        hooks.out,
        "{} steps ({} per epoch, {} micro-batches of {} per step), {} trainable tensors ({} parameters)\n",
        trainer.total_steps(), trainer.steps_per_epoch(), config.batch_size / config.micro_batch_size,
        config.micro_batch_size, trainer.trainable().size(), parameters);
    if (device == Device::CUDA) fmt::print(hooks.out, "attention: {}\n", ops::attention_backend_summary());
    if (const model::LoraWeights* lora = trainer.lora())
      fmt::print(hooks.out, "LoRA: {} adapters on [{}], base weights frozen; {}\n", lora->specs.size(),
                 fmt::join(trainer.adapter_config()->target_modules, ", "),
                 config.init_adapter.empty() ? fmt::format("fresh init (seed {})", config.seed)
                                             : "continuing " + config.init_adapter);
  }
  return trainer.run(hooks);
}

}  // namespace lt::train
