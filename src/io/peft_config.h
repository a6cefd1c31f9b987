// PEFT's adapter_config.json for LoRA: a writer that produces every key PEFT 0.21 writes for a LoRA
// CAUSAL_LM adapter (sorted, indent 2, the bytes json.dumps gives), and a reader that ignores unknown keys
// and refuses, by name, every LoRA variant leantune does not implement (DoRA, LoRA bias, fan_in_fan_out,
// layers_to_transform, layer_replication, modules_to_save, trainable tokens, PiSSA-style initializations...).
// Per-module lookups follow PEFT: target/exclude matching as check_target_module_exists, rank and alpha
// overrides as get_pattern_key (first pattern, in file order, that matches the name as `(.*\.)?(pattern)`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lt::io {

struct LoraAdapterConfig {
  std::string base_model_name_or_path;  // empty writes null
  std::optional<std::string> revision;
  int64_t r = 8;
  double lora_alpha = 8;  // PEFT's default
  double lora_dropout = 0.0;
  std::vector<std::string> target_modules;          // a name matches exactly or as a ".name" suffix
  std::optional<std::string> target_modules_regex;  // PEFT's string form: the whole name must match
  std::vector<std::string> exclude_modules;
  std::optional<std::string> exclude_modules_regex;
  bool use_rslora = false;
  bool inference_mode = true;              // what PeftModel.save_pretrained writes
  std::string init_lora_weights = "true";  // "true", "false" or "gaussian" (they only differ at init)
  std::vector<std::pair<std::string, int64_t>> rank_pattern;  // in file order: the first match wins
  std::vector<std::pair<std::string, double>> alpha_pattern;

  // Whether module `name` (e.g. "model.layers.0.self_attn.q_proj") gets a LoRA adapter.
  bool targets(const std::string& name) const;
  int64_t rank_for(const std::string& name) const;
  double alpha_for(const std::string& name) const;
  // alpha/r, or alpha/sqrt(r) with use_rslora, with the module's own r and alpha.
  double scaling_for(const std::string& name) const;
};

// The adapter_config.json text (ends with no newline, like PEFT).
std::string adapter_config_json(const LoraAdapterConfig& config);
// Writes <dir>/adapter_config.json (atomically: temporary file, then rename).
void write_adapter_config(const std::string& dir, const LoraAdapterConfig& config);

// `source` names the file in messages. Throws lt::Error naming the key, its value and what is expected.
LoraAdapterConfig parse_adapter_config(const std::string& json_text, const std::string& source);
// `path` is adapter_config.json or the directory holding it.
LoraAdapterConfig read_adapter_config(const std::string& path);

}  // namespace lt::io
