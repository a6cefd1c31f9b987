// Interoperability with the reference implementation: a file written by python safetensors
// (tools/make_safetensors_golden.py) read here, and the same tensors written here for the script's
// --check mode (set LT_WRITE_INTEROP_FILE=<path> to keep the file this test writes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace lt::io {
namespace {

// The tensors of tools/make_safetensors_golden.py:expected_tensors(), computed here independently.
struct Expected {
  std::vector<float> f32;         // (2, 3)
  std::vector<double> f64;        // (3,)
  std::vector<bf16> bf16_values;  // (3, 2)
  std::vector<fp16> f16;          // (6,)
  std::vector<int64_t> i64;       // (2,)
  std::vector<int32_t> i32;       // (3,)
  std::vector<uint8_t> u8;        // (5,)
};

Expected expected() {
  Expected e;
  for (int i = 0; i < 6; ++i) e.f32.push_back(float((i - 2.5) * 0.375));
  e.f64 = {1.0 / 3, -2.0 / 7, 1e300};
  const double tricky[] = {1.0 / 3, -2.0 / 7, 3.14159, 65504.0 * 3, 1e-6, -0.0};
  for (double v : tricky) {
    e.bf16_values.push_back(to_bf16(float(v)));  // python float -> float32 -> bf16, as torch does
    e.f16.push_back(to_fp16(float(v)));
  }
  e.i64 = {-(int64_t(1) << 40), 7};
  e.i32 = {-1, 0, 2147483647};
  e.u8 = {0, 1, 127, 128, 255};
  return e;
}

template <class T>
void expect_entry(const SafetensorsFile& file, const std::string& name, StDType dtype,
                  const std::vector<int64_t>& shape, const std::vector<T>& values) {
  const SafetensorsEntry* e = file.find(name);
  ASSERT_NE(e, nullptr) << name;
  EXPECT_EQ(e->dtype, dtype) << name;
  EXPECT_EQ(e->shape, shape) << name;
  ASSERT_EQ(e->end - e->begin, values.size() * sizeof(T)) << name;
  if (values.empty()) return;  // memcmp must not see the empty vector's null pointer
  EXPECT_EQ(std::memcmp(e->data, values.data(), values.size() * sizeof(T)), 0) << name << " bytes differ";
}

void expect_golden_tensors(const SafetensorsFile& file) {
  Expected e = expected();
  EXPECT_EQ(file.entries().size(), 8u);
  expect_entry(file, "f32", StDType::F32, {2, 3}, e.f32);
  expect_entry(file, "f64", StDType::F64, {3}, e.f64);
  expect_entry(file, "bf16", StDType::BF16, {3, 2}, e.bf16_values);
  expect_entry(file, "f16", StDType::F16, {6}, e.f16);
  expect_entry(file, "i64", StDType::I64, {2}, e.i64);
  expect_entry(file, "i32", StDType::I32, {3}, e.i32);
  expect_entry(file, "u8", StDType::U8, {5}, e.u8);
  expect_entry(file, "empty", StDType::F32, {0, 4}, std::vector<float>{});
}

TEST(SafetensorsGolden, ReadsFileWrittenByPythonSafetensors) {
  auto file = SafetensorsFile::open(test::source_path("tests/io/golden/python_written.safetensors"));
  expect_golden_tensors(*file);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("origin"), "python");
  // Sanity of the independent expectations themselves: the 16-bit roundings happened.
  Expected e = expected();
  EXPECT_EQ(to_float(e.bf16_values[0]), 0.333984375f);
  EXPECT_TRUE(std::isinf(to_float(e.f16[3])));
}

TEST(SafetensorsGolden, WritesWhatPythonReads) {
  Expected e = expected();
  std::vector<NamedTensor> tensors = {
      {"f32", Tensor(e.f32.data(), DType::F32, {2, 3})},
      {"f64", Tensor(e.f64.data(), DType::F64, {3})},
      {"bf16", Tensor(e.bf16_values.data(), DType::BF16, {3, 2})},
      {"f16", Tensor(e.f16.data(), DType::F16, {6})},
      {"i64", Tensor(e.i64.data(), DType::I64, {2})},
      {"i32", Tensor(e.i32.data(), DType::I32, {3})},
      {"u8", Tensor(e.u8.data(), DType::U8, {5})},
      {"empty", Tensor(nullptr, DType::F32, {0, 4})},
  };
  test::TempDir dir;
  std::string path = dir.file("leantune_written.safetensors");
  write_safetensors(path, tensors, {{"origin", "leantune"}});
  auto file = SafetensorsFile::open(path);
  expect_golden_tensors(*file);
  if (const char* keep = std::getenv("LT_WRITE_INTEROP_FILE")) {
    std::filesystem::copy_file(path, keep, std::filesystem::copy_options::overwrite_existing);
  }
}

}  // namespace
}  // namespace lt::io
