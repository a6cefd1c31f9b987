#include "cli/generate_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/encode_segments.h"
#include "data/jinja.h"
#include "data/prompt_template.h"
#include "model/generate.h"
#include "model/lora_merge.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string prompts_file;
  std::string ids;
  std::string adapter;
  std::string prompt_template = "auto";
  std::string precision = "auto";  // bf16 on cuda, fp32 on cpu
  std::string device = "auto";     // cuda when usable, else cpu
  int64_t max_new_tokens = 64;
  int64_t batch_size = 8;  // prompts decoded together (rows of one KV cache)
  double temperature = 0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double repetition_penalty = 1.0;
  std::vector<std::string> stop;
  bool stream = false;
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

// The template the prompt is rendered with. auto: the training run's when the adapter directory holds
// its train_config.yaml (a checkpoint), else the model's own chat template ("model") when it has one,
// else alpaca with an adapter (train's default template) and the raw text without.
std::string resolve_template(const GenerateOptions& o) {
  if (o.prompt_template != "auto") return o.prompt_template;
  namespace fs = std::filesystem;
  const fs::path run_config = fs::path(o.adapter) / "train_config.yaml";
  if (!o.adapter.empty() && fs::exists(run_config)) {
    const train::TrainConfig c = train::parse_train_config_yaml(
        read_input_file(run_config.string(), kMaxSmallJsonBytes, "config file"), run_config.string());
    if (c.prompt_template != "auto") return c.prompt_template;
  }
  if (data::model_chat_template(o.model)) return "model";
  return o.adapter.empty() ? "raw" : "alpaca";
}

// The prompt's ids under `name`: raw (the text as is), plain, alpaca (an instruction), model (the model's
// own Jinja chat template with one user turn and add_generation_prompt, tokenized with its special tokens
// as apply_chat_template(tokenize=True) does), or leantune's llama3/chatml (one user turn and the
// assistant's header).
std::vector<int32_t> render_prompt(const data::Tokenizer& tokenizer, const std::string& name,
                                   const std::string& prompt, const std::string& model_dir) {
  if (name == "raw") return tokenizer.encode_with_special(prompt);
  if (name == "alpaca") return tokenizer.encode_with_special(data::alpaca_prompt(prompt, ""));
  if (name == "plain") return tokenizer.encode_with_special(prompt + "\n");  // the plain template's prompt
  if (name == "model") {
    const std::optional<std::string> source = data::model_chat_template(model_dir);
    LT_CHECK(source.has_value(), "generate: '--prompt_template' is model, but {} has no chat template",
             model_dir);
    auto token_text = [&](std::optional<int32_t> id) {
      return id ? tokenizer.id_to_token(*id) : std::string();
    };
    const nlohmann::json context{{"messages", {{{"role", "user"}, {"content", prompt}}}},
                                 {"add_generation_prompt", true},
                                 {"bos_token", token_text(tokenizer.bos_id())},
                                 {"eos_token", token_text(tokenizer.eos_id())}};
    return tokenizer.encode(data::render_jinja(*source, context), /*allow_special=*/true);
  }
  const data::TemplateKind kind = data::template_from_name(name);
  std::vector<data::Segment> segments = data::render_chat(kind, {{"user", prompt}});
  if (kind == data::TemplateKind::llama3) {
    segments.push_back({"<|start_header_id|>", true, true});
    segments.push_back({"assistant", true, false});
    segments.push_back({"<|end_header_id|>", true, true});
    segments.push_back({"\n\n", true, false});
  } else {
    segments.push_back({"<|im_start|>", true, true});
    segments.push_back({"assistant\n", true, false});
  }
  data::EncodeOptions encode = data::encode_options_for(kind, tokenizer, int64_t(1) << 30, true);
  return data::encode_segments(tokenizer, segments, encode).input_ids;
}

// The prompts: --prompt, or every non-blank line of --prompts_file (a JSONL line {"prompt": ...} gives its
// field; any other line is the prompt itself).
std::vector<std::string> read_prompts(const GenerateOptions& o) {
  if (o.prompts_file.empty()) return {o.prompt};
  std::vector<std::string> prompts;
  std::stringstream in(read_input_file(o.prompts_file, uint64_t(1) << 30, "prompts file"));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.front() == '{') {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      LT_CHECK(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
               "generate: {}:{}: expected {{\"prompt\": \"...\"}} or a line of plain text", o.prompts_file,
               number);
      prompts.push_back(j["prompt"].get<std::string>());
    } else {
      prompts.push_back(line);
    }
  }
  LT_CHECK(!prompts.empty(), "generate: '--prompts_file' {} has no prompt", o.prompts_file);
  return prompts;
}

// The text of `ids` cut before the first stop string (if any).
std::string cut_at_stop(std::string text, const std::vector<std::string>& stop, bool* stopped = nullptr) {
  size_t cut = std::string::npos;
  for (const std::string& s : stop) cut = std::min(cut, text.find(s));
  if (stopped) *stopped = cut != std::string::npos;
  if (cut != std::string::npos) text.resize(cut);
  return text;
}

// How much of `text` (the answer so far, already cut before any stop string) streaming may print now: all but
// a tail the next tokens may still take back, that is the longest tail that begins a stop string (the final
// answer is cut there if the stop string completes) and a trailing run of U+FFFD (the bytes of a character
// whose last bytes are still to come decode as U+FFFD meanwhile).
size_t settled_length(const std::string& text, const std::vector<std::string>& stop) {
  size_t keep = text.size();
  for (const std::string& s : stop)
    for (size_t n = std::min(s.size() - 1, text.size()); n > 0; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = std::min(keep, text.size() - n);
        break;
      }
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  for (int i = 0;
       i < 3 && keep >= kReplacement.size() &&
       std::string_view(text).substr(keep - kReplacement.size(), kReplacement.size()) == kReplacement;
       ++i)
    keep -= kReplacement.size();
  return keep;
}

void run_generate(const GenerateOptions& o) {
  const ops::Context ctx;  // the command's ops: the default kernels with the environment's overrides
  Device device = train::parse_device(o.device, "generate");
  train::Precision precision = train::parse_precision(o.precision, "generate");
  train::resolve_auto_device(device, precision);
  train::check_device_precision(device, precision, "generate");
  LT_CHECK(int(!o.prompt.empty()) + int(!o.ids.empty()) + int(!o.prompts_file.empty()) == 1,
           "generate: give exactly one of '--prompt', '--prompts_file' and '--ids'");
  LT_CHECK(o.batch_size >= 1, "generate: '--batch_size' is {}, expected >= 1", o.batch_size);
  LT_CHECK(o.max_new_tokens >= 0, "generate: '--max_new_tokens' is {}, expected >= 0", o.max_new_tokens);
  LT_CHECK(o.temperature >= 0, "generate: '--temperature' is {}, expected >= 0 (0: greedy)", o.temperature);
  LT_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: '--top_p' is {}, expected a value in (0, 1]", o.top_p);
  LT_CHECK(o.top_k >= 0, "generate: '--top_k' is {}, expected >= 0 (0: every token)", o.top_k);
  LT_CHECK(o.repetition_penalty > 0, "generate: '--repetition_penalty' is {}, expected > 0 (1: none)",
           o.repetition_penalty);
  for (const std::string& s : o.stop) LT_CHECK(!s.empty(), "generate: '--stop' is empty, expected a string");
  const DType dtype = train::compute_dtype(precision);
  // Loaded and merged on the host (in f32 when the GPU computes in bf16 or f16), then moved to the device.
  const DType host_dtype = train::master_dtype(dtype);
  train::LoadedModel model = train::load_model(ctx, o.model, host_dtype, o.random_init, uint64_t(o.seed));
  if (!o.adapter.empty()) {
    // Folded into this process's copy of the weights: the KV-cache decoder then needs no LoRA pass, and
    // without dropout the merged model computes what base + adapters compute (to rounding).
    train::LoadedAdapter adapter = train::load_adapter(ctx, o.adapter, model.config, host_dtype);
    model::merge_lora(ctx, model.config, model.weights, adapter.weights);
  }
  if (device != Device::CPU) model = train::to_device(ctx, std::move(model), dtype, device);
  std::unique_ptr<data::Tokenizer> tokenizer =
      train::load_model_tokenizer(o.model, o.ids.empty(), model.config.vocab_size);
  const std::string template_name = o.ids.empty() ? resolve_template(o) : "raw";
  LT_CHECK(
      template_name == "raw" || template_name == "alpaca" || template_name == "plain" ||
          template_name == "llama3" || template_name == "chatml" || template_name == "model",
      "generate: '--prompt_template' is '{}', expected auto, model, raw, plain, alpaca, llama3 or chatml",
      template_name);
  model::SamplingOptions s{.max_new_tokens = o.max_new_tokens,
                           .temperature = o.temperature,
                           .top_p = o.top_p,
                           .seed = uint64_t(o.seed),
                           .stop_ids = model.config.eos_token_ids,
                           .top_k = o.top_k,
                           .repetition_penalty = o.repetition_penalty};
  if (tokenizer && tokenizer->eos_id() && s.stop_ids.empty()) s.stop_ids.push_back(*tokenizer->eos_id());
  // A chat template's end of turn ends the answer too.
  for (const char* marker : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"})
    if (tokenizer && (template_name == "llama3" || template_name == "chatml" || template_name == "model"))
      if (auto id = tokenizer->token_to_id(marker)) s.stop_ids.push_back(*id);

  const std::vector<std::string> texts =
      o.ids.empty() ? read_prompts(o) : std::vector<std::string>{std::string()};
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : texts)
    prompts.push_back(o.ids.empty() ? render_prompt(*tokenizer, template_name, text, o.model)
                                    : parse_ids(o.ids, model.config.vocab_size));
  // Streaming prints one answer as it grows, so it decodes the prompts one at a time, in the file's order:
  // rows of one batch would interleave their text on the terminal.
  const size_t batch = o.stream ? 1 : size_t(o.batch_size);
  for (size_t first = 0; first < prompts.size(); first += batch) {
    const std::vector<std::vector<int32_t>> rows(
        prompts.begin() + int64_t(first), prompts.begin() + int64_t(std::min(prompts.size(), first + batch)));
    std::vector<std::vector<int32_t>> so_far(rows.size());
    size_t printed = 0;  // bytes of the (one) streamed row's decoded text already printed
    auto on_token = [&](size_t row, int32_t id) {
      if (!tokenizer) return true;
      so_far[row].push_back(id);
      if (o.stop.empty() && !o.stream) return true;
      bool stopped = false;
      const std::string now = cut_at_stop(tokenizer->decode(so_far[row], true), o.stop, &stopped);
      const size_t settled = settled_length(now, o.stop);
      if (o.stream && !o.json && settled > printed) {
        fmt::print("{}", now.substr(printed, settled - printed));
        std::fflush(stdout);
        printed = settled;
      }
      return !stopped;
    };
    const std::vector<std::vector<int32_t>> outs =
        model::generate_rows(ctx, model.config, dtype, model.weights, rows, s, on_token);
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::string answer =
          tokenizer ? cut_at_stop(tokenizer->decode(outs[r], true), o.stop) : std::string();
      if (o.json || !tokenizer) {
        nlohmann::json j{{"prompt_ids", rows[r]}, {"ids", outs[r]}};
        if (tokenizer) j["text"] = answer;
        fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      } else if (o.stream) {
        fmt::print("{}\n", answer.size() > printed ? answer.substr(printed) : "");
      } else {
        fmt::print("{}\n", answer);
      }
    }
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub =
      app.add_subcommand("generate", "continue a prompt with a model (KV cache; greedy or sampled)");
  sub->add_option("--model", o->model, "HF model directory")->required();
  sub->add_option("--prompt", o->prompt, "prompt text (encoded with the model's tokenizer)");
  sub->add_option("--prompts_file", o->prompts_file,
                  "one prompt per line (or JSONL {\"prompt\": ...}); answers in the same order");
  sub->add_option("--batch_size", o->batch_size,
                  "prompts of --prompts_file decoded together, as rows of one KV cache (each row's answer "
                  "is the one it gets alone; --stream decodes one at a time, in order, one line each)")
      ->capture_default_str();
  sub->add_option("--ids", o->ids, "prompt token ids, comma-separated");
  sub->add_option("--adapter", o->adapter, "PEFT LoRA adapter directory, merged into --model's weights");
  sub->add_option("--prompt_template", o->prompt_template,
                  "auto (the run's template in a checkpoint's train_config.yaml, else the model's own chat "
                  "template, else alpaca with --adapter and raw without) | model (its Jinja chat_template) | "
                  "raw | plain | alpaca | llama3 | chatml")
      ->capture_default_str();
  sub->add_option("--max_new_tokens", o->max_new_tokens, "tokens to generate")->capture_default_str();
  sub->add_option("--temperature", o->temperature, "0: greedy")->capture_default_str();
  sub->add_option("--top_p", o->top_p, "nucleus sampling mass")->capture_default_str();
  sub->add_option("--top_k", o->top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  sub->add_option("--repetition_penalty", o->repetition_penalty,
                  "transformers' repetition_penalty (1: none; applies to greedy too)")
      ->capture_default_str();
  sub->add_option("--stop", o->stop, "stop when the text contains this string (repeatable); cut before it");
  sub->add_flag("--stream", o->stream, "print the text as it is generated");
  sub->add_option("--seed", o->seed, "sampling seed (and --random_init's)")->capture_default_str();
  sub->add_option("--precision", o->precision, "auto (bf16 on cuda, fp32 on cpu) | fp64 | fp32 | bf16")
      ->capture_default_str();
  sub->add_option("--device", o->device, "auto (cuda when usable) | cpu | cuda")->capture_default_str();
  sub->add_flag("--random_init", o->random_init, "random weights from config.json (tests)");
  sub->add_flag("--json", o->json, "print {prompt_ids, ids, text} as JSON");
  sub->callback([o]() { run_generate(*o); });
}

}  // namespace lt::cli
