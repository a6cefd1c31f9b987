#include "cli/eval_command.h"

#include <fmt/core.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/timer.h"
#include "data/batch.h"
#include "ops/device.h"
#include "train/evaluate.h"
#include "train/run_setup.h"
#include "train/task_progress.h"

namespace lt::cli {

namespace {

struct EvalOptions {
  std::string model;
  std::string data;
  std::string adapter;
  std::string precision = "auto";  // bf16 on cuda, fp32 on cpu
  std::string device = "auto";     // cuda when usable, else cpu
  int64_t micro_batch_size = 4;
  int64_t cutoff_len = 256;
  std::string prompt_template = "alpaca";
  std::string dataset_format = "auto";
  bool train_on_inputs = true;
  bool random_init = false;
  int64_t seed = 42;
};

void run_eval(const EvalOptions& o) {
  const ops::Context ctx;  // the command's ops: the default kernels with the environment's overrides
  Device device = train::parse_device(o.device, "eval");
  train::Precision precision = train::parse_precision(o.precision, "eval");
  train::resolve_auto_device(device, precision);
  train::check_device_precision(device, precision, "eval");
  LT_CHECK(o.micro_batch_size > 0, "eval: '--micro_batch_size' is {}, expected a positive integer",
           o.micro_batch_size);
  LT_CHECK(o.cutoff_len > 0, "eval: '--cutoff_len' is {}, expected a positive integer", o.cutoff_len);
  const DType dtype = train::compute_dtype(precision);
  train::LoadedModel model = train::load_model(ctx, o.model, dtype, o.random_init, uint64_t(o.seed), device);
  auto tokenizer = train::load_model_tokenizer(o.model, false, model.config.vocab_size);
  train::TrainConfig c;
  c.cutoff_len = o.cutoff_len;
  c.prompt_template = o.prompt_template;
  c.dataset_format = data::data_format_from_name(o.dataset_format);
  c.train_on_inputs = o.train_on_inputs;
  data::Dataset dataset =
      train::load_examples(o.data, tokenizer.get(), model.config, train::dataset_options(c, o.model));
  const int32_t pad_id = tokenizer ? data::padding_id(*tokenizer) : 0;
  std::optional<train::LoadedAdapter> adapter;
  if (!o.adapter.empty()) adapter = train::load_adapter(ctx, o.adapter, model.config, dtype, device);
  const model::LoraWeights* lora = adapter ? &adapter->weights : nullptr;
  Arena activations("activations", ops::memory_resource(device),
                    train::activation_bytes(model.config, dtype, o.micro_batch_size,
                                            train::longest_example(dataset.examples),
                                            lora ? lora->specs : std::vector<model::LoraSpec>{}));
  std::optional<train::TaskProgress> progress;  // made once evaluate knows the number of batches
  Timer timer;
  train::EvalResult r =
      train::evaluate(ctx, model.config, dtype, model.weights, dataset.examples, o.micro_batch_size, pad_id,
                      activations, lora, 0, nullptr, {}, [&](int64_t done, int64_t total) {
                        if (!progress) progress.emplace(train::stderr_progress("eval", "batches", total));
                        progress->update(done, timer.seconds());
                      });
  if (progress) progress->finish();
  nlohmann::json j{{"loss", r.loss}, {"perplexity", std::exp(r.loss)}, {"tokens", r.tokens}};
  fmt::print("{}\n", j.dump());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub =
      app.add_subcommand("eval", "mean token loss and perplexity of a model over a dataset (one JSON line)");
  sub->add_option("--model", o->model, "HF model directory")->required();
  sub->add_option("--data", o->data, "dataset file (alpaca, chat, text or pre-tokenized JSONL)")->required();
  sub->add_option("--adapter", o->adapter, "PEFT LoRA adapter directory applied to --model");
  sub->add_option("--precision", o->precision, "auto (bf16 on cuda, fp32 on cpu) | fp64 | fp32 | bf16")
      ->capture_default_str();
  sub->add_option("--device", o->device, "auto (cuda when usable) | cpu | cuda")->capture_default_str();
  sub->add_option("--micro_batch_size", o->micro_batch_size, "rows per forward")->capture_default_str();
  sub->add_option("--cutoff_len", o->cutoff_len, "tokens per example")->capture_default_str();
  sub->add_option("--prompt_template", o->prompt_template, "alpaca | llama3 | chatml | plain | auto")
      ->capture_default_str();
  sub->add_option("--dataset_format", o->dataset_format, "auto | alpaca | chat | text | pretokenized")
      ->capture_default_str();
  sub->add_option("--train_on_inputs", o->train_on_inputs, "score prompt tokens too")->capture_default_str();
  sub->add_flag("--random_init", o->random_init, "random weights from config.json (tests)");
  sub->add_option("--seed", o->seed, "seed of --random_init")->capture_default_str();
  sub->callback([o]() { run_eval(*o); });
}

}  // namespace lt::cli
