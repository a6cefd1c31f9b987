// Small helpers shared by the data tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace lt::data::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// The lt::Error message `run` throws; fails the test when it throws nothing.
inline std::string error_message(const std::function<void()>& run) {
  try {
    run();
  } catch (const lt::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an lt::Error";
  return "";
}

}  // namespace lt::data::test
