// Helpers for the io tests: safetensors images assembled from bytes, and error-message assertions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/error.h"
#include "support/test_support.h"

namespace lt::test {

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// 8-byte little-endian length (the header's size unless `declared` overrides it), header, data.
inline std::string safetensors_image(const std::string& header, const std::string& data,
                                     std::optional<uint64_t> declared = std::nullopt) {
  uint64_t n = declared.value_or(header.size());
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(char(uint8_t(n >> (8 * i))));
  bytes.append(header);
  bytes.append(data);
  return bytes;
}

inline std::string write_image(const TempDir& dir, const std::string& name, const std::string& header,
                               const std::string& data, std::optional<uint64_t> declared = std::nullopt) {
  std::string path = dir.file(name);
  write_bytes(path, safetensors_image(header, data, declared));
  return path;
}

// Runs `action`, expecting an lt::Error whose message contains every one of `parts`.
inline ::testing::AssertionResult fails_with(const std::function<void()>& action,
                                             std::initializer_list<std::string> parts) {
  try {
    action();
  } catch (const lt::Error& e) {
    std::string message = e.what();
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-lt::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace lt::test
