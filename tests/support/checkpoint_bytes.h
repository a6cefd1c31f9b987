// Two checkpoint directories hold the same tensors: names, dtypes, shapes and raw bytes (the byte-identity
// check of the 4-bit checkpoint tests, against files written by transformers + bitsandbytes).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "io/safetensors.h"

namespace lt::test {

inline void expect_same_tensor_bytes(const std::string& expected_dir, const std::string& actual_dir) {
  auto a = io::CheckpointReader::open(expected_dir);
  auto b = io::CheckpointReader::open(actual_dir);
  ASSERT_EQ(a->names(), b->names());
  for (const std::string& name : a->names()) {
    const io::SafetensorsEntry& ea = a->entry(name);
    const io::SafetensorsEntry& eb = b->entry(name);
    EXPECT_EQ(ea.dtype, eb.dtype) << name;
    EXPECT_EQ(ea.shape, eb.shape) << name;
    EXPECT_TRUE(ea.end - ea.begin == eb.end - eb.begin &&
                std::memcmp(ea.data, eb.data, ea.end - ea.begin) == 0)
        << name;
  }
}

}  // namespace lt::test
