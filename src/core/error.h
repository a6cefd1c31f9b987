// Errors that tell a user what went wrong in their terms: the file, tensor or field, the value found
// and what was expected. The source location is kept separately for developers (--verbose).
#pragma once

#include <stdexcept>
#include <string>

namespace lt {

class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* source_file, int source_line)
      : std::runtime_error(std::move(message)), source_file_(source_file), source_line_(source_line) {}
  // Where in leantune's source the check failed, e.g. "src/io/safetensors.cpp:120".
  std::string where() const { return std::string(source_file_) + ":" + std::to_string(source_line_); }

 private:
  const char* source_file_;
  int source_line_;
};

// Raised when an allocation does not fit its arena or device; the message carries the numbers.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

[[noreturn]] inline void throw_error(const char* file, int line, std::string message) {
  throw Error(std::move(message), file, line);
}

}  // namespace lt

// nvcc cannot compile fmt: .cu files (kernels and launchers only) report errors through host helpers
// declared without fmt, e.g. ops/cuda/cuda_check.h.
#if !defined(__CUDACC__)
#include <fmt/format.h>
#include <fmt/ranges.h>

// LT_CHECK(cond, "safetensors {}: tensor '{}' has {} bytes, expected {}", path, name, got, want);
#define LT_CHECK(cond, ...)                                                 \
  do {                                                                      \
    if (!(cond)) ::lt::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#define LT_FAIL(...) ::lt::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
#endif
