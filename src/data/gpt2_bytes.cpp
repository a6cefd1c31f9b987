#include "data/gpt2_bytes.h"

#include <array>
#include <cstdint>

namespace lt::data {
namespace {

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

struct ByteMap {
  std::array<std::string, 256> to_char;  // byte -> UTF-8 string
  std::array<int16_t, 324> to_byte;      // code point (< 324) -> byte, -1 if none
  ByteMap() {
    to_byte.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the other 68 bytes take code points 256.. in order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? uint32_t(b) : next++;
      to_char[b] = utf8_of(cp);
      to_byte[cp] = int16_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& gpt2_byte_to_char(unsigned char b) {
  return byte_map().to_char[b];
}

std::optional<std::string> gpt2_chars_to_bytes(std::string_view token) {
  const ByteMap& map = byte_map();
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    auto c = static_cast<unsigned char>(token[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = (uint32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;  // the map only uses code points below 0x800
    }
    if (cp >= map.to_byte.size() || map.to_byte[cp] < 0) return std::nullopt;
    out += char(map.to_byte[cp]);
  }
  return out;
}

std::string gpt2_bytes_to_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += gpt2_byte_to_char(static_cast<unsigned char>(c));
  return out;
}

}  // namespace lt::data
