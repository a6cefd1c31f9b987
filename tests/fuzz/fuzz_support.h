// Shared by the libFuzzer harnesses: the readers take paths, so an input is written to a file of this
// process's scratch directory first. An lt::Error is the expected refusal of a bad input; anything else
// (a crash, a sanitizer report, another exception escaping, a hang past -timeout) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace lt::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("lt-fuzz-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

template <class F>
void refusals_are_fine(F&& body) {
  try {
    body();
  } catch (const lt::Error&) {
  }
}

}  // namespace lt::fuzz
