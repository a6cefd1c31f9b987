#include "io/peft_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "core/module_pattern.h"

namespace lt::io {
namespace {

using ordered_json = nlohmann::ordered_json;

// The PEFT version whose adapter_config.json layout this writer reproduces.
constexpr const char* kPeftFormatVersion = "0.21.2";

bool suffix_match(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names) {
    if (name == n) return true;
    if (name.size() > n.size() && name.ends_with(n) && name[name.size() - n.size() - 1] == '.') return true;
  }
  return false;
}

// PEFT's get_pattern_key: re.match(rf"(.*\.)?({key})$", name).
template <class V>
const V* pattern_lookup(const std::vector<std::pair<std::string, V>>& patterns, const std::string& name,
                        const char* what) {
  for (const auto& [key, value] : patterns)
    if (module_pattern_key_match(key, name, std::string("adapter config: ") + what)) return &value;
  return nullptr;
}

nlohmann::json number(double v) {
  if (std::floor(v) == v && std::abs(v) < 9.0e15) return int64_t(v);
  return v;
}

std::string show(const ordered_json& v) {
  return v.dump();
}

struct Reader {
  const ordered_json& j;
  const std::string& source;

  const ordered_json* get(const char* key) const {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const char* key, const ordered_json& v, const char* expected) const {
    LT_FAIL("adapter config {}: '{}' is {}, expected {}", source, key, show(v), expected);
  }
  bool boolean(const char* key, bool fallback) const {
    const ordered_json* v = get(key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_boolean()) bad(key, *v, "true or false");
    return v->get<bool>();
  }
  double num(const char* key, double fallback) const {
    const ordered_json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number()) bad(key, *v, "a number");
    return v->get<double>();
  }
  std::optional<std::string> str(const char* key) const {
    const ordered_json* v = get(key);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_string()) bad(key, *v, "a string or null");
    return v->get<std::string>();
  }
  // Keys whose only accepted values are null or an empty container / false: anything else is a variant
  // that leantune does not implement.
  void refuse_unless_empty(const char* key, const char* why) const {
    const ordered_json* v = get(key);
    if (!v || v->is_null() || (v->is_boolean() && !v->get<bool>()) ||
        ((v->is_array() || v->is_object()) && v->empty()))
      return;
    LT_FAIL("adapter config {}: '{}' is {}; {} is not supported by leantune", source, key, show(*v), why);
  }
  void string_list_or_regex(const char* key, std::vector<std::string>& list,
                            std::optional<std::string>& regex) const {
    const ordered_json* v = get(key);
    if (!v || v->is_null()) return;
    if (v->is_string()) {
      regex = v->get<std::string>();
      check_module_pattern(*regex, fmt::format("adapter config {}: '{}'", source, key));
      return;
    }
    if (!v->is_array()) bad(key, *v, "a list of module names, a regular expression string or null");
    for (const auto& e : *v) {
      if (!e.is_string()) bad(key, *v, "a list of module names (strings)");
      list.push_back(e.get<std::string>());
    }
  }
};

}  // namespace

bool LoraAdapterConfig::targets(const std::string& name) const {
  if (exclude_modules_regex &&
      module_pattern_full_match(*exclude_modules_regex, name, "adapter config: exclude_modules"))
    return false;
  if (suffix_match(exclude_modules, name)) return false;
  if (target_modules_regex)
    return module_pattern_full_match(*target_modules_regex, name, "adapter config: target_modules");
  return suffix_match(target_modules, name);
}

int64_t LoraAdapterConfig::rank_for(const std::string& name) const {
  const int64_t* v = pattern_lookup(rank_pattern, name, "rank_pattern key");
  return v ? *v : r;
}

double LoraAdapterConfig::alpha_for(const std::string& name) const {
  const double* v = pattern_lookup(alpha_pattern, name, "alpha_pattern key");
  return v ? *v : lora_alpha;
}

double LoraAdapterConfig::scaling_for(const std::string& name) const {
  const double rank = double(rank_for(name));
  return use_rslora ? alpha_for(name) / std::sqrt(rank) : alpha_for(name) / rank;
}

std::string adapter_config_json(const LoraAdapterConfig& c) {
  // nlohmann::json keeps keys sorted, as PEFT's json.dumps(sort_keys=True) does, nested objects included.
  nlohmann::json j;
  nlohmann::json alpha_pattern = nlohmann::json::object(), rank_pattern = nlohmann::json::object();
  for (const auto& [k, v] : c.alpha_pattern) alpha_pattern[k] = number(v);
  for (const auto& [k, v] : c.rank_pattern) rank_pattern[k] = v;
  j["alora_invocation_tokens"] = nullptr;
  j["alpha_pattern"] = alpha_pattern;
  j["arrow_config"] = nullptr;
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] =
      c.base_model_name_or_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.base_model_name_or_path);
  j["bias"] = "none";
  j["corda_config"] = nullptr;
  j["ensure_weight_tying"] = false;
  j["eva_config"] = nullptr;
  j["exclude_modules"] = c.exclude_modules_regex     ? nlohmann::json(*c.exclude_modules_regex)
                         : c.exclude_modules.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(c.exclude_modules);
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = c.inference_mode;
  if (c.init_lora_weights == "true" || c.init_lora_weights == "false") {
    j["init_lora_weights"] = c.init_lora_weights == "true";
  } else {
    j["init_lora_weights"] = c.init_lora_weights;
  }
  j["kasa_config"] = nullptr;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["loftq_config"] = nlohmann::json::object();
  j["lora_alpha"] = number(c.lora_alpha);
  j["lora_bias"] = false;
  j["lora_dropout"] = c.lora_dropout;
  j["lora_ga_config"] = nullptr;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = nullptr;
  j["monteclora_config"] = nullptr;
  j["peft_type"] = "LORA";
  j["peft_version"] = kPeftFormatVersion;
  j["qalora_group_size"] = 16;
  j["r"] = c.r;
  j["rank_pattern"] = rank_pattern;
  j["revision"] = c.revision ? nlohmann::json(*c.revision) : nlohmann::json(nullptr);
  j["target_modules"] =
      c.target_modules_regex ? nlohmann::json(*c.target_modules_regex) : nlohmann::json(c.target_modules);
  j["target_parameters"] = nullptr;
  j["task_type"] = "CAUSAL_LM";
  j["trainable_token_indices"] = nullptr;
  j["use_bdlora"] = nullptr;
  j["use_dora"] = false;
  j["use_qalora"] = false;
  j["use_rslora"] = c.use_rslora;
  j["velora_config"] = nullptr;
  return j.dump(2, ' ', /*ensure_ascii=*/true);  // json.dumps escapes non-ASCII by default
}

void write_adapter_config(const std::string& dir, const LoraAdapterConfig& config) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LT_CHECK(!ec, "cannot create adapter directory '{}': {}", dir, ec.message());
  const std::string path = dir + "/adapter_config.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    LT_CHECK(f.good(), "cannot write '{}'", tmp);
    f << adapter_config_json(config);
    f.flush();
    LT_CHECK(f.good(), "cannot write '{}' (disk full?)", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  LT_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

LoraAdapterConfig parse_adapter_config(const std::string& text, const std::string& source) {
  check_json_depth(text, "adapter config " + source);
  ordered_json j;
  try {
    j = ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    LT_FAIL("adapter config {}: not valid JSON ({})", source, json_error_detail(e));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406)
    LT_FAIL("adapter config {}: not valid JSON ({})", source, json_error_detail(e));
  }
  LT_CHECK(j.is_object(), "adapter config {}: expected a JSON object, found {}", source, j.type_name());
  Reader rd{j, source};
  LoraAdapterConfig c;

  const ordered_json* peft_type = rd.get("peft_type");
  LT_CHECK(peft_type != nullptr, "adapter config {}: 'peft_type' is missing, expected \"LORA\"", source);
  if (!peft_type->is_string() || peft_type->get<std::string>() != "LORA")
    LT_FAIL("adapter config {}: 'peft_type' is {}, expected \"LORA\" (only LoRA adapters are supported)",
            source, show(*peft_type));
  if (auto task = rd.str("task_type"); task && *task != "CAUSAL_LM")
    LT_FAIL("adapter config {}: 'task_type' is \"{}\", expected \"CAUSAL_LM\"", source, *task);

  // Variants that change the math or the set of trained tensors: refused rather than silently ignored.
  rd.refuse_unless_empty("use_dora", "DoRA (weight-decomposed LoRA)");
  rd.refuse_unless_empty("lora_bias", "a trainable bias on lora_B");
  rd.refuse_unless_empty("fan_in_fan_out", "fan_in_fan_out (Conv1D-style transposed weights)");
  rd.refuse_unless_empty("layers_to_transform",
                         "restricting LoRA to some layers through layers_to_transform");
  rd.refuse_unless_empty("layer_replication", "layer replication");
  rd.refuse_unless_empty("modules_to_save", "training and saving whole extra modules (modules_to_save)");
  rd.refuse_unless_empty("trainable_token_indices", "trainable token embeddings");
  rd.refuse_unless_empty("use_qalora", "QA-LoRA");
  rd.refuse_unless_empty("use_bdlora", "BD-LoRA");
  rd.refuse_unless_empty("alora_invocation_tokens", "activated LoRA (aLoRA)");
  rd.refuse_unless_empty("target_parameters", "LoRA on raw parameters (target_parameters)");
  rd.refuse_unless_empty("arrow_config", "Arrow routing");
  rd.refuse_unless_empty("megatron_config", "Megatron parallel LoRA layers");
  if (auto bias = rd.str("bias"); bias && *bias != "none")
    LT_FAIL("adapter config {}: 'bias' is \"{}\", expected \"none\" (trainable biases are not supported)",
            source, *bias);

  if (const ordered_json* init = rd.get("init_lora_weights"); init && !init->is_null()) {
    if (init->is_boolean()) {
      c.init_lora_weights = init->get<bool>() ? "true" : "false";
    } else if (init->is_string() && init->get<std::string>() == "gaussian") {
      c.init_lora_weights = "gaussian";
    } else {
      // PiSSA, OLoRA, CorDA, LoftQ, EVA... also rewrite the base weights, which a plain base model lacks.
      LT_FAIL(
          "adapter config {}: 'init_lora_weights' is {}, expected true, false or \"gaussian\" "
          "(initializations "
          "that modify the base weights are not supported)",
          source, show(*init));
    }
  }

  const ordered_json* r = rd.get("r");
  LT_CHECK(r != nullptr, "adapter config {}: 'r' is missing, expected a positive integer", source);
  if (!r->is_number_integer() || r->get<int64_t>() <= 0) rd.bad("r", *r, "a positive integer");
  c.r = r->get<int64_t>();
  c.lora_alpha = rd.num("lora_alpha", 8.0);
  if (!std::isfinite(c.lora_alpha) || c.lora_alpha <= 0)
    rd.bad("lora_alpha", *rd.get("lora_alpha"), "a positive number");
  c.lora_dropout = rd.num("lora_dropout", 0.0);
  if (!(c.lora_dropout >= 0 && c.lora_dropout < 1))
    rd.bad("lora_dropout", *rd.get("lora_dropout"), "a value in [0, 1)");
  c.use_rslora = rd.boolean("use_rslora", false);
  c.inference_mode = rd.boolean("inference_mode", true);
  c.base_model_name_or_path = rd.str("base_model_name_or_path").value_or("");
  c.revision = rd.str("revision");

  const ordered_json* targets = rd.get("target_modules");
  if (!targets || targets->is_null())
    LT_FAIL("adapter config {}: 'target_modules' is missing or null, expected a list of module names",
            source);
  if (targets->is_string() && targets->get<std::string>() == "all-linear")
    LT_FAIL(
        "adapter config {}: 'target_modules' is \"all-linear\", expected the explicit list of module names "
        "(PEFT expands it when it saves an adapter)",
        source);
  rd.string_list_or_regex("target_modules", c.target_modules, c.target_modules_regex);
  if (!c.target_modules_regex && c.target_modules.empty())
    LT_FAIL("adapter config {}: 'target_modules' is [], expected at least one module name", source);
  rd.string_list_or_regex("exclude_modules", c.exclude_modules, c.exclude_modules_regex);

  if (const ordered_json* rp = rd.get("rank_pattern"); rp && !rp->is_null()) {
    if (!rp->is_object()) rd.bad("rank_pattern", *rp, "an object of module pattern -> rank");
    for (const auto& [k, v] : rp->items()) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0)
        LT_FAIL("adapter config {}: 'rank_pattern' entry '{}' is {}, expected a positive integer", source, k,
                show(v));
      check_module_pattern("(.*\\.)?(" + k + ")",
                           fmt::format("adapter config {}: 'rank_pattern' key", source));
      c.rank_pattern.emplace_back(k, v.get<int64_t>());
    }
  }
  if (const ordered_json* ap = rd.get("alpha_pattern"); ap && !ap->is_null()) {
    if (!ap->is_object()) rd.bad("alpha_pattern", *ap, "an object of module pattern -> alpha");
    for (const auto& [k, v] : ap->items()) {
      if (!v.is_number() || !(v.get<double>() > 0))
        LT_FAIL("adapter config {}: 'alpha_pattern' entry '{}' is {}, expected a positive number", source, k,
                show(v));
      check_module_pattern("(.*\\.)?(" + k + ")",
                           fmt::format("adapter config {}: 'alpha_pattern' key", source));
      c.alpha_pattern.emplace_back(k, v.get<double>());
    }
  }
  return c;
}

LoraAdapterConfig read_adapter_config(const std::string& path) {
  std::string file = std::filesystem::is_directory(path) ? path + "/adapter_config.json" : path;
  return parse_adapter_config(read_input_file(file, kMaxSmallJsonBytes, "adapter config"), file);
}

}  // namespace lt::io
