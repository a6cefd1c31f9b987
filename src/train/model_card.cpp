#include "train/model_card.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "core/input_file.h"
#include "core/json_read.h"
#include "core/version.h"
#include "model/finetune.h"
#include "train/config_enums.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

// A Hub id: "name" or "org/name" of letters, digits, '-', '_', '.'; never a path that exists here.
bool looks_like_hub_id(const std::string& s) {
  if (s.empty() || s.front() == '/' || s.front() == '.' || s.find("..") != std::string::npos) return false;
  int slashes = 0;
  for (char c : s) {
    if (c == '/') {
      ++slashes;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return slashes == 1 && s.back() != '/' && !fs::exists(s);
}

// YAML's double-quoted scalar: the name as written, whatever characters it holds.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string loss_text(const std::optional<double>& loss) {
  return loss ? fmt::format("{:.4f}", *loss) : std::string("-");
}

}  // namespace

std::string base_model_reference(const std::string& base_model_dir) {
  const fs::path config = fs::path(base_model_dir) / "config.json";
  std::error_code ec;
  if (fs::is_regular_file(config, ec)) {
    try {
      const nlohmann::json j = read_json(config.string(), kMaxSmallJsonBytes);
      if (j.is_object() && j.contains("_name_or_path") && j["_name_or_path"].is_string() &&
          looks_like_hub_id(j["_name_or_path"].get<std::string>()))
        return j["_name_or_path"].get<std::string>();
    } catch (const Error&) {
      // The model's loader reports a broken config.json; the card falls back to the path.
    }
  }
  return fs::absolute(base_model_dir).lexically_normal().string();
}

std::string training_model_card(const TrainingCard& card) {
  const TrainConfig& c = *card.config;
  const std::string base = base_model_reference(c.base_model);
  const std::vector<std::string> data = dataset_paths(c);
  std::vector<std::string> data_names;
  for (const std::string& path : data) data_names.push_back(fs::path(path).filename().string());
  std::string out = "---\n";
  out += "base_model: " + quoted(base) + "\n";
  if (card.adapter) out += "library_name: peft\n";
  out += "pipeline_tag: text-generation\n";
  out += fmt::format("tags:\n- leantune\n- {}\n",
                     card.adapter ? "lora" : name_of(model::kFinetuneNames, c.finetune));
  out += "---\n\n";
  out += fmt::format("# {} of {}\n\n", card.adapter ? "LoRA adapter" : "Fine-tuned model", base);
  out += fmt::format("Trained with leantune {} ({} fine-tuning, {} steps).\n\n", kLeantuneVersion,
                     name_of(model::kFinetuneNames, c.finetune), card.steps);
  out += "## Data\n\n";
  for (const std::string& path : data) out += "- `" + path + "`\n";
  out += fmt::format("\ncutoff_len {}, prompt_template {}{}.\n\n", c.cutoff_len, c.prompt_template,
                     c.chat_template.empty() ? "" : ", chat_template " + c.chat_template);
  out += "## Results\n\n| | loss |\n|---|---|\n";
  out += fmt::format("| train, first step | {} |\n| train, last step | {} |\n",
                     loss_text(card.first_train_loss), loss_text(card.final_train_loss));
  out += fmt::format("| eval{} | {} |\n\n",
                     card.final_eval_loss ? fmt::format(" (step {})", card.final_eval_step) : std::string(),
                     loss_text(card.final_eval_loss));
  out += "## Use\n\n```python\n";
  if (card.adapter)
    out +=
        "from peft import AutoPeftModelForCausalLM\nmodel = "
        "AutoPeftModelForCausalLM.from_pretrained(\"THIS_DIR\")\n";
  else
    out +=
        "from transformers import AutoModelForCausalLM\nmodel = "
        "AutoModelForCausalLM.from_pretrained(\"THIS_DIR\")\n";
  out +=
      "```\n\n## Training configuration\n\nThe run's train_config.yaml (`leantune train` reads it "
      "back):\n\n```yaml\n";
  out += to_yaml(c);
  if (!out.ends_with('\n')) out += '\n';
  out += "```\n";
  return out;
}

std::string merged_model_card(const std::string& base_model_dir, const std::string& adapter_dir,
                              const std::string& dtype) {
  const std::string base = base_model_reference(base_model_dir);
  std::string out = "---\nbase_model: " + quoted(base) +
                    "\npipeline_tag: text-generation\ntags:\n- leantune\n- merged-lora\n---\n\n";
  out += fmt::format("# {} with a LoRA adapter merged\n\n", base);
  out += fmt::format(
      "Merged by leantune {} (`leantune export --merge`): the adapter `{}` folded into the base "
      "weights in {}. The adapter's own README.md tells how it was trained.\n",
      kLeantuneVersion, fs::absolute(adapter_dir).lexically_normal().string(), dtype);
  return out;
}

}  // namespace lt::train
