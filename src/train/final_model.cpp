#include "train/final_model.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_checkpoint.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

bool is_model_file(const std::string& name) {
  return name == "model.safetensors" || name == "model.safetensors.index.json" ||
         (name.rfind("model-", 0) == 0 && name.size() > 12 &&
          name.substr(name.size() - 12) == ".safetensors");
}

constexpr const char* kTokenizerFiles[] = {
    "tokenizer.json", "tokenizer_config.json",   "tokenizer.model",       "vocab.json",
    "merges.txt",     "special_tokens_map.json", "generation_config.json"};

}  // namespace

void save_final_model(const std::string& output_dir, const std::string& base_model,
                      const model::ModelConfig& model, const model::ModelWeights& weights) {
  const fs::path out(output_dir);
  fs::create_directories(out);
  const fs::path staging = out / ".final-model-staging";
  std::error_code ec;
  fs::remove_all(staging, ec);
  std::vector<std::string> written =
      io::save_hf_checkpoint(staging.string(), model, weights, {.dtype = weights.dtype});
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (is_model_file(name) && std::find(written.begin(), written.end(), name) == written.end())
      fs::remove(entry.path(), ec);
  }
  for (const std::string& name : written) {
    fs::rename(staging / name, out / name, ec);
    LT_CHECK(!ec, "saving the final model: cannot move {} into {}: {}", name, output_dir, ec.message());
  }
  fs::remove_all(staging, ec);
  for (const char* name : kTokenizerFiles) {
    const fs::path src = fs::path(base_model) / name;
    if (!fs::exists(src) || fs::equivalent(fs::path(base_model), out, ec)) continue;
    fs::copy_file(src, out / name, fs::copy_options::overwrite_existing, ec);
    LT_CHECK(!ec, "saving the final model: cannot copy {} to {}: {}", src.string(), output_dir, ec.message());
  }
  io::fsync_directory(output_dir);
}

}  // namespace lt::train
