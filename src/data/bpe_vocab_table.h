// A flat open-addressing table from token bytes to id. Most English pre-tokens are whole tokens, so
// encoding is mostly one lookup here per pre-token: slots and key bytes sit in two contiguous arrays
// (one or two cache misses per lookup instead of a node chase in std::unordered_map).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

class BpeVocabTable {
 public:
  // Inserts or overwrites.
  void insert(std::string_view key, int32_t id);
  // The id of `key`, or -1.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash(key);
    for (size_t i = (h >> shift_) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && s.length == key.size() &&
          std::memcmp(pool_.data() + s.offset, key.data(), key.size()) == 0) {
        return s.id;
      }
    }
  }
  size_t size() const { return size_; }

  static uint64_t hash(std::string_view key) {
    // Multiply-mix over 8-byte words; the length is mixed in so that prefixes differ.
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (key.size() * 0xC2B2AE3D27D4EB4Full);
    size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, key.data() + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, key.data() + i, key.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;  // into pool_
    uint32_t length = 0;
    int32_t id = -1;  // -1: free
  };
  void grow();

  std::vector<Slot> slots_;  // (capacity)
  std::string pool_;         // key bytes, back to back
  size_t size_ = 0;
  size_t mask_ = 0;
  int shift_ = 0;
};

}  // namespace lt::data
