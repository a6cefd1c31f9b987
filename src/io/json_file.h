// JSON files: reading with errors that name the file and the position, writing atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace lt::io {

// Parses the whole file; throws lt::Error "<path>: invalid JSON at line L, column C (byte B): ..." on
// bad syntax and names the path when the file cannot be read.
nlohmann::json read_json_file(const std::string& path);
nlohmann::ordered_json read_ordered_json_file(const std::string& path);  // keeps the file's key order

// Serializes with `indent` spaces (-1: compact), adds a final newline and writes atomically.
void write_json_file_atomic(const std::string& path, const nlohmann::json& json, int indent = 2);
void write_json_file_atomic(const std::string& path, const nlohmann::ordered_json& json, int indent = 2);

// The whole file as bytes; throws naming the path.
std::string read_file_bytes(const std::string& path);

}  // namespace lt::io
