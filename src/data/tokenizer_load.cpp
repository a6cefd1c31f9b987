// load_tokenizer: which reader a file or model folder needs.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/tokenizer_loaders.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

// A tiktoken file starts with a line "<base64> <rank>"; a SentencePiece model is binary protobuf.
bool looks_like_tiktoken(const std::string& content) {
  size_t end = content.find('\n');
  std::string_view line =
      std::string_view(content).substr(0, end == std::string::npos ? content.size() : end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t space = line.find(' ');
  if (space == 0 || space == std::string_view::npos || space + 1 == line.size()) return false;
  for (size_t i = 0; i < space; ++i) {
    char c = line[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) return false;
  }
  for (size_t i = space + 1; i < line.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return false;
  }
  return true;
}

std::unique_ptr<Tokenizer> load_model_file(const std::string& path) {
  std::string content = read_tokenizer_file(path);
  if (looks_like_tiktoken(content)) return load_tiktoken(path, content);
  return load_sentencepiece(path, content);
}

}  // namespace

std::string read_tokenizer_file(const std::string& path) {
  return read_input_file(path, kMaxTokenizerFileBytes, "tokenizer file");
}

nlohmann::json read_tokenizer_json(const std::string& path, const char* what) {
  const std::string text = read_tokenizer_file(path);
  check_json_depth(text, fmt::format("{} {}", what, path));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    LT_FAIL("{} {}: not valid JSON at byte {}: {}", what, path, e.byte, json_error_detail(e));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406)
    LT_FAIL("{} {}: not valid JSON: {}", what, path, json_error_detail(e));
  }
}

void check_token_length(std::string_view token, const std::string& path, const char* what) {
  LT_CHECK(token.size() <= kMaxTokenBytes, "{}: {} '{}...' is {} bytes long, expected at most {}", path, what,
           token.substr(0, 32), token.size(), kMaxTokenBytes);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& file_or_dir) {
  fs::path path(file_or_dir);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "tokenizer.json")) return load_tokenizer_json((path / "tokenizer.json").string());
    if (fs::exists(path / "tokenizer.model")) return load_model_file((path / "tokenizer.model").string());
    if (fs::exists(path / "vocab.json") && fs::exists(path / "merges.txt")) {
      return load_gpt2_files((path / "vocab.json").string(), (path / "merges.txt").string());
    }
    if (fs::exists(path / "encoder.json") && fs::exists(path / "vocab.bpe")) {
      return load_gpt2_files((path / "encoder.json").string(), (path / "vocab.bpe").string());
    }
    LT_FAIL(
        "tokenizer: folder '{}' has no tokenizer.json, tokenizer.model, vocab.json + merges.txt or "
        "encoder.json + vocab.bpe",
        file_or_dir);
  }
  LT_CHECK(fs::exists(path, ec), "tokenizer: '{}' does not exist", file_or_dir);
  std::string name = path.filename().string();
  fs::path dir = path.parent_path();
  auto sibling = [&](const char* other) {
    fs::path p = dir / other;
    LT_CHECK(fs::exists(p), "tokenizer: '{}' needs '{}' next to it, which is missing", file_or_dir,
             p.string());
    return p.string();
  };
  if (name == "vocab.json") return load_gpt2_files(file_or_dir, sibling("merges.txt"));
  if (name == "encoder.json") return load_gpt2_files(file_or_dir, sibling("vocab.bpe"));
  if (name == "merges.txt") return load_gpt2_files(sibling("vocab.json"), file_or_dir);
  if (name == "vocab.bpe") return load_gpt2_files(sibling("encoder.json"), file_or_dir);
  if (path.extension() == ".json") return load_tokenizer_json(file_or_dir);
  return load_model_file(file_or_dir);
}

}  // namespace lt::data
