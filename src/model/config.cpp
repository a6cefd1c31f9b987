// config.json -> ModelConfig. Defaults follow transformers' LlamaConfig, Qwen2Config and MistralConfig (the
// class defaults apply when a key is absent), so that a checkpoint means here what it means there.
//
// Fields read and what decides them:
// - required: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads (a
// checkpoint
//   without them has no meaning; transformers would silently take its class defaults).
// - num_key_value_heads: absent/null -> num_attention_heads (Llama, Qwen2); MistralConfig's default is 8.
// - head_dim: absent/null -> hidden_size / num_attention_heads (Qwen2 has no head_dim key at all).
// - the block (biases, MLP kind from hidden_act, sliding windows): the architecture's file in model/arch/.
// - token ids: absent -> LlamaConfig/MistralConfig's bos 1 and eos 2 (Qwen2Config: none); null -> none.
// - RoPE: rope_scaling (legacy) wins over rope_parameters (v5) as in transformers; rope_theta inside the
//   dict wins over the top-level key; absent everywhere -> 10000. Types "default" and "llama3" only.
// Refused because they would change the math and leantune does not support them: a quantization_config,
// non-zero attention_dropout (leantune trains without dropout), partial_rotary_factor != 1 (but in Phi-3),
// other rope types,
// and any BlockSpec choice whose ops have not landed (check_block_supported). Accepted and ignored because
// they do not change the math: pretraining_tp (splits matmuls, same result), use_cache, initializer_range,
// use_mrope (Qwen2ForCausalLM ignores it), transformers_version, _name_or_path, and any unknown key.
#include "model/config.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "model/arch/architecture.h"
#include "model/config_fields.h"

namespace lt::model {

namespace {

// "architectures" names the class; "model_type" must agree with it. Either alone is enough.
void read_architecture(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  const ArchitectureDef* found = nullptr;
  if (r.has("architectures")) {
    const json& list = r.at("architectures");
    LT_CHECK(list.is_array() && !list.empty(),
             "{}: field 'architectures' is {}, expected a list of class names", source, list.dump());
    for (const json& entry : list) {
      LT_CHECK(entry.is_string(), "{}: field 'architectures' holds {}, expected class names (strings)",
               source, entry.dump());
      for (const ArchitectureDef* def : architectures())
        if (entry.get<std::string>() == def->class_name) found = def;
    }
    LT_CHECK(found != nullptr, "{}: field 'architectures' is {}: not supported (supported: {})", source,
             list.dump(), supported_class_names());
    LT_CHECK(list.size() == 1, "{}: field 'architectures' is {}, expected exactly one class", source,
             list.dump());
  }
  std::string model_type = r.string_or("model_type", "");
  if (found == nullptr) {
    LT_CHECK(!model_type.empty(), "{}: neither 'architectures' nor 'model_type' is present (supported: {})",
             source, supported_class_names());
    for (const ArchitectureDef* def : architectures())
      if (model_type == def->model_type) found = def;
    LT_CHECK(found != nullptr, "{}: field 'model_type' is \"{}\": not supported (supported: {})", source,
             model_type, supported_model_types());
  } else if (!model_type.empty()) {
    LT_CHECK(model_type == found->model_type,
             "{}: field 'model_type' is \"{}\" but 'architectures' names {} (model_type \"{}\")", source,
             model_type, found->class_name, found->model_type);
  }
  cfg.arch = found->arch;
  cfg.architecture_name = found->class_name;
  cfg.model_type = found->model_type;
}

// partial_rotary_factor (top level or in the RoPE dict): the leading int(head_dim * factor) dims of each head
// rotate (Phi3Config; BlockSpec::rotary_dim). Families whose attention rotates the whole head refuse it.
void read_partial_rotary(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  if (!r.has("partial_rotary_factor")) return;
  const double factor = r.number("partial_rotary_factor");
  if (factor == 1.0) return;
  LT_CHECK(architecture_def(cfg.arch).partial_rotary,
           "{}: field '{}' is {}: partial rotary embeddings are not supported for {} (expected 1.0)", source,
           r.name("partial_rotary_factor"), factor, cfg.architecture_name);
  const auto rotary = int64_t(double(cfg.head_dim) * factor);  // transformers' int(head_dim * factor)
  LT_CHECK(factor > 0 && factor < 1 && rotary >= 2 && rotary % 2 == 0,
           "{}: field '{}' is {}: expected a factor in (0, 1] giving an even number of rotary dims (head_dim "
           "{} x {} = {})",
           source, r.name("partial_rotary_factor"), factor, cfg.head_dim, factor, rotary);
  cfg.block.rotary_dim = rotary;
}

// One LongRoPE factor list: (R/2) positive numbers.
std::vector<double> read_longrope_factors(const FieldReader& r, const std::string& source, const char* key,
                                          int64_t half) {
  LT_CHECK(r.has(key), "{}: required field '{}' is missing (LongRoPE needs short_factor and long_factor)",
           source, r.name(key));
  const json& list = r.at(key);
  LT_CHECK(list.is_array() && int64_t(list.size()) == half,
           "{}: field '{}' is {}, expected a list of {} numbers (rotary dims / 2)", source, r.name(key),
           list.dump(), half);
  std::vector<double> factors;  // (R/2)
  for (const json& v : list) {
    LT_CHECK(v.is_number() && v.get<double>() > 0, "{}: field '{}' holds {}, expected positive numbers",
             source, r.name(key), v.dump());
    factors.push_back(v.get<double>());
  }
  return factors;
}

// transformers' longrope (Phi-3's legacy "su"): short_factor and long_factor divide the inverse frequencies;
// the pretraining length is the top-level original_max_position_embeddings when the file has one (Phi3Config
// gives it priority over the dict's; its class default is 4096), else the dict's, else
// max_position_embeddings; factor defaults to max_position_embeddings / original; attention_factor to sqrt(1
// + ln(factor) / ln(original)) (1 when factor <= 1).
void read_longrope(const FieldReader& top, const FieldReader& r, const std::string& source,
                   ModelConfig& cfg) {
  cfg.rope_type = ops::RopeType::LongRope;
  const int64_t fallback = cfg.arch == Architecture::Phi3 ? 4096 : cfg.max_position_embeddings;
  cfg.rope_original_max_position =
      top.has("original_max_position_embeddings")
          ? top.size("original_max_position_embeddings", ModelConfigLimits::kPositions)
          : r.size_or("original_max_position_embeddings", ModelConfigLimits::kPositions, fallback);
  LT_CHECK(cfg.rope_original_max_position > 1,
           "{}: field 'original_max_position_embeddings' is {}, expected > 1", source,
           cfg.rope_original_max_position);
  const int64_t rotary = cfg.block.rotary_dim > 0 ? cfg.block.rotary_dim : cfg.head_dim;
  cfg.rope_short_factor = read_longrope_factors(r, source, "short_factor", rotary / 2);
  cfg.rope_long_factor = read_longrope_factors(r, source, "long_factor", rotary / 2);
  const double original = double(cfg.rope_original_max_position);
  cfg.rope_factor = r.number_or("factor", double(cfg.max_position_embeddings) / original);
  LT_CHECK(cfg.rope_factor > 0, "{}: field '{}' is {}, expected a positive number", source, r.name("factor"),
           cfg.rope_factor);
  cfg.rope_attention_factor = r.number_or(
      "attention_factor",
      cfg.rope_factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(cfg.rope_factor) / std::log(original)));
  LT_CHECK(cfg.rope_attention_factor > 0, "{}: field '{}' is {}, expected a positive number", source,
           r.name("attention_factor"), cfg.rope_attention_factor);
}

void read_rope(const FieldReader& top, const std::string& source, ModelConfig& cfg) {
  // transformers: `rope_parameters = rope_scaling or rope_parameters`; a file carrying both with different
  // contents is ambiguous, so it is refused rather than resolved silently.
  const char* dict_key = nullptr;
  if (top.has("rope_scaling")) dict_key = "rope_scaling";
  if (top.has("rope_parameters")) {
    LT_CHECK(dict_key == nullptr || top.at("rope_scaling") == top.at("rope_parameters"),
             "{}: fields 'rope_scaling' ({}) and 'rope_parameters' ({}) disagree; keep one of them", source,
             top.at("rope_scaling").dump(), top.at("rope_parameters").dump());
    if (dict_key == nullptr) dict_key = "rope_parameters";
  }
  double top_theta = top.number_or("rope_theta", 10000.0);
  read_partial_rotary(top, source, cfg);

  cfg.rope_theta = top_theta;
  cfg.rope_type = ops::RopeType::Default;
  cfg.rope_dict_key = dict_key == nullptr ? "" : dict_key;
  if (dict_key == nullptr) {
    LT_CHECK(cfg.rope_theta > 0, "{}: field 'rope_theta' is {}, expected a positive number", source,
             cfg.rope_theta);
    return;
  }
  const json& dict = top.at(dict_key);
  LT_CHECK(dict.is_object(), "{}: field '{}' is {}, expected an object", source, dict_key, dict.dump());
  FieldReader r(dict, source, std::string(dict_key) + ".");
  // transformers v5 can nest RoPE parameters per layer type; none of the supported families does.
  for (const auto& [key, value] : dict.items()) {
    LT_CHECK(!value.is_object(), "{}: field '{}.{}' is {}: RoPE parameters per layer type are not supported",
             source, dict_key, key, value.dump());
  }

  // The legacy key is `type`; `rope_type` wins when both are present (transformers' standardize_rope_params).
  std::string type = r.has("rope_type") ? r.string_or("rope_type", "") : r.string_or("type", "default");
  const char* type_key = r.has("rope_type") ? "rope_type" : "type";
  cfg.rope_theta = r.number_or("rope_theta", top_theta);
  LT_CHECK(cfg.rope_theta > 0, "{}: field '{}' is {}, expected a positive number", source,
           r.has("rope_theta") ? r.name("rope_theta") : "rope_theta", cfg.rope_theta);
  read_partial_rotary(r, source, cfg);

  if (type == "default") return;
  // transformers runs LongRoPE's per-forward choice of factors for Phi3 (the family that ships it).
  if ((type == "longrope" || type == "su") && cfg.arch == Architecture::Phi3)
    return read_longrope(top, r, source, cfg);
  LT_CHECK(
      type == "llama3",
      "{}: field '{}' is \"{}\": RoPE type not supported (supported: default, llama3; Phi-3: longrope/su)",
      source, r.name(type_key), type);
  cfg.rope_type = ops::RopeType::Llama3;
  cfg.rope_factor = r.number("factor");
  cfg.rope_low_freq_factor = r.number("low_freq_factor");
  cfg.rope_high_freq_factor = r.number("high_freq_factor");
  // transformers falls back to max_position_embeddings when the original length is absent.
  cfg.rope_original_max_position = r.size_or("original_max_position_embeddings",
                                             ModelConfigLimits::kPositions, cfg.max_position_embeddings);
  LT_CHECK(cfg.rope_factor >= 1.0, "{}: field '{}' is {}, expected a number >= 1", source, r.name("factor"),
           cfg.rope_factor);
  LT_CHECK(cfg.rope_low_freq_factor > 0, "{}: field '{}' is {}, expected a positive number", source,
           r.name("low_freq_factor"), cfg.rope_low_freq_factor);
  LT_CHECK(cfg.rope_high_freq_factor > cfg.rope_low_freq_factor,
           "{}: field '{}' is {}, expected a number greater than low_freq_factor ({})", source,
           r.name("high_freq_factor"), cfg.rope_high_freq_factor, cfg.rope_low_freq_factor);
}

// Token ids must index the embedding table. A negative pad_token_id (some early Llama conversions wrote -1)
// means "no pad token".
std::optional<int64_t> read_token_id(const FieldReader& r, const std::string& source, const char* key,
                                     int64_t vocab) {
  std::optional<int64_t> id = r.optional_integer(key);
  if (!id) return id;
  if (*id < 0 && std::string(key) == "pad_token_id") return std::nullopt;
  LT_CHECK(*id >= 0 && *id < vocab, "{}: field '{}' is {}, expected a token id in [0, {})", source, key, *id,
           vocab);
  return id;
}

// Absent keys take the class defaults (LlamaConfig and MistralConfig: bos 1, eos 2; Qwen2Config: none);
// an explicit null means none.
void read_token_ids(const FieldReader& r, const std::string& source, ModelConfig& cfg) {
  const bool llama_defaults = architecture_def(cfg.arch).default_bos_eos;
  cfg.bos_token_id = read_token_id(r, source, "bos_token_id", cfg.vocab_size);
  const int64_t bos = architecture_def(cfg.arch).default_bos;
  if (!r.has("bos_token_id") && !r.is_null("bos_token_id") && llama_defaults && cfg.vocab_size > bos)
    cfg.bos_token_id = bos;
  cfg.pad_token_id = read_token_id(r, source, "pad_token_id", cfg.vocab_size);
  cfg.eos_token_ids.clear();
  if (!r.has("eos_token_id")) {
    const int64_t eos = architecture_def(cfg.arch).default_eos;
    if (!r.is_null("eos_token_id") && llama_defaults && cfg.vocab_size > eos)
      cfg.eos_token_ids.push_back(eos);
    return;
  }
  const json& eos = r.at("eos_token_id");
  if (!eos.is_array()) {
    cfg.eos_token_ids.push_back(*read_token_id(r, source, "eos_token_id", cfg.vocab_size));
    return;
  }
  for (const json& id : eos) {
    LT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < cfg.vocab_size,
             "{}: field 'eos_token_id' holds {}, expected token ids in [0, {})", source, id.dump(),
             cfg.vocab_size);
    cfg.eos_token_ids.push_back(id.get<int64_t>());
  }
}

// The parameter count in 128-bit arithmetic (the fields are bounded, but their products are not small), so
// that an absurd combination is refused with its numbers rather than overflowing into a misleading size.
void check_model_size(const ModelConfig& c, const std::string& source) {
  using i128 = __int128;
  const i128 D = c.hidden_size, V = c.vocab_size, F = c.intermediate_size, L = c.num_layers;
  const i128 q = i128(c.num_heads) * c.head_dim, kv = i128(c.num_kv_heads) * c.head_dim;
  const i128 per_layer = D * (q + 2 * kv) + q * D + 3 * D * F + 2 * D + q + 2 * kv + D + 2 * F + D;
  const i128 total = V * D * (c.tie_word_embeddings ? 1 : 2) + L * per_layer + D;
  LT_CHECK(
      total <= ModelConfigLimits::kParams,
      "{}: the model would have about {:.3g} parameters (vocab_size {}, hidden_size {}, intermediate_size "
      "{}, num_hidden_layers {}, {} heads x head_dim {}), expected at most {:.3g}",
      source, double(total), c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
      c.head_dim, double(ModelConfigLimits::kParams));
}

// The sizes in the Llama family's keys (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps,
// tie_word_embeddings), with the architecture's class defaults.
void read_llama_sizes(const FieldReader& r, const std::string& source, const ArchitectureDef& arch,
                      ModelConfig& cfg) {
  using Limits = ModelConfigLimits;
  cfg.vocab_size = r.size("vocab_size", Limits::kVocab);
  cfg.hidden_size = r.size("hidden_size", Limits::kHidden);
  cfg.intermediate_size = r.size("intermediate_size", Limits::kIntermediate);
  cfg.num_layers = r.size("num_hidden_layers", Limits::kLayers);
  cfg.num_heads = r.size("num_attention_heads", Limits::kHeads);
  const int64_t default_kv = arch.default_kv_heads > 0 ? arch.default_kv_heads : cfg.num_heads;
  cfg.num_kv_heads = r.size_or("num_key_value_heads", Limits::kHeads, default_kv);
  LT_CHECK(
      cfg.num_heads % cfg.num_kv_heads == 0,
      "{}: field 'num_attention_heads' is {} and 'num_key_value_heads' is {}: the heads must be a multiple "
      "of the kv heads",
      source, cfg.num_heads, cfg.num_kv_heads);
  if (r.has("head_dim")) {
    cfg.head_dim = r.size("head_dim", Limits::kHeadDim);
  } else if (arch.default_head_dim > 0) {
    cfg.head_dim = arch.default_head_dim;  // the config class's own default (Qwen3Config: 128)
  } else {
    LT_CHECK(cfg.hidden_size % cfg.num_heads == 0,
             "{}: field 'hidden_size' is {}, not a multiple of 'num_attention_heads' ({}), and no 'head_dim' "
             "is given",
             source, cfg.hidden_size, cfg.num_heads);
    cfg.head_dim = cfg.hidden_size / cfg.num_heads;
  }
  LT_CHECK(cfg.head_dim % 2 == 0, "{}: head dim is {} ({}): rotary embeddings need an even head dim", source,
           cfg.head_dim, r.has("head_dim") ? "field 'head_dim'" : "hidden_size / num_attention_heads");

  cfg.max_position_embeddings =
      r.size_or("max_position_embeddings", Limits::kPositions, arch.default_max_position);
  cfg.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  LT_CHECK(cfg.rms_norm_eps > 0, "{}: field 'rms_norm_eps' is {}, expected a positive number", source,
           r.at("rms_norm_eps").dump());
  cfg.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source) {
  LT_CHECK(json.is_object(), "{}: expected a JSON object at the top level, found {}", source,
           std::string(json.type_name()));
  FieldReader r(json, source);
  ModelConfig cfg;
  read_architecture(r, source, cfg);

  LT_CHECK(
      !r.has("quantization_config"),
      "{}: field 'quantization_config' is present ({}): quantized checkpoints are not supported yet; use "
      "the unquantized model",
      source, r.has("quantization_config") ? json.at("quantization_config").dump() : "");
  double dropout = r.number_or("attention_dropout", 0.0);
  LT_CHECK(dropout == 0.0,
           "{}: field 'attention_dropout' is {}: attention dropout is not supported (leantune trains without "
           "it); set it to 0.0",
           source, json.at("attention_dropout").dump());

  const ArchitectureDef& arch = architecture_def(cfg.arch);
  if (arch.read_sizes != nullptr) {
    arch.read_sizes(r, source, cfg);
  } else {
    read_llama_sizes(r, source, arch, cfg);
  }

  arch.read_block(r, source, cfg);
  if (arch.read_rope != nullptr) {
    arch.read_rope(r, source, cfg);
  } else if (cfg.block.positions == PositionKind::Rope) {
    read_rope(r, source, cfg);
  }
  read_token_ids(r, source, cfg);
  check_block_supported(cfg.block, cfg.head_dim, source);
  cfg.dtype_name = r.has("dtype") ? r.string_or("dtype", "") : r.string_or("torch_dtype", "");
  cfg.legacy_torch_dtype = r.has("torch_dtype");
  cfg.initializer_range = r.number_or("initializer_range", 0.02);
  LT_CHECK(cfg.initializer_range >= 0, "{}: field 'initializer_range' is {}, expected a non-negative number",
           source, cfg.initializer_range);
  cfg.transformers_version = r.string_or("transformers_version", "");
  check_model_size(cfg, source);
  return cfg;
}

ModelConfig load_model_config(const std::string& path_or_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = path_or_dir;
  if (fs::is_directory(path, ec)) path /= "config.json";
  std::string name = path.string();
  LT_CHECK(fs::exists(path, ec), "{}: no such file (expected an HF config.json or a directory holding one)",
           name);
  const std::string text = read_input_file(name, kMaxSmallJsonBytes, "config.json");
  check_json_depth(text, name);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    LT_FAIL("{}: not valid JSON at byte {}: {}", name, e.byte, json_error_detail(e));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406)
    LT_FAIL("{}: not valid JSON: {}", name, json_error_detail(e));
  }
  return parse_model_config(json, name);
}

ops::RopeParams ModelConfig::rope_params(int64_t tokens, int64_t heads) const {
  ops::RopeParams p{};
  p.tokens = tokens;
  p.heads = heads;
  p.head_dim = head_dim;
  p.theta = rope_theta;
  p.rotary_dim = block.rotary_dim;
  p.type = rope_type;
  p.factor = rope_factor;
  p.low_freq_factor = rope_low_freq_factor;
  p.high_freq_factor = rope_high_freq_factor;
  p.original_max_position = rope_original_max_position;
  if (rope_type == ops::RopeType::LongRope) {
    p.short_factor = rope_short_factor;
    p.long_factor = rope_long_factor;
    p.attention_factor = rope_attention_factor;
  }
  return p;
}

ops::RopeParams ModelConfig::rope_params(int64_t tokens, int64_t heads, int64_t layer) const {
  ops::RopeParams p = rope_params(tokens, heads);
  if (!local_rope_for_layer(layer)) return p;
  p.theta = rope_local_theta;
  p.type = ops::RopeType::Default;
  p.factor = 1.0;
  return p;
}

std::string architecture_name(Architecture arch) {
  return architecture_def(arch).class_name;
}

std::string rope_type_name(ops::RopeType type) {
  switch (type) {
    case ops::RopeType::Llama3:
      return "llama3";
    case ops::RopeType::Linear:
      return "linear";
    case ops::RopeType::LongRope:
      return "longrope";
    default:
      return "default";
  }
}

namespace {

// "none", "4096 (all layers)", "4096 (layers 28-47)" or a per-layer list when the pattern is irregular.
std::string describe_windows(const ModelConfig& cfg) {
  int64_t windowed = 0, first = -1, value = 0;
  bool uniform = true;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
    int64_t w = cfg.window_for_layer(layer);
    if (w == 0) continue;
    if (first < 0) first = layer, value = w;
    uniform = uniform && w == value;
    ++windowed;
  }
  if (windowed == 0) return "none";
  if (uniform && windowed == cfg.num_layers) return fmt::format("{} (all layers)", value);
  if (uniform && first + windowed == cfg.num_layers)
    return fmt::format("{} (layers {}-{})", value, first, cfg.num_layers - 1);
  return fmt::format("per layer {}", cfg.layer_window);
}

std::string optional_id(const std::optional<int64_t>& id) {
  return id ? std::to_string(*id) : "none";
}

}  // namespace

std::string describe_model_config(const ModelConfig& cfg) {
  std::string rope = fmt::format("{} theta {}", rope_type_name(cfg.rope_type), cfg.rope_theta);
  if (cfg.rope_type == ops::RopeType::Llama3) {
    rope += fmt::format(" factor {} low_freq_factor {} high_freq_factor {} original_max_position {}",
                        cfg.rope_factor, cfg.rope_low_freq_factor, cfg.rope_high_freq_factor,
                        cfg.rope_original_max_position);
  }
  if (cfg.rope_type == ops::RopeType::Linear) rope += fmt::format(" factor {}", cfg.rope_factor);
  if (cfg.rope_type == ops::RopeType::LongRope)
    rope += fmt::format(" original_max_position {} attention_factor {}", cfg.rope_original_max_position,
                        cfg.rope_attention_factor);
  if (!cfg.layer_local_rope.empty())
    rope += fmt::format("; sliding layers: default theta {}", cfg.rope_local_theta);
  std::string out;
  auto line = [&out](const char* name, const std::string& value) {
    out += fmt::format("{:<24}{}\n", name, value);
  };
  line("architecture", fmt::format("{} ({})", cfg.architecture_name, cfg.model_type));
  line("vocab_size", std::to_string(cfg.vocab_size));
  line("hidden_size", std::to_string(cfg.hidden_size));
  line("intermediate_size", std::to_string(cfg.intermediate_size));
  line("layers", std::to_string(cfg.num_layers));
  line("heads / kv heads", fmt::format("{} / {}", cfg.num_heads, cfg.num_kv_heads));
  line("head_dim", std::to_string(cfg.head_dim));
  line("max_position", std::to_string(cfg.max_position_embeddings));
  line("rms_norm_eps", fmt::format("{}", cfg.rms_norm_eps));
  line("tied embeddings", cfg.tie_word_embeddings ? "yes" : "no");
  line("block", describe_block(cfg.block));
  line("biases", fmt::format("qkv {} o {} mlp {}", cfg.qkv_bias ? "yes" : "no", cfg.o_bias ? "yes" : "no",
                             cfg.mlp_bias ? "yes" : "no"));
  line("rope", rope);
  line("sliding window", describe_windows(cfg));
  line("bos / eos / pad",
       fmt::format("{} / {} / {}", optional_id(cfg.bos_token_id),
                   cfg.eos_token_ids.empty() ? "none" : fmt::format("{}", cfg.eos_token_ids),
                   optional_id(cfg.pad_token_id)));
  line("dtype", cfg.dtype_name.empty() ? "unspecified" : cfg.dtype_name);
  return out;
}

}  // namespace lt::model
