// UTF-8 validation with the same acceptance as Rust's str::from_utf8 (what the reference reader uses).
#include "io/safetensors_header.h"

namespace lt::io {

size_t first_invalid_utf8(const uint8_t* bytes, size_t size) {
  size_t i = 0;
  while (i < size) {
    uint8_t b = bytes[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the first continuation byte
    if (b >= 0xc2 && b <= 0xdf) {
      extra = 1;
    } else if (b >= 0xe0 && b <= 0xef) {
      extra = 2;
      if (b == 0xe0) lo = 0xa0;  // no overlong 3-byte forms
      if (b == 0xed) hi = 0x9f;  // no UTF-16 surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      extra = 3;
      if (b == 0xf0) lo = 0x90;  // no overlong 4-byte forms
      if (b == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
    } else {
      return i;
    }
    if (size - i <= size_t(extra)) return i;
    if (bytes[i + 1] < lo || bytes[i + 1] > hi) return i;
    for (int k = 2; k <= extra; ++k) {
      if ((bytes[i + size_t(k)] & 0xc0) != 0x80) return i;
    }
    i += size_t(extra) + 1;
  }
  return size;
}

}  // namespace lt::io
