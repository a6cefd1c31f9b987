#include "cli/companion_files.h"

#include <filesystem>

#include "core/error.h"

namespace lt::cli {
namespace fs = std::filesystem;

std::vector<std::string> copy_companion_files(const std::string& from, const std::string& to,
                                              const char* command) {
  static constexpr const char* kCompanionFiles[] = {
      "tokenizer.json", "tokenizer_config.json",  "special_tokens_map.json", "tokenizer.model", "vocab.json",
      "merges.txt",     "generation_config.json", "chat_template.jinja"};
  std::vector<std::string> copied;
  for (const char* name : kCompanionFiles) {
    const fs::path src = fs::path(from) / name;
    if (!fs::exists(src)) continue;
    std::error_code ec;
    fs::copy_file(src, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    LT_CHECK(!ec, "{}: cannot copy {} to {}: {}", command, src.string(), to, ec.message());
    copied.push_back(name);
  }
  return copied;
}

}  // namespace lt::cli
