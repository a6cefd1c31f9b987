#include <filesystem>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/jinja.h"

namespace lt::data {

std::optional<std::string> model_chat_template(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path jinja_file = fs::path(model_dir) / "chat_template.jinja";
  if (fs::is_regular_file(jinja_file))
    return read_input_file(jinja_file.string(), kMaxTokenizerJsonBytes, "chat template");
  const fs::path config_path = fs::path(model_dir) / "tokenizer_config.json";
  if (!fs::exists(config_path)) return std::nullopt;
  const nlohmann::json config = read_json(config_path.string(), kMaxTokenizerJsonBytes);
  LT_CHECK(config.is_object(), "{}: expected a JSON object, found {}", config_path.string(),
           config.type_name());
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
  }
  LT_FAIL("{}: chat_template must be a string or a list of {{name, template}} objects with a \"default\" one",
          config_path.string());
}

}  // namespace lt::data
