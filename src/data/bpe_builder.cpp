#include "data/bpe_builder.h"

#include "core/error.h"
#include "data/gpt2_bytes.h"
#include "data/tokenizer_loaders.h"

namespace lt::data {

void build_bpe_model(const nlohmann::json& vocab, const std::vector<MergeEntry>& merges, bool byte_level,
                     const std::string& vocab_origin, const std::string& merges_origin, PipelineSpec& spec) {
  LT_CHECK(vocab.is_object(), "{}: the vocabulary must be a JSON object of token -> id, found {}",
           vocab_origin, vocab.type_name());
  spec.model = std::make_unique<BpeModel>(byte_level ? BpeModel::Units::kBytes : BpeModel::Units::kUtf8Chars);
  BpeModel& model = *spec.model;
  TokenMap ids;  // token string as written -> id
  ids.reserve(vocab.size());
  for (const auto& [token, value] : vocab.items()) {
    LT_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < (1 << 24),
             "{}: vocabulary entry '{}' has id {}, expected an integer in [0, 2^24)", vocab_origin, token,
             value.dump());
    check_token_length(token, vocab_origin, "vocabulary token");
    auto id = value.get<int32_t>();
    ids[token] = id;
    if (size_t(id) >= spec.id_to_token.size()) spec.id_to_token.resize(size_t(id) + 1);
    spec.id_to_token[id] = token;
    if (byte_level) {
      auto raw = gpt2_chars_to_bytes(token);
      model.add_token(raw ? *raw : token, id);
    } else {
      model.add_token(token, id);
    }
  }
  auto lookup = [&](const std::string& token, const MergeEntry& m, const char* role) {
    auto it = ids.find(token);
    LT_CHECK(it != ids.end(), "{}: merge {} '{} {}': {} '{}' is not in the vocabulary", merges_origin,
             m.where, m.left, m.right, role, token);
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const MergeEntry& m = merges[rank];
    int32_t left = lookup(m.left, m, "left part");
    int32_t right = lookup(m.right, m, "right part");
    int32_t merged = lookup(m.left + m.right, m, "the merged token");
    model.add_merge(left, right, {int32_t(rank), merged});
  }
}

void SplitMergeDeriver::add(std::string_view token, BpeMerge merge) {
  for (size_t split = 1; split < token.size(); ++split) {
    spent_ += token.size();  // the two lookups hash at most the whole token
    LT_CHECK(spent_ <= kBudgetBytes,
             "{}: its tokens are too long to derive merges from (token '{}...' of {} bytes); expected a "
             "vocabulary of ordinary tokens",
             origin_, token.substr(0, 32), token.size());
    auto left = model_.find(token.substr(0, split));
    if (!left) continue;
    auto right = model_.find(token.substr(split));
    if (right) model_.add_merge(*left, *right, merge);
  }
}

}  // namespace lt::data
