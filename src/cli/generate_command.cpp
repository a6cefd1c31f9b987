#include "cli/generate_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/prompt_template.h"
#include "model/generate.h"
#include "model/lora_merge.h"
#include "train/run_setup.h"

namespace lt::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string ids;
  std::string adapter;
  std::string prompt_template = "raw";
  std::string precision = "fp32";
  std::string device = "cpu";
  int64_t max_new_tokens = 64;
  double temperature = 0;
  double top_p = 1.0;
  int64_t seed = 0;
  bool random_init = false;
  bool json = false;
};

std::vector<int32_t> parse_ids(const std::string& text, int64_t vocab) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LT_CHECK(used == item.size() && !item.empty() && v >= 0 && v < vocab,
             "generate: '--ids' entry '{}' is not a token id in [0, {})", item, vocab);
    ids.push_back(int32_t(v));
  }
  LT_CHECK(!ids.empty(), "generate: '--ids' is empty, expected comma-separated token ids");
  return ids;
}

void run_generate(const GenerateOptions& o) {
  const Device device = train::parse_device(o.device, "generate");
  const train::Precision precision = train::parse_precision(o.precision, "generate");
  train::check_device_precision(device, precision, "generate");
  LT_CHECK(o.prompt.empty() != o.ids.empty(), "generate: give exactly one of '--prompt' and '--ids'");
  LT_CHECK(o.max_new_tokens >= 0, "generate: '--max_new_tokens' is {}, expected >= 0", o.max_new_tokens);
  LT_CHECK(o.temperature >= 0, "generate: '--temperature' is {}, expected >= 0 (0: greedy)", o.temperature);
  LT_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: '--top_p' is {}, expected a value in (0, 1]", o.top_p);
  const DType dtype = train::compute_dtype(precision);
  // Loaded and merged on the host (in f32 when the GPU computes in bf16 or f16), then moved to the device.
  const DType host_dtype = train::master_dtype(dtype);
  train::LoadedModel model = train::load_model(o.model, host_dtype, o.random_init, uint64_t(o.seed));
  if (!o.adapter.empty()) {
    // Folded into this process's copy of the weights: the KV-cache decoder then needs no LoRA pass, and
    // without dropout the merged model computes what base + adapters compute (to rounding).
    train::LoadedAdapter adapter = train::load_adapter(o.adapter, model.config, host_dtype);
    model::merge_lora(model.config, model.weights, adapter.weights);
  }
  if (device != Device::CPU) model = train::to_device(std::move(model), dtype, device);
  std::unique_ptr<data::Tokenizer> tokenizer =
      train::load_model_tokenizer(o.model, !o.prompt.empty(), model.config.vocab_size);
  std::vector<int32_t> prompt;
  if (!o.ids.empty()) {
    prompt = parse_ids(o.ids, model.config.vocab_size);
  } else {
    std::string text = o.prompt;
    if (o.prompt_template == "alpaca")
      text = data::alpaca_prompt(o.prompt, "");
    else if (o.prompt_template == "plain")
      text = o.prompt + "\n";  // the plain template's prompt
    else
      LT_CHECK(o.prompt_template == "raw",
               "generate: '--prompt_template' is '{}', expected raw, plain or alpaca", o.prompt_template);
    prompt = tokenizer->encode_with_special(text);
  }
  model::SamplingOptions s{.max_new_tokens = o.max_new_tokens,
                           .temperature = o.temperature,
                           .top_p = o.top_p,
                           .seed = uint64_t(o.seed),
                           .stop_ids = model.config.eos_token_ids};
  if (tokenizer && tokenizer->eos_id() && s.stop_ids.empty()) s.stop_ids.push_back(*tokenizer->eos_id());
  std::vector<int32_t> out = model::generate(model.config, dtype, model.weights, prompt, s);
  std::string text = tokenizer ? tokenizer->decode(out, true) : std::string();
  if (o.json || !tokenizer) {
    nlohmann::json j{{"prompt_ids", prompt}, {"ids", out}};
    if (tokenizer) j["text"] = text;
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n", text);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub =
      app.add_subcommand("generate", "continue a prompt with a model (KV cache; greedy or sampled)");
  sub->add_option("--model", o->model, "HF model directory")->required();
  sub->add_option("--prompt", o->prompt, "prompt text (encoded with the model's tokenizer)");
  sub->add_option("--ids", o->ids, "prompt token ids, comma-separated");
  sub->add_option("--adapter", o->adapter, "PEFT LoRA adapter directory, merged into --model's weights");
  sub->add_option("--prompt_template", o->prompt_template,
                  "raw (the text as is) | plain | alpaca (--prompt is an instruction)")
      ->capture_default_str();
  sub->add_option("--max_new_tokens", o->max_new_tokens, "tokens to generate")->capture_default_str();
  sub->add_option("--temperature", o->temperature, "0: greedy")->capture_default_str();
  sub->add_option("--top_p", o->top_p, "nucleus sampling mass")->capture_default_str();
  sub->add_option("--seed", o->seed, "sampling seed (and --random_init's)")->capture_default_str();
  sub->add_option("--precision", o->precision, "fp64 | fp32 (cpu); bf16 | fp32 (cuda)")
      ->capture_default_str();
  sub->add_option("--device", o->device, "cpu")->capture_default_str();
  sub->add_flag("--random_init", o->random_init, "random weights from config.json (tests)");
  sub->add_flag("--json", o->json, "print {prompt_ids, ids, text} as JSON");
  sub->callback([o]() { run_generate(*o); });
}

}  // namespace lt::cli
