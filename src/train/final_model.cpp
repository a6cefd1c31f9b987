#include "train/final_model.h"

#include <filesystem>

#include "core/error.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCompanionFiles[] = {
    "tokenizer.json", "tokenizer_config.json",  "special_tokens_map.json", "tokenizer.model", "vocab.json",
    "merges.txt",     "generation_config.json", "chat_template.jinja"};

bool is_model_file(const std::string& name) {
  const std::string ext = ".safetensors";
  return name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (name.rfind("model-", 0) == 0 && name.size() > ext.size() &&
          name.compare(name.size() - ext.size(), ext.size(), ext) == 0);
}

}  // namespace

std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const model::ModelConfig& model, const model::ModelWeights& weights,
                                          const io::HfSaveOptions& options) {
  const std::string staging = out.make_staging();
  std::vector<std::string> written = io::save_hf_checkpoint(staging, model, weights, options);
  for (const char* name : kCompanionFiles) {
    const fs::path from = fs::path(base_model) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::copy_file(from, fs::path(staging) / name, ec);
    LT_CHECK(!ec, "saving the model: cannot copy {} to {}: {}", from.string(), staging, ec.message());
    written.push_back(name);
  }
  out.publish(staging, written, is_model_file);
  return written;
}

}  // namespace lt::train
