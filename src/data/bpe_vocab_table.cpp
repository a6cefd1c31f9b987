#include "data/bpe_vocab_table.h"

#include <utility>

#include "core/error.h"

namespace lt::data {

void BpeVocabTable::insert(std::string_view key, int32_t id) {
  LT_CHECK(id >= 0, "BPE vocabulary: id {} for token '{}' is negative", id, key);
  if ((size_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash(key);
  for (size_t i = (h >> shift_) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      LT_CHECK(pool_.size() + key.size() < (uint64_t{1} << 32), "BPE vocabulary: token bytes exceed 4 GiB");
      s = {h, uint32_t(pool_.size()), uint32_t(key.size()), id};
      pool_.append(key);
      ++size_;
      return;
    }
    if (s.hash == h && s.length == key.size() &&
        std::memcmp(pool_.data() + s.offset, key.data(), key.size()) == 0) {
      s.id = id;
      return;
    }
  }
}

void BpeVocabTable::grow() {
  size_t capacity = slots_.empty() ? 1024 : slots_.size() * 2;
  std::vector<Slot> old(capacity);
  std::swap(old, slots_);
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    for (size_t i = (s.hash >> shift_) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].id < 0) {
        slots_[i] = s;
        break;
      }
    }
  }
}

}  // namespace lt::data
