// The one way leantune reads JSON from a user's file: bounded in size and nesting depth (nlohmann's parser
// recurses once per level, so a small file of 200,000 '[' would overflow the stack), with errors that name
// the file and the position, and nlohmann's own exception texts translated before they reach the user.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace lt {

// Deeper than any configuration, tokenizer or record leantune reads (they nest a handful of levels).
constexpr int kMaxJsonDepth = 64;
// Files that are small by nature (config.json, adapter_config.json, trainer_state.json, index files).
constexpr uint64_t kMaxSmallJsonBytes = uint64_t(64) << 20;
// tokenizer.json of the largest vocabularies is tens of MB.
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(1) << 30;

// The byte offset where `text` first nests arrays/objects deeper than `max_depth`, if it does. An iterative
// scan (strings and escapes skipped), so it never recurses whatever the input.
std::optional<size_t> json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

// Throws lt::Error "<source>: JSON nested deeper than 64 levels at line L, column C" when `text` nests
// arrays/objects deeper than `max_depth`. An iterative scan (strings and escapes skipped), so it never
// recurses whatever the input.
void check_json_depth(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// Depth-checked parse of `text`; `source` names the file (or "file:line") in errors.
nlohmann::json parse_json(std::string_view text, const std::string& source);
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source);

// read_input_file (regular files only, at most `max_bytes`) + parse_json.
nlohmann::json read_json(const std::string& path, uint64_t max_bytes = kMaxSmallJsonBytes);
nlohmann::ordered_json read_ordered_json(const std::string& path, uint64_t max_bytes = kMaxSmallJsonBytes);

// nlohmann's message without its "[json.exception.type_error.302] " tag, e.g. "type must be string, but is
// number": for wrapping a json access error into a message that names the file and the field.
std::string json_error_detail(const std::exception& e);

}  // namespace lt
