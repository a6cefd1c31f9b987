// HF tokenizer.json with a BPE model: normalizer, pre-tokenizer, post-processor and decoder are read
// into the pipeline; any component leantune does not implement is refused by name.
#include <filesystem>

#include "core/error.h"
#include "core/json_read.h"
#include "data/bpe_builder.h"
#include "data/tokenizer_loaders.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Reader {
  const std::string& path;

  const json& field(const json& j, const char* key, const char* where) const {
    LT_CHECK(j.is_object() && j.contains(key), "tokenizer.json {}: {} has no '{}'", path, where, key);
    return j[key];
  }
  // A string field (`key` of `j`, in `where`), refused naming both when it is not a string.
  std::string string(const json& j, const char* key, const char* where) const {
    const json& v = field(j, key, where);
    LT_CHECK(v.is_string(), "tokenizer.json {}: {} field '{}' is {}, expected a string", path, where, key,
             v.dump());
    return v.get<std::string>();
  }
  // A token id (`key` of `j`): an integer in [0, vocab) — nlohmann would wrap 2^40 into int32 silently.
  int32_t token_id(const json& v, const char* where, int64_t vocab) const {
    LT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab,
             "tokenizer.json {}: {} has id {}, expected a token id in [0, {})", path, where, v.dump(), vocab);
    return int32_t(v.get<int64_t>());
  }
  std::string type_of(const json& j, const char* where) const {
    LT_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
             "tokenizer.json {}: {} has no 'type'", path, where);
    return j["type"].get<std::string>();
  }
  template <typename T>
  T get_or(const json& j, const char* key, T fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    try {
      return j[key].get<T>();
    } catch (const json::exception&) {
      LT_FAIL("tokenizer.json {}: field '{}' is {}, of the wrong type", path, key, j[key].dump());
    }
  }
  // A Split/Replace pattern: {"String": s} or {"Regex": r}; returns a PCRE2 pattern.
  std::string pattern(const json& j, const char* where, bool* is_regex) const {
    const json& p = field(j, "pattern", where);
    LT_CHECK(p.is_object() && (p.contains("Regex") || p.contains("String")),
             "tokenizer.json {}: {} pattern {} is neither String nor Regex", path, where, p.dump());
    *is_regex = p.contains("Regex");
    return string(p, *is_regex ? "Regex" : "String", where);
  }

  void normalizer(const json& j, PipelineSpec& spec) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "normalizer");
    if (type == "Sequence") {
      for (const json& n : field(j, "normalizers", "normalizer Sequence")) normalizer(n, spec);
    } else if (type == "NFC") {
      spec.normalizers.push_back({.kind = NormalizerStep::Kind::kNfc});
    } else if (type == "Prepend") {
      spec.normalizers.push_back(
          {.kind = NormalizerStep::Kind::kPrepend, .text = string(j, "prepend", "Prepend normalizer")});
    } else if (type == "Replace") {
      bool is_regex = false;
      std::string from = pattern(j, "Replace normalizer", &is_regex);
      LT_CHECK(!is_regex, "tokenizer.json {}: Replace normalizer with a Regex pattern is not supported",
               path);
      spec.normalizers.push_back({.kind = NormalizerStep::Kind::kReplace,
                                  .text = from,
                                  .replacement = string(j, "content", "Replace normalizer")});
    } else {
      LT_FAIL(
          "tokenizer.json {}: normalizer type '{}' is not supported (supported: NFC, Prepend, Replace, "
          "Sequence)",
          path, type);
    }
  }

  void pre_tokenizer(const json& j, PipelineSpec& spec, bool& byte_level) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "pre_tokenizer");
    if (type == "Sequence") {
      for (const json& p : field(j, "pretokenizers", "pre_tokenizer Sequence"))
        pre_tokenizer(p, spec, byte_level);
    } else if (type == "Split") {
      bool is_regex = false;
      std::string p = pattern(j, "Split pre_tokenizer", &is_regex);
      if (!is_regex) p = "\\Q" + p + "\\E";
      spec.pre_tokenizers.push_back(
          {.kind = PreTokenizerStep::Kind::kSplit,
           .regex = std::make_shared<SplitRegex>(p, path),
           .behavior = split_behavior(get_or<std::string>(j, "behavior", "Isolated")),
           .invert = get_or<bool>(j, "invert", false)});
    } else if (type == "ByteLevel") {
      byte_level = true;
      PreTokenizerStep step{.kind = PreTokenizerStep::Kind::kByteLevel};
      step.add_prefix_space = get_or<bool>(j, "add_prefix_space", true);
      if (get_or<bool>(j, "use_regex", true))
        step.regex = std::make_shared<SplitRegex>(kGpt2SplitPattern, path);
      spec.pre_tokenizers.push_back(step);
    } else if (type == "Metaspace") {
      PreTokenizerStep step{.kind = PreTokenizerStep::Kind::kMetaspace};
      step.replacement = get_or<std::string>(j, "replacement", "\xE2\x96\x81");
      step.prepend = metaspace_prepend(j);
      step.split = get_or<bool>(j, "split", true);
      spec.pre_tokenizers.push_back(step);
    } else {
      LT_FAIL(
          "tokenizer.json {}: pre_tokenizer type '{}' is not supported (supported: Split, ByteLevel, "
          "Metaspace, "
          "Sequence)",
          path, type);
    }
  }

  SplitBehavior split_behavior(const std::string& name) const {
    if (name == "Isolated") return SplitBehavior::kIsolated;
    if (name == "Removed") return SplitBehavior::kRemoved;
    if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
    if (name == "Contiguous") return SplitBehavior::kContiguous;
    LT_FAIL(
        "tokenizer.json {}: Split pre_tokenizer behavior '{}', expected Isolated, Removed, "
        "MergedWithPrevious, MergedWithNext or Contiguous",
        path, name);
  }

  PreTokenizerStep::Prepend metaspace_prepend(const json& j) const {
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string scheme = j["prepend_scheme"].get<std::string>();
      if (scheme == "always") return PreTokenizerStep::Prepend::kAlways;
      if (scheme == "first") return PreTokenizerStep::Prepend::kFirst;
      if (scheme == "never") return PreTokenizerStep::Prepend::kNever;
      LT_FAIL("tokenizer.json {}: Metaspace prepend_scheme '{}', expected always, first or never", path,
              scheme);
    }
    return get_or<bool>(j, "add_prefix_space", true) ? PreTokenizerStep::Prepend::kAlways
                                                     : PreTokenizerStep::Prepend::kNever;
  }

  void decoder(const json& j, PipelineSpec& spec) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "decoder");
    if (type == "Sequence") {
      for (const json& d : field(j, "decoders", "decoder Sequence")) decoder(d, spec);
    } else if (type == "ByteLevel") {
      spec.decoders.push_back({.kind = DecoderStep::Kind::kByteLevel});
    } else if (type == "Replace") {
      bool is_regex = false;
      std::string from = pattern(j, "Replace decoder", &is_regex);
      LT_CHECK(!is_regex, "tokenizer.json {}: Replace decoder with a Regex pattern is not supported", path);
      spec.decoders.push_back({.kind = DecoderStep::Kind::kReplace,
                               .pattern = from,
                               .content = string(j, "content", "Replace decoder")});
    } else if (type == "ByteFallback") {
      spec.decoders.push_back({.kind = DecoderStep::Kind::kByteFallback});
    } else if (type == "Fuse") {
      spec.decoders.push_back({.kind = DecoderStep::Kind::kFuse});
    } else if (type == "Strip") {
      spec.decoders.push_back({.kind = DecoderStep::Kind::kStrip,
                               .content = get_or<std::string>(j, "content", " "),
                               .start = get_or<int>(j, "start", 0),
                               .stop = get_or<int>(j, "stop", 0)});
    } else if (type == "Metaspace") {
      DecoderStep step{.kind = DecoderStep::Kind::kMetaspace};
      step.replacement = get_or<std::string>(j, "replacement", "\xE2\x96\x81");
      step.prepend = metaspace_prepend(j) != PreTokenizerStep::Prepend::kNever;
      spec.decoders.push_back(step);
    } else {
      LT_FAIL(
          "tokenizer.json {}: decoder type '{}' is not supported (supported: ByteLevel, Replace, "
          "ByteFallback, "
          "Fuse, Strip, Metaspace, Sequence)",
          path, type);
    }
  }

  // TemplateProcessing's single template: special tokens before "A" are added in front, after it at the end.
  // Every id is checked against `vocab` (the model's and the added tokens'): an id outside it would be
  // emitted by every encode.
  void post_processor(const json& j, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix,
                      int64_t vocab) const {
    if (j.is_null()) return;
    std::string type = type_of(j, "post_processor");
    if (type == "Sequence") {
      for (const json& p : field(j, "processors", "post_processor Sequence"))
        post_processor(p, prefix, suffix, vocab);
    } else if (type == "ByteLevel") {
      return;  // offsets only
    } else if (type == "TemplateProcessing") {
      const json& specials = field(j, "special_tokens", "TemplateProcessing");
      bool after = false;
      for (const json& item : field(j, "single", "TemplateProcessing")) {
        if (item.contains("Sequence")) {
          after = true;
          continue;
        }
        LT_CHECK(item.is_object() && item.contains("SpecialToken"),
                 "tokenizer.json {}: TemplateProcessing item {} is not understood", path, item.dump());
        std::string name = string(item["SpecialToken"], "id", "TemplateProcessing SpecialToken");
        LT_CHECK(specials.is_object() && specials.contains(name),
                 "tokenizer.json {}: TemplateProcessing uses '{}', which is not in its "
                 "special_tokens",
                 path, name);
        const json& ids = field(specials[name], "ids", "TemplateProcessing special token");
        LT_CHECK(ids.is_array(),
                 "tokenizer.json {}: TemplateProcessing special token '{}' has ids {}, expected a list", path,
                 name, ids.dump());
        const std::string where = "TemplateProcessing special token '" + name + "'";
        for (const json& id : ids) (after ? suffix : prefix).push_back(token_id(id, where.c_str(), vocab));
      }
    } else {
      LT_FAIL(
          "tokenizer.json {}: post_processor type '{}' is not supported (supported: TemplateProcessing, "
          "ByteLevel, Sequence)",
          path, type);
    }
  }

  std::vector<MergeEntry> merges(const json& model) const {
    LT_CHECK(model.contains("merges") && model["merges"].is_array(),
             "tokenizer.json {}: the BPE model has no 'merges' list", path);
    std::vector<MergeEntry> out;
    size_t index = 0;
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        std::string s = m.get<std::string>();
        LT_CHECK(s.size() <= 2 * kMaxTokenBytes + 1,
                 "tokenizer.json {}: merge {} is {} bytes long, expected at most {}", path, index, s.size(),
                 2 * kMaxTokenBytes + 1);
        size_t space = s.find(' ');
        LT_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                 "tokenizer.json {}: merge {} is '{}', expected two tokens separated by one space", path,
                 index, s);
        out.push_back({s.substr(0, space), s.substr(space + 1), index});
      } else {
        LT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                 "tokenizer.json {}: merge {} is {}, expected \"a b\" or [\"a\", \"b\"]", path, index,
                 m.dump());
        out.push_back({m[0].get<std::string>(), m[1].get<std::string>(), index});
      }
      ++index;
    }
    return out;
  }
};

// The name of a token in tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

namespace {

std::unique_ptr<Tokenizer> load_tokenizer_json_checked(const std::string& path) {
  const json j = read_tokenizer_json(path);
  Reader r{path};
  const json& model = r.field(j, "model", "the file");
  LT_CHECK(model.is_object(), "tokenizer.json {}: 'model' is {}, expected an object", path,
           model.dump().substr(0, 200));
  std::string model_type = model.contains("type") ? r.string(model, "type", "the model") : std::string("BPE");
  LT_CHECK(model_type == "BPE",
           "tokenizer.json {}: model type '{}' is not supported; leantune reads BPE "
           "tokenizers (Llama, Qwen, Mistral, GPT-2)",
           path, model_type);
  LT_CHECK(r.get_or<double>(model, "dropout", 0.0) == 0.0,
           "tokenizer.json {}: BPE dropout is set; leantune "
           "tokenizes deterministically (set it to null)",
           path);
  LT_CHECK(r.get_or<std::string>(model, "continuing_subword_prefix", "").empty() &&
               r.get_or<std::string>(model, "end_of_word_suffix", "").empty(),
           "tokenizer.json {}: continuing_subword_prefix / end_of_word_suffix are not supported", path);

  PipelineSpec spec;
  spec.origin = path;
  bool byte_level = false;
  r.normalizer(j.value("normalizer", json()), spec);
  r.pre_tokenizer(j.value("pre_tokenizer", json()), spec, byte_level);
  r.decoder(j.value("decoder", json()), spec);
  for (const DecoderStep& d : spec.decoders)
    byte_level = byte_level || d.kind == DecoderStep::Kind::kByteLevel;
  build_bpe_model(r.field(model, "vocab", "the model"), r.merges(model), byte_level, path, path, spec);
  BpeModel& bpe = *spec.model;
  bpe.set_ignore_merges(r.get_or<bool>(model, "ignore_merges", false));

  const json added_tokens = j.value("added_tokens", json::array());
  LT_CHECK(added_tokens.is_array(), "tokenizer.json {}: 'added_tokens' is {}, expected a list", path,
           added_tokens.type_name());
  for (const json& t : added_tokens) {
    std::string content = r.string(t, "content", "added token");
    check_token_length(content, path, "added token");
    const std::string where = "added token '" + content.substr(0, 64) + "'";
    const int32_t id = r.token_id(r.field(t, "id", "added token"), where.c_str(), kMaxVocabulary);
    LT_CHECK(!r.get_or<bool>(t, "single_word", false),
             "tokenizer.json {}: added token '{}' uses single_word, which leantune does not support", path,
             content);
    if (size_t(id) >= spec.id_to_token.size()) spec.id_to_token.resize(size_t(id) + 1);
    spec.added.push_back({.content = content,
                          .id = id,
                          .special = r.get_or<bool>(t, "special", false),
                          .lstrip = r.get_or<bool>(t, "lstrip", false),
                          .rstrip = r.get_or<bool>(t, "rstrip", false)});
  }
  auto find_id = [&](const std::string& token) -> std::optional<int32_t> {
    for (const AddedToken& t : spec.added) {
      if (t.content == token) return t.id;
    }
    if (auto id = bpe.find(token)) return id;
    return std::nullopt;
  };

  if (r.get_or<bool>(model, "byte_fallback", false)) {
    std::array<int32_t, 256> ids;
    for (int b = 0; b < 256; ++b) ids[b] = find_id(fmt::format("<0x{:02X}>", b)).value_or(-1);
    bpe.set_byte_fallback(ids);
  }
  if (auto unk = r.get_or<std::string>(model, "unk_token", ""); !unk.empty()) {
    spec.unk = find_id(unk);
    LT_CHECK(spec.unk.has_value(), "tokenizer.json {}: unk_token '{}' is not in the vocabulary", path, unk);
  }
  bpe.set_unk(spec.unk, r.get_or<bool>(model, "fuse_unk", false));

  std::vector<int32_t> prefix, suffix;
  r.post_processor(j.value("post_processor", json()), prefix, suffix, int64_t(spec.id_to_token.size()));
  LT_CHECK(prefix.size() <= 1 && suffix.size() <= 1,
           "tokenizer.json {}: the post_processor adds {} tokens in front "
           "and {} at the end; leantune supports at most one BOS and one EOS",
           path, prefix.size(), suffix.size());
  if (!prefix.empty()) spec.bos = prefix[0], spec.adds_bos = true;
  if (!suffix.empty()) spec.eos = suffix[0], spec.adds_eos = true;

  // BOS/EOS/PAD names: tokenizer_config.json next to the file, else the usual names.
  json config;
  fs::path config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path)) config = read_json(config_path.string(), kMaxTokenizerJsonBytes);
  auto pick = [&](const char* key, std::initializer_list<const char*> fallbacks) -> std::optional<int32_t> {
    if (auto name = config_token(config, key)) return find_id(*name);
    for (const char* name : fallbacks) {
      if (auto id = find_id(name)) return id;
    }
    return std::nullopt;
  };
  if (!spec.bos) spec.bos = pick("bos_token", {"<|begin_of_text|>", "<s>", "<bos>"});
  if (!spec.adds_eos) spec.eos = pick("eos_token", {"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>"});
  spec.pad = pick("pad_token", {"<|finetune_right_pad_id|>", "<pad>", "<|endoftext|>"});
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  try {
    return load_tokenizer_json_checked(path);
  } catch (const nlohmann::json::exception& e) {
    // An access the checks above do not cover still names the file, never nlohmann's bare text.
    LT_FAIL("tokenizer.json {}: a field has an unexpected type or value: {}", path, json_error_detail(e));
  }
}

}  // namespace lt::data
