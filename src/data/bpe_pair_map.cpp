#include "data/bpe_pair_map.h"

#include <utility>

namespace lt::data {

void BpePairMap::insert(int32_t left, int32_t right, BpeMerge merge) {
  if ((size_ + 1) * 2 > keys_.size()) grow();
  uint64_t key = pack(left, right);
  for (size_t i = slot(key);; i = (i + 1) & mask_) {
    if (keys_[i] == key) {
      values_[i] = merge;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      values_[i] = merge;
      ++size_;
      return;
    }
  }
}

void BpePairMap::grow() {
  size_t capacity = keys_.empty() ? 1024 : keys_.size() * 2;
  std::vector<uint64_t> old_keys(capacity, kEmpty);
  std::vector<BpeMerge> old_values(capacity);
  std::swap(old_keys, keys_);
  std::swap(old_values, values_);
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] != kEmpty)
      insert(int32_t(old_keys[i] >> 32), int32_t(uint32_t(old_keys[i])), old_values[i]);
  }
}

}  // namespace lt::data
