// GPT-2's byte-to-unicode map: byte-level vocab files name each raw byte by a printable character
// (space -> 'Ġ' U+0120, newline -> 'Ċ' U+010A), so token strings in vocab.json / tokenizer.json are text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lt::data {

// UTF-8 of the character that stands for byte `b`.
const std::string& gpt2_byte_to_char(unsigned char b);
// The raw bytes a byte-level token string names, or nullopt if a character is not in the map.
std::optional<std::string> gpt2_chars_to_bytes(std::string_view token);
// Raw bytes to the byte-level token string.
std::string gpt2_bytes_to_chars(std::string_view bytes);

}  // namespace lt::data
