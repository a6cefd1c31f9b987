#include "cli/preview_command.h"

#include <fmt/format.h>

#include <charconv>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/example.h"
#include "model/config.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::cli {
namespace {

// The example as text, each run of scored tokens (labels[t] != -100, t >= 1) inside [[ ]].
std::string marked_text(const data::Tokenizer& tokenizer, const data::Example& e) {
  std::string out;
  size_t start = 0;
  auto trained = [&](size_t t) { return t > 0 && e.labels[t] != data::kIgnoreIndex; };
  while (start < e.input_ids.size()) {
    size_t end = start + 1;
    while (end < e.input_ids.size() && trained(end) == trained(start)) ++end;
    const std::string text =
        tokenizer.decode(std::span<const int32_t>(e.input_ids.data() + start, end - start));
    out += trained(start) ? "[[" + text + "]]" : text;
    start = end;
  }
  return out;
}

void run_preview(std::vector<std::string> args) {
  int64_t count = 3;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--num_examples") continue;
    LT_CHECK(i + 1 < args.size(), "preview: '--num_examples' needs a value");
    const std::string& v = args[i + 1];
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), count);
    LT_CHECK(ec == std::errc() && ptr == v.data() + v.size() && count >= 0,
             "preview: '--num_examples' is '{}', expected an integer >= 0", v);
    args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    break;
  }
  std::string yaml;
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    yaml = args[0];
    args.erase(args.begin());
  }
  const train::TrainConfig config = train::load_train_config(yaml, args);
  train::check_not_adapter_dir(config.base_model);
  const model::ModelConfig model = model::load_model_config(config.base_model);
  std::unique_ptr<data::Tokenizer> tokenizer =
      train::load_model_tokenizer(config.base_model, true, model.vocab_size);
  const data::Dataset dataset = train::load_training_data(config, tokenizer.get(), model);
  fmt::print("data: {}\n", data::describe_dataset(dataset, config.cutoff_len));
  for (int64_t i = 0; i < count && size_t(i) < dataset.examples.size(); ++i) {
    const data::Example& e = dataset.examples[size_t(i)];
    fmt::print("\n--- example {} ({} tokens, {} trained) ---\n{}\n", i, e.input_ids.size(),
               data::count_label_tokens(e), marked_text(*tokenizer, e));
  }
}

}  // namespace

void add_preview_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "preview",
      "show the training data as train would see it, trained tokens in [[ ]]: leantune preview "
      "[CONFIG.yaml] [--key value ...] [--num_examples N]");
  sub->allow_extras();
  sub->callback([sub]() { run_preview(sub->remaining()); });
}

}  // namespace lt::cli
