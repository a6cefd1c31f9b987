#include "data/bpe_model.h"

#include <algorithm>
#include <climits>
#include <queue>

namespace lt::data {
namespace {

// Length of the UTF-8 sequence starting with `lead` (1 for a stray continuation byte).
int utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Pieces up to this many units use the quadratic scan (no allocation beyond one vector, cache friendly);
// longer ones the heap, whose cost grows as n log n.
constexpr size_t kShortPiece = 48;

}  // namespace

void BpeModel::add_token(std::string key, int32_t id) {
  if (units_ == Units::kBytes && key.size() == 1) byte_ids_[static_cast<unsigned char>(key[0])] = id;
  vocab_.insert(key, id);
}

std::optional<int32_t> BpeModel::find(std::string_view key) const {
  int32_t id = vocab_.find(key);
  if (id < 0) return std::nullopt;
  return id;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  bool last_unk = false;
  size_t i = 0;
  while (i < piece.size()) {
    size_t len = units_ == Units::kBytes ? 1 : std::min<size_t>(utf8_length(piece[i]), piece.size() - i);
    std::string_view unit = piece.substr(i, len);
    int32_t id = units_ == Units::kBytes ? byte_ids_[static_cast<unsigned char>(piece[i])] : -1;
    if (units_ == Units::kUtf8Chars) id = vocab_.find(unit);
    if (id >= 0) {
      symbols.push_back({id, int32_t(i)});
      last_unk = false;
    } else if (byte_fallback_ && std::all_of(unit.begin(), unit.end(), [&](char c) {
                 return fallback_ids_[static_cast<unsigned char>(c)] >= 0;
               })) {
      for (size_t k = 0; k < len; ++k) {
        symbols.push_back({fallback_ids_[static_cast<unsigned char>(unit[k])], int32_t(i + k)});
      }
      last_unk = false;
    } else if (unk_) {
      if (!(fuse_unk_ && last_unk)) symbols.push_back({*unk_, int32_t(i)});
      last_unk = true;
    }
    // Otherwise the unit is dropped: HF tokenizers' BPE does the same when there is no unk token, and a
    // byte-level vocabulary that lacks some bytes (tiny test tokenizers) relies on it.
    i += len;
  }
}

void BpeModel::merge_short(std::vector<Symbol>& symbols) const {
  // ranks[i]: rank of merging symbols i and i+1 (INT_MAX: no merge).
  int32_t ranks[kShortPiece];   // (n - 1)
  int32_t merged[kShortPiece];  // (n - 1) id of the merge
  size_t n = symbols.size();
  auto score = [&](size_t i) {
    const BpeMerge* m = merges_.find(symbols[i].id, symbols[i + 1].id);
    ranks[i] = m ? m->rank : INT_MAX;
    merged[i] = m ? m->merged : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) score(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT_MAX) break;
    symbols[best].id = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    symbols.resize(n);
    if (best > 0) score(best - 1);
    if (best + 1 < n) score(best);
  }
}

void BpeModel::merge_long(std::vector<Symbol>& symbols) const {
  size_t n = symbols.size();
  std::vector<int32_t> prev(n), next(n);  // (n) linked list over symbols, -1 at the ends
  std::vector<bool> alive(n, true);       // (n)
  for (size_t i = 0; i < n; ++i) {
    prev[i] = int32_t(i) - 1;
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank, pos, left_id, right_id, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = next[left];
    if (right < 0) return;
    if (const BpeMerge* m = merges_.find(symbols[left].id, symbols[right].id)) {
      heap.push({m->rank, left, symbols[left].id, symbols[right].id, m->merged});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    // Stale entries: the left symbol was absorbed, or either side changed since the push.
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    int32_t right = next[c.pos];
    if (symbols[c.pos].id != c.left_id || symbols[right].id != c.right_id) continue;
    symbols[c.pos].id = c.merged;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[w++] = symbols[i];
  symbols.resize(w);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_ || (units_ == Units::kBytes && piece.size() == 1)) {
    if (int32_t id = vocab_.find(piece); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  initial_symbols(piece, symbols);
  if (symbols.size() <= kShortPiece) {
    merge_short(symbols);
  } else {
    merge_long(symbols);
  }
  for (const Symbol& s : symbols) out.push_back(s.id);
}

}  // namespace lt::data
