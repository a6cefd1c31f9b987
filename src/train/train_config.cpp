// TrainConfig: the key table, YAML and command-line parsing (each key on its own), YAML output.
// Combinations and ranges are checked in train_config_validate.cpp.
#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "dist/sharding.h"
#include "train/config_enums.h"

namespace lt::train {
namespace {

using IntMap = std::vector<std::pair<std::string, int64_t>>;
using DoubleMap = std::vector<std::pair<std::string, double>>;
using Member = std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, double TrainConfig::*,
                            bool TrainConfig::*, std::vector<std::string> TrainConfig::*,
                            IntMap TrainConfig::*, DoubleMap TrainConfig::*,
                            std::optional<int64_t> TrainConfig::*, std::optional<double> TrainConfig::*>;

struct Field {
  const char* name;
  Member member;
  const char* help;
  std::vector<std::string> choices = {};  // non-empty: an enumeration
  bool bytes = false;                     // an int64 size that also takes "24GiB"
};

template <class E, size_t N>
std::vector<std::string> names(const EnumName<E> (&table)[N]) {
  return enum_names(std::span<const EnumName<E>>(table));
}

std::vector<std::string> with_auto(std::vector<std::string> choices) {
  choices.insert(choices.begin(), "auto");
  return choices;
}

const std::vector<Field>& fields() {
  using C = TrainConfig;
  static const std::vector<Field> table = {
      {"base_model", &C::base_model, "HF model directory (config.json + safetensors)"},
      {"data_path", &C::data_path, "dataset file"},
      {"eval_data_path", &C::eval_data_path, "a separate evaluation dataset file (instead of val_set_size)"},
      {"output_dir", &C::output_dir, "where checkpoints, the adapter and metrics go"},
      {"batch_size", &C::batch_size, "sequences per optimizer step"},
      {"micro_batch_size", &C::micro_batch_size,
       "sequences per forward/backward (batch_size / this = accumulation)"},
      {"num_epochs", &C::num_epochs, "passes over the training set"},
      {"learning_rate", &C::learning_rate, "peak learning rate"},
      {"cutoff_len", &C::cutoff_len, "tokens per sequence; longer ones are truncated"},
      {"val_set_size", &C::val_set_size,
       "held out for evaluation: 0 none, a fraction in (0, 1) or a number of examples"},
      {"lora_r", &C::lora_r, "LoRA rank"},
      {"lora_alpha", &C::lora_alpha, "LoRA alpha (scaling = alpha / r)"},
      {"lora_dropout", &C::lora_dropout, "dropout on the LoRA input"},
      {"lora_target_modules", &C::lora_target_modules, "linear layers that get adapters"},
      {"train_on_inputs", &C::train_on_inputs,
       "false: no loss on the prompt (instruction, prompt/completion)"},
      {"train_on_all_turns", &C::train_on_all_turns,
       "chat data: loss on every turn, not only the assistant's"},
      {"keep_empty_examples", &C::keep_empty_examples, "keep examples left with no target token"},
      {"group_by_length", &C::group_by_length, "batch records of similar length together"},
      {"finetune", &C::finetune, "what is trained", names(model::kFinetuneNames)},
      {"adapter", &C::adapter, "adapter kind with finetune lora", names(kAdapterNames)},
      {"bits", &C::bits, "base weights' bits: 16, or 4 (QLoRA over 4-bit NF4/FP4 base weights)"},
      {"load_in_4bit", &C::load_in_4bit, "transformers' spelling of bits: 4"},
      {"bnb_4bit_quant_type", &C::bnb_4bit_quant_type, "QLoRA: the 4-bit code", {"nf4", "fp4"}},
      {"bnb_4bit_use_double_quant", &C::bnb_4bit_use_double_quant,
       "QLoRA: quantize the block scales to 8 bits too (the QLoRA recipe's double quantization)"},
      {"bnb_4bit_compute_dtype", &C::bnb_4bit_compute_dtype,
       "QLoRA: the dtype projections are dequantized to (auto: precision's; otherwise it must match it)"},
      {"torch_dtype",
       &C::torch_dtype,
       "QLoRA: the dtype a 16/32-bit base_model is quantized from (auto: its own; float16 is what "
       "transformers does when given none)",
       {"auto", "bfloat16", "float16", "float32"}},
      {"init_adapter", &C::init_adapter, "PEFT adapter directory to start LoRA from"},
      {"use_rslora", &C::use_rslora, "scaling = alpha / sqrt(r)"},
      {"lora_rank_pattern", &C::lora_rank_pattern, "per-module rank overrides (PEFT rank_pattern)"},
      {"lora_alpha_pattern", &C::lora_alpha_pattern, "per-module alpha overrides (PEFT alpha_pattern)"},
      {"trainable", &C::trainable, "finetune partial: parameter groups to train"},
      {"trainable_layers", &C::trainable_layers, "finetune partial: all | first:N | last:N | 0-3,10"},
      {"random_init", &C::random_init, "random base weights instead of loading them"},
      {"max_steps", &C::max_steps, "optimizer steps (0: num_epochs decides)"},
      {"weight_decay", &C::weight_decay, "AdamW decoupled weight decay"},
      {"adam_beta1", &C::adam_beta1, "AdamW beta1"},
      {"adam_beta2", &C::adam_beta2, "AdamW beta2"},
      {"adam_epsilon", &C::adam_epsilon, "AdamW epsilon"},
      {"max_grad_norm", &C::max_grad_norm, "global gradient-norm clipping (0: off)"},
      {"lr_scheduler_type",
       &C::lr_scheduler_type,
       "learning-rate schedule after warmup",
       {"constant", "linear", "cosine"}},
      {"warmup_steps", &C::warmup_steps, "linear warmup steps (default 0 unless warmup_ratio is set)"},
      {"warmup_ratio", &C::warmup_ratio, "warmup as a fraction of the total steps"},
      {"shuffle", &C::shuffle, "shuffle the training records each epoch"},
      {"seed", &C::seed, "seed of every random choice"},
      {"prompt_template", &C::prompt_template, "prompt template name"},
      {"dataset_format",
       &C::dataset_format,
       "dataset layout",
       {"auto", "alpaca", "chat", "sharegpt", "messages", "text", "prompt_completion", "pretokenized"}},
      {"packing", &C::packing, "pack several records into one sequence"},
      {"on_bad_record", &C::on_bad_record, "what a broken dataset record does", {"error", "skip"}},
      {"precision", &C::precision, "compute precision (auto: bf16 on cuda, fp32 on cpu)",
       with_auto(names(kPrecisionNames))},
      {"device", &C::device, "where training runs (auto: cuda when usable)", with_auto(names(kDeviceNames))},
      {"chunk_size", &C::chunk_size, "tokens per chunk (0: whole sequences)"},
      {"memory_limit", &C::memory_limit, "memory budget in bytes or like 24GiB (0: the device's)", {}, true},
      {"recompute",
       &C::recompute,
       "activation recomputation (auto: none whole-sequence, full chunked)",
       {"auto", "none", "full", "selective", "elementwise", "norms"}},
      {"master_weights", &C::master_weights,
       "full/partial fine-tuning: AdamW updates wider master copies (f32 for bf16, f64 for CPU fp32)"},
      {"optimizer_in_backward", &C::optimizer_in_backward,
       "full/partial fine-tuning: AdamW updates each layer right after its backward, so one layer's "
       "gradients are alive at a time (needs max_grad_norm 0, batch_size = micro_batch_size, chunk_size 0, "
       "not fp16)"},
      {"sharding", &C::sharding,
       "several processes: what each rank holds (ddp: replicas; zero1/2/3: optimizer state, gradients, "
       "weights sharded; FSDP's no_shard, shard_grad_op, full_shard accepted)",
       dist::sharding_spellings()},
      {"loss_scale_init", &C::loss_scale_init, "precision fp16: the dynamic loss scale's initial value"},
      {"loss_scale_growth_interval", &C::loss_scale_growth_interval,
       "precision fp16: finite steps in a row before the loss scale doubles"},
      {"attention",
       &C::attention,
       "device cuda: attention kernels (auto: cuDNN's when cuDNN 9 loads)",
       {"auto", "cudnn", "leantune"}},
      {"deterministic", &C::deterministic,
       "device cuda: bit-identical results run to run (attention on leantune's kernels, not cuDNN's)"},
      {"gemm_tune", &C::gemm_tune,
       "device cuda: time cuBLASLt's candidate algorithms on each GEMM shape's first call and keep the "
       "fastest (not with deterministic)"},
      {"profile_ops",
       &C::profile_ops,
       "device cuda: print the mean GPU time per op and step at the end (shapes: linear ops per shape too)",
       {"off", "ops", "shapes"}},
      {"tf32", &C::tf32, "with device cuda and precision fp32: matrix products in TF32 (faster, ~1e-3)"},
      {"offload_activations", &C::offload_activations,
       "keep what backward needs in host memory: the kept activations (whole sequence) or the layer-input "
       "checkpoints (chunk_size > 0, recompute full)"},
      {"offload_only", &C::offload_only,
       "with offload_activations, whole sequences: only these kept activations go to host memory (e.g. q: "
       "what the transfers hide behind a layer's compute); empty: all of them"},
      {"save_steps", &C::save_steps, "checkpoint every N optimizer steps (0: only at the end)"},
      {"save_total_limit", &C::save_total_limit, "checkpoints kept (0: all)"},
      {"eval_steps", &C::eval_steps, "evaluate every N optimizer steps (0: only at the end)"},
      {"logging_steps", &C::logging_steps, "console/TensorBoard log every N optimizer steps"},
      {"resume", &C::resume,
       "\"\", latest, auto (latest when output_dir has a checkpoint), or a checkpoint dir"},
      {"overwrite_output_dir", &C::overwrite_output_dir,
       "also write into an output_dir that holds files leantune did not write (same-named files are "
       "replaced; nothing else is deleted)"},
  };
  return table;
}

const Field* find_field(const std::string& name) {
  for (const Field& f : fields())
    if (name == f.name) return &f;
  return nullptr;
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& key) {
  // Names other tools use for the same thing.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"lr", "learning_rate"},
      {"epochs", "num_epochs"},
      {"num_train_epochs", "num_epochs"},
      {"per_device_train_batch_size", "micro_batch_size"},
      {"gradient_accumulation_steps", "batch_size (= micro_batch_size x accumulation steps)"},
      {"r", "lora_r"},
      {"target_modules", "lora_target_modules"},
      {"sequence_len", "cutoff_len"},
      {"max_seq_length", "cutoff_len"},
      {"model_name_or_path", "base_model"},
      {"resume_from_checkpoint", "resume"},
      {"gradient_checkpointing", "recompute"},
      {"lr_scheduler", "lr_scheduler_type"},
      {"adam_eps", "adam_epsilon"},
  };
  for (const auto& [alias, key_name] : aliases)
    if (key == alias) LT_FAIL("{}: unknown key '{}'; did you mean '{}'?", where, key, key_name);
  if (const std::string near = closest_name(key, train_config_keys()); !near.empty())
    LT_FAIL("{}: unknown key '{}'; did you mean '{}'?", where, key, near);
  LT_FAIL("{}: unknown key '{}' (`leantune train --help` lists the keys)", where, key);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

[[noreturn]] void bad_value(const std::string& where, const char* key, const std::string& value,
                            const std::string& expected) {
  LT_FAIL("{}: '{}' is '{}', expected {}", where, key, value, expected);
}

bool is_null_text(const std::string& s) {
  return s.empty() || s == "~" || lower(s) == "null";
}

int64_t parse_int(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  int64_t v = 0;
  const char* begin = t.data() + (t.starts_with('+') ? 1 : 0);
  auto [ptr, ec] = std::from_chars(begin, t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) bad_value(where, key, text, "an integer");
  return v;
}

double parse_double(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || errno == ERANGE)
    bad_value(where, key, text, "a finite number");
  return v;
}

bool parse_bool(const std::string& where, const char* key, const std::string& text) {
  std::string t = lower(trim(text));
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  bad_value(where, key, text, "true or false");
}

int64_t parse_bytes(const std::string& where, const char* key, const std::string& text) {
  std::string t = trim(text);
  size_t split = t.find_first_not_of("0123456789.eE+-");
  std::string number = t.substr(0, split),
              unit = split == std::string::npos ? "" : lower(trim(t.substr(split)));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},      {"b", 1},        {"kb", 1e3},        {"mb", 1e6},           {"gb", 1e9},
      {"tb", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    char* end = nullptr;
    double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(v >= 0) || v * scale > 9.0e18) break;
    return int64_t(std::llround(v * scale));
  }
  bad_value(where, key, text, "a size in bytes, or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB");
}

std::vector<std::string> split_list(const std::string& where, const char* key, const std::string& text) {
  std::vector<std::string> out;
  std::string t = trim(text);
  if (t.empty()) return out;
  std::stringstream ss(t);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) bad_value(where, key, text, "a list of names without empty entries");
    out.push_back(item);
  }
  return out;
}

// Applies `node` (from YAML or a parsed command-line value) to field `f`; `raw` is the command-line text
// (empty for YAML), used for scalar keys so that a value is never reinterpreted by YAML.
void set_field(TrainConfig& c, const Field& f, const YAML::Node& node, const std::string& where) {
  const char* key = f.name;
  auto scalar = [&](const char* expected) -> std::string {
    if (node.IsNull()) return "";
    if (!node.IsScalar()) bad_value(where, key, YAML::Dump(node), expected);
    return node.Scalar();
  };
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(c.*member)>;
        T& dst = c.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          std::string v = scalar("a string");
          if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
            fail_unknown_name(fmt::format("{}: '{}'", where, key), v, f.choices);
          dst = v;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          std::string v = scalar("an integer");
          dst = f.bytes ? parse_bytes(where, key, v) : parse_int(where, key, v);
        } else if constexpr (std::is_same_v<T, double>) {
          dst = parse_double(where, key, scalar("a number"));
        } else if constexpr (std::is_same_v<T, bool>) {
          dst = parse_bool(where, key, scalar("true or false"));
        } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
          std::string v = node.IsNull() ? "" : scalar("an integer or null");
          dst = is_null_text(v) ? std::nullopt : std::optional<int64_t>(parse_int(where, key, v));
        } else if constexpr (std::is_same_v<T, std::optional<double>>) {
          std::string v = node.IsNull() ? "" : scalar("a number or null");
          dst = is_null_text(v) ? std::nullopt : std::optional<double>(parse_double(where, key, v));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          dst.clear();
          if (node.IsNull()) return;
          if (node.IsScalar()) {
            dst = split_list(where, key, node.Scalar());
            return;
          }
          if (!node.IsSequence()) bad_value(where, key, YAML::Dump(node), "a list of names");
          for (const auto& e : node) {
            if (!e.IsScalar() || trim(e.Scalar()).empty())
              bad_value(where, key, YAML::Dump(node), "a list of names");
            dst.push_back(trim(e.Scalar()));
          }
        } else {  // IntMap or DoubleMap
          dst.clear();
          if (node.IsNull()) return;
          if (!node.IsMap()) bad_value(where, key, YAML::Dump(node), "a map of module pattern -> value");
          for (const auto& kv : node) {
            if (!kv.first.IsScalar() || !kv.second.IsScalar())
              bad_value(where, key, YAML::Dump(node), "a map of module pattern -> value");
            const std::string name = kv.first.Scalar();
            const std::string what = fmt::format("{} entry '{}'", key, name);
            if constexpr (std::is_same_v<T, IntMap>) {
              dst.emplace_back(name, parse_int(where, what.c_str(), kv.second.Scalar()));
            } else {
              dst.emplace_back(name, parse_double(where, what.c_str(), kv.second.Scalar()));
            }
          }
        }
      },
      f.member);
}

std::string format_double(double v) {
  return fmt::format("{}", v);
}  // shortest text that reads back exactly

void emit_field(YAML::Emitter& out, const TrainConfig& c, const Field& f) {
  out << YAML::Key << f.name << YAML::Value;
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(c.*member)>;
        const T& v = c.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          out << YAML::DoubleQuoted << v;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out << v;
        } else if constexpr (std::is_same_v<T, double>) {
          out << format_double(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out << YAML::TrueFalseBool << v;
        } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {
          if (v) {
            out << *v;
          } else {
            out << YAML::Null;
          }
        } else if constexpr (std::is_same_v<T, std::optional<double>>) {
          if (v) {
            out << format_double(*v);
          } else {
            out << YAML::Null;
          }
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          out << YAML::Flow << YAML::BeginSeq;
          for (const auto& s : v) out << YAML::DoubleQuoted << s;
          out << YAML::EndSeq;
        } else {
          out << YAML::Flow << YAML::BeginMap;
          for (const auto& [k, x] : v) {
            out << YAML::Key << YAML::DoubleQuoted << k << YAML::Value;
            if constexpr (std::is_same_v<T, IntMap>) {
              out << x;
            } else {
              out << format_double(x);
            }
          }
          out << YAML::EndMap;
        }
      },
      f.member);
}

std::string default_text(const Field& f) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  emit_field(out, TrainConfig{}, f);
  out << YAML::EndMap;
  std::string s = out.c_str();
  return trim(s.substr(s.find(':') + 1));
}

}  // namespace

TrainConfig parse_train_config_yaml(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    LT_FAIL("{} line {}: not valid YAML ({})", source, e.mark.line + 1, e.msg);
  }
  TrainConfig c;
  if (root.IsNull()) return c;
  LT_CHECK(root.IsMap(), "{}: expected a map of key: value at the top level", source);
  std::vector<std::string> seen;
  for (const auto& kv : root) {
    const std::string where = fmt::format("{} line {}", source, kv.first.Mark().line + 1);
    LT_CHECK(kv.first.IsScalar(), "{}: a key must be a plain name", where);
    const std::string key = kv.first.Scalar();
    const Field* f = find_field(key);
    if (!f) unknown_key(where, key);
    LT_CHECK(std::find(seen.begin(), seen.end(), key) == seen.end(), "{}: key '{}' is given twice", where,
             key);
    seen.push_back(key);
    set_field(c, *f, kv.second, where);
  }
  return c;
}

void apply_overrides(TrainConfig& c, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    LT_CHECK(arg.starts_with("--") && arg.size() > 2,
             "command line: '{}' is not an option; expected --key value", arg);
    std::string key = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    std::replace(key.begin(), key.end(), '-', '_');
    const std::string where = "command line --" + key;
    const Field* f = find_field(key);
    if (!f) unknown_key("command line", key);
    const bool is_bool = std::holds_alternative<bool TrainConfig::*>(f->member);
    if (!has_value) {
      if (i + 1 < args.size() && !(is_bool && args[i + 1].starts_with("--"))) {
        value = args[++i];
      } else {
        LT_CHECK(is_bool, "{}: missing value", where);
        value = "true";  // a lone boolean flag, as alpaca-lora's --train_on_inputs
      }
    }
    // Lists as HF and PEFT users type them, space-separated (--lora_target_modules q_proj v_proj): the
    // words up to the next --key join the list.
    if (std::holds_alternative<std::vector<std::string> TrainConfig::*>(f->member) && !has_value &&
        !value.starts_with("["))
      while (i + 1 < args.size() && !args[i + 1].starts_with("--")) value += "," + args[++i];
    const bool structured = std::holds_alternative<std::vector<std::string> TrainConfig::*>(f->member) ||
                            std::holds_alternative<IntMap TrainConfig::*>(f->member) ||
                            std::holds_alternative<DoubleMap TrainConfig::*>(f->member);
    YAML::Node node;
    if (structured) {
      try {
        node = YAML::Load(value);
      } catch (const YAML::Exception& e) {
        LT_FAIL("{}: '{}' is not valid YAML ({})", where, value, e.msg);
      }
    } else {
      node = YAML::Node(value);  // the text as given: "no" stays "no" for a string key, "" is empty
    }
    set_field(c, *f, node, where);
  }
}

TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  TrainConfig c;
  if (!yaml_path.empty()) {
    c = parse_train_config_yaml(read_input_file(yaml_path, kMaxSmallJsonBytes, "config file"), yaml_path);
  }
  apply_overrides(c, overrides);
  validate(c);
  return c;
}

std::string to_yaml(const TrainConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const Field& f : fields()) emit_field(out, c, f);
  out << YAML::EndMap;
  return std::string("# leantune training configuration (resolved)\n") + out.c_str() + "\n";
}

void save_train_config(const std::string& path, const TrainConfig& c) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    LT_CHECK(f.good(), "cannot write '{}'", tmp);
    f << to_yaml(c);
    f.flush();
    LT_CHECK(f.good(), "cannot write '{}' (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  LT_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

std::vector<std::string> train_config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : fields()) keys.push_back(f.name);
  return keys;
}

std::string train_config_help() {
  std::string out;
  for (const Field& f : fields()) {
    std::string d = default_text(f);
    std::string choices = f.choices.empty() ? "" : fmt::format(": {}", fmt::join(f.choices, " | "));
    out += fmt::format("  {:<22} {}{} (default {})\n", f.name, f.help, choices, d == "~" ? "none" : d);
  }
  return out;
}

}  // namespace lt::train
