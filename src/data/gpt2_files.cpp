// GPT-2 style vocab.json + merges.txt (also named encoder.json + vocab.bpe): byte-level BPE. Qwen2 ships
// the same two files with its own split pattern, NFC and three special tokens after the vocabulary.
#include <filesystem>

#include "core/error.h"
#include "data/bpe_builder.h"
#include "data/tokenizer_loaders.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kQwen2BaseVocab = 151643;

nlohmann::json parse_json(const std::string& path) {
  return read_tokenizer_json(path, "tokenizer file");
}

std::vector<MergeEntry> read_merges(const std::string& path) {
  std::string content = read_tokenizer_file(path);
  std::vector<MergeEntry> merges;
  size_t pos = 0, line_no = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    size_t space = line.find(' ');
    LT_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string_view::npos,
             "merges file {}:{}: expected two tokens separated by one space, found '{}'", path, line_no,
             line);
    check_token_length(line.substr(0, space), fmt::format("merges file {}:{}", path, line_no), "left part");
    check_token_length(line.substr(space + 1), fmt::format("merges file {}:{}", path, line_no), "right part");
    merges.push_back({std::string(line.substr(0, space)), std::string(line.substr(space + 1)), line_no});
  }
  return merges;
}

// The folder's config.json names the model type; Qwen2's vocabulary size identifies it otherwise.
bool is_qwen(const std::string& vocab_path, const nlohmann::json& vocab) {
  fs::path config = fs::path(vocab_path).parent_path() / "config.json";
  if (fs::exists(config)) {
    nlohmann::json j = parse_json(config.string());
    if (j.contains("model_type") && j["model_type"].is_string()) {
      return j["model_type"].get<std::string>().starts_with("qwen");
    }
  }
  return vocab.size() == kQwen2BaseVocab;
}

std::optional<int64_t> config_eos(const std::string& vocab_path) {
  fs::path config = fs::path(vocab_path).parent_path() / "config.json";
  if (!fs::exists(config)) return std::nullopt;
  nlohmann::json j = parse_json(config.string());
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer())
    return j["eos_token_id"].get<int64_t>();
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_files(const std::string& vocab_path, const std::string& merges_path) {
  nlohmann::json vocab = parse_json(vocab_path);
  PipelineSpec spec;
  spec.origin = vocab_path;
  build_bpe_model(vocab, read_merges(merges_path), true, vocab_path, merges_path, spec);
  spec.decoders.push_back({.kind = DecoderStep::Kind::kByteLevel});
  if (is_qwen(vocab_path, vocab)) {
    spec.normalizers.push_back({.kind = NormalizerStep::Kind::kNfc});
    spec.pre_tokenizers.push_back({.kind = PreTokenizerStep::Kind::kSplit,
                                   .regex = std::make_shared<SplitRegex>(kQwen2SplitPattern, vocab_path)});
    spec.pre_tokenizers.push_back({.kind = PreTokenizerStep::Kind::kByteLevel});
    int32_t base = int32_t(spec.id_to_token.size());
    const char* names[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    spec.id_to_token.resize(spec.id_to_token.size() + 3);
    for (int i = 0; i < 3; ++i) spec.added.push_back({names[i], base + i, true});
    spec.pad = base;
    const int64_t eos = config_eos(vocab_path).value_or(base);
    LT_CHECK(eos >= 0 && eos < int64_t(spec.id_to_token.size()),
             "{}: config.json eos_token_id {} is outside the vocabulary of {}", vocab_path, eos,
             spec.id_to_token.size());
    spec.eos = int32_t(eos);
  } else {
    spec.pre_tokenizers.push_back({.kind = PreTokenizerStep::Kind::kByteLevel,
                                   .regex = std::make_shared<SplitRegex>(kGpt2SplitPattern, vocab_path)});
    if (vocab.contains("<|endoftext|>")) {
      auto id = vocab["<|endoftext|>"].get<int32_t>();  // checked by build_bpe_model
      spec.added.push_back({"<|endoftext|>", id, true});
      spec.bos = spec.eos = id;
    }
  }
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

}  // namespace lt::data
