// Parsing and validation of a safetensors header against the rules of the reference reader
// (huggingface/safetensors, tensor.rs): internal to the io layer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace lt::io {

inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;  // the reference reader's MAX_HEADER_SIZE

struct SafetensorsHeader {
  uint64_t header_size = 0;               // N: JSON bytes after the 8-byte length
  std::vector<SafetensorsEntry> entries;  // in header order; `data` left null
  std::map<std::string, std::string> metadata;
};

// Validates the whole file image `bytes` (`size` bytes); every error names `path`.
SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* bytes, uint64_t size);

// Offset of the first byte that is not part of valid UTF-8 (overlong forms, surrogates and code points
// past U+10FFFF are invalid), or `size` when all of it is valid.
size_t first_invalid_utf8(const uint8_t* bytes, size_t size);

}  // namespace lt::io
