// An open-addressing hash map from a pair of token ids to (merge rank, merged id): the BPE inner loop does
// one lookup per adjacent pair, so this is the hottest table in tokenization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lt::data {

struct BpeMerge {
  int32_t rank;    // lower merges first
  int32_t merged;  // id of the concatenation
};

class BpePairMap {
 public:
  // Inserts or overwrites (a later merge of the same pair wins, as in HF tokenizers).
  void insert(int32_t left, int32_t right, BpeMerge merge);
  const BpeMerge* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    uint64_t key = pack(left, right);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  size_t slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_; }
  void grow();

  std::vector<uint64_t> keys_;    // (capacity) packed (left, right), kEmpty where free
  std::vector<BpeMerge> values_;  // (capacity)
  size_t size_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace lt::data
