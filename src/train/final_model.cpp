#include "train/final_model.h"

#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCompanionFiles[] = {
    "tokenizer.json", "tokenizer_config.json",  "special_tokens_map.json", "tokenizer.model", "vocab.json",
    "merges.txt",     "generation_config.json", "chat_template.jinja"};

constexpr const char* kModelCardFile = "README.md";

bool is_model_file(const std::string& name) {
  const std::string ext = ".safetensors";
  return name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (name.rfind("model-", 0) == 0 && name.size() > ext.size() &&
          name.compare(name.size() - ext.size(), ext.size(), ext) == 0);
}

}  // namespace

std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const model::ModelConfig& model, const model::ModelWeights& weights,
                                          const io::HfSaveOptions& options, const std::string& model_card) {
  return save_final_model(
      out, base_model,
      [&](const std::string& staging) { return io::save_hf_checkpoint(staging, model, weights, options); },
      model_card);
}

std::vector<std::string> write_companion_files(const std::string& dir, const std::string& base_model,
                                               const std::string& model_card) {
  std::vector<std::string> written;
  for (const char* name : kCompanionFiles) {
    const fs::path from = fs::path(base_model) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::copy_file(from, fs::path(dir) / name, ec);
    LT_CHECK(!ec, "saving the model: cannot copy {} to {}: {}", from.string(), dir, ec.message());
    written.push_back(name);
  }
  if (!model_card.empty()) {
    io::write_file_atomic((fs::path(dir) / kModelCardFile).string(), model_card);
    written.push_back(kModelCardFile);
  }
  return written;
}

std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const ModelWriter& write_model, const std::string& model_card) {
  const std::string staging = out.make_staging();
  std::vector<std::string> written = write_model(staging);
  for (std::string& name : write_companion_files(staging, base_model, model_card))
    written.push_back(std::move(name));
  out.publish(staging, written, is_model_file);
  return written;
}

}  // namespace lt::train
