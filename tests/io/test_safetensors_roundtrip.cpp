// write_safetensors -> SafetensorsFile::open for every compute dtype: values, metadata, layout.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace lt::io {
namespace {

using test::fails_with;
using test::TempDir;

// Host storage for a tensor of `dtype` filled from fresh random values.
struct OwnedTensor {
  std::vector<uint8_t> bytes;  // (numel * dtype_size,)
  Tensor tensor;
};

OwnedTensor make_tensor(DType dtype, std::initializer_list<int64_t> dims, uint64_t seed) {
  OwnedTensor t;
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  t.bytes.resize(size_t(numel) * dtype_size(dtype));
  std::vector<double> values = test::random_values(size_t(numel), seed, -100.0, 100.0);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = t.bytes.data() + i * dtype_size(dtype);
    if (is_floating(dtype)) {
      convert_elements(p, dtype, &values[i], DType::F64, 1);
    } else if (dtype == DType::I64) {
      int64_t v = int64_t(values[i] * 1e12);
      std::memcpy(p, &v, 8);
    } else if (dtype == DType::I32) {
      int32_t v = int32_t(values[i] * 1e6);
      std::memcpy(p, &v, 4);
    } else {
      *p = uint8_t(int(values[i] + 100.0));
    }
  }
  t.tensor = Tensor(t.bytes.data(), dtype, dims);
  return t;
}

const DType kAllDTypes[] = {DType::F64, DType::F32, DType::BF16, DType::F16,
                            DType::I64, DType::I32, DType::U8};

TEST(SafetensorsRoundTrip, EveryDtypeWithMetadata) {
  TempDir dir;
  std::vector<OwnedTensor> owned;
  std::vector<NamedTensor> tensors;
  uint64_t seed = 11;
  // U8 first and F64 last: the writer must reorder them to keep every tensor aligned.
  for (auto it = std::rbegin(kAllDTypes); it != std::rend(kAllDTypes); ++it) {
    owned.push_back(make_tensor(*it, {3, 5}, seed++));
  }
  owned.push_back(make_tensor(DType::BF16, {7}, seed++));
  owned.push_back(make_tensor(DType::F32, {2, 0, 4}, seed++));
  for (size_t i = 0; i < owned.size(); ++i) {
    tensors.push_back({fmt::format("t{}.{}", i, dtype_name(owned[i].tensor.dtype)), owned[i].tensor});
  }
  std::string path = dir.file("rt.safetensors");
  write_safetensors(path, tensors, {{"step", "42"}, {"note", "h\u00e9llo"}});

  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->entries().size(), tensors.size());
  for (const NamedTensor& t : tensors) {
    const SafetensorsEntry* e = file->find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    EXPECT_EQ(e->dtype, from_dtype(t.tensor.dtype)) << t.name;
    ASSERT_EQ(int(e->shape.size()), t.tensor.ndim) << t.name;
    for (int d = 0; d < t.tensor.ndim; ++d) EXPECT_EQ(e->shape[size_t(d)], t.tensor.shape[size_t(d)]);
    EXPECT_EQ(e->numel(), t.tensor.numel());
    ASSERT_EQ(e->end - e->begin, t.tensor.bytes());
    if (t.tensor.bytes() > 0) {
      EXPECT_EQ(std::memcmp(e->data, t.tensor.data, t.tensor.bytes()), 0) << t.name;
    }
  }
  EXPECT_EQ(file->find("absent"), nullptr);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("step"), "42");
  EXPECT_EQ(file->metadata().at("note"), "h\u00e9llo");
  EXPECT_EQ(file->metadata().size(), 3u);
}

TEST(SafetensorsRoundTrip, LayoutAlignedAndHeaderPadded) {
  TempDir dir;
  std::vector<OwnedTensor> owned;
  std::vector<NamedTensor> tensors;
  // Odd element counts so that a naive order would leave wider tensors misaligned.
  for (int i = 0; i < 14; ++i) {
    owned.push_back(make_tensor(kAllDTypes[i % 7], {int64_t(1 + 2 * i)}, uint64_t(100 + i)));
    tensors.push_back({fmt::format("w{}", i), owned.back().tensor});
  }
  std::string path = dir.file("aligned.safetensors");
  write_safetensors(path, tensors);

  std::string bytes = test::read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  size_t last_brace = header.rfind('}');
  ASSERT_NE(last_brace, std::string::npos);
  EXPECT_EQ(header.find_first_not_of(' ', last_brace + 1), std::string::npos) << "padding must be spaces";
  EXPECT_LT(header.size() - last_brace - 1, 8u);
  nlohmann::json parsed = nlohmann::json::parse(header);
  EXPECT_EQ(parsed["__metadata__"], nlohmann::json({{"format", "pt"}}));

  auto file = SafetensorsFile::open(path);
  for (const SafetensorsEntry& e : file->entries()) {
    size_t width = dtype_size(*to_dtype(e.dtype));
    EXPECT_EQ((8 + n + e.begin) % width, 0u) << e.name << " at file offset " << 8 + n + e.begin;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e.data) % width, 0u) << e.name;
  }
  // No temporary file is left next to the result.
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) files += f.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(SafetensorsRoundTrip, OverwritesAtomically) {
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  OwnedTensor a = make_tensor(DType::F32, {4}, 1), b = make_tensor(DType::F64, {2, 2}, 2);
  write_safetensors(path, {{"a", a.tensor}});
  write_safetensors(path, {{"b", b.tensor}});
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->entries().size(), 1u);
  EXPECT_EQ(file->entries()[0].name, "b");
  EXPECT_EQ(std::memcmp(file->entries()[0].data, b.tensor.data, b.tensor.bytes()), 0);
}

TEST(SafetensorsRoundTrip, EmptyFileHasOnlyMetadata) {
  TempDir dir;
  std::string path = dir.file("empty.safetensors");
  write_safetensors(path, {});
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file->entries().empty());
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

TEST(SafetensorsRoundTrip, WriterRefusesBadInput) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  OwnedTensor a = make_tensor(DType::F32, {4}, 1);
  EXPECT_TRUE(fails_with(
      [&] {
        write_safetensors(path, {{"a", a.tensor}, {"a", a.tensor}});
      },
      {path, "tensor name 'a' given twice"}));
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, {{"__metadata__", a.tensor}}); }, {"'__metadata__'"}));
  Tensor on_gpu = a.tensor;
  on_gpu.device = Device::CUDA;
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, {{"g", on_gpu}}); }, {"tensor 'g'", "host memory"}));
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, {{"bad\xff", a.tensor}}); }, {path, "UTF-8"}));
  EXPECT_FALSE(std::filesystem::exists(path));
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) files += f.is_regular_file();
  EXPECT_EQ(files, 0) << "a failed write leaves no temporary file";
}

TEST(SafetensorsRoundTrip, HeaderOrderNeedNotFollowOffsets) {
  // Reference writers list entries in any order; readers sort by offset. Entries keep header order.
  TempDir dir;
  std::string header =
      "{\"z\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
      "\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]},"
      "\"e\":{\"dtype\":\"F4\",\"shape\":[0],\"data_offsets\":[6,6]}}";
  std::string path =
      test::write_image(dir, "order.safetensors", header, std::string("\x01\x02\x03\x04\x05\x06", 6));
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->entries().size(), 3u);
  EXPECT_EQ(file->entries()[0].name, "z");
  EXPECT_EQ(file->entries()[1].name, "a");
  EXPECT_EQ(file->find("z")->data[0], 5);
  EXPECT_EQ(file->find("a")->data[0], 1);
  EXPECT_EQ(file->find("e")->numel(), 0);
  EXPECT_TRUE(file->metadata().empty());
}

TEST(SafetensorsDType, NamesBitsAndMapping) {
  for (int code = 0; code <= int(StDType::F6_E3M2); ++code) {
    StDType d = StDType(code);
    EXPECT_EQ(parse_st_dtype(st_dtype_name(d)), d);
  }
  EXPECT_EQ(st_dtype_bits(StDType::F4), 4);
  EXPECT_EQ(st_dtype_bits(StDType::F6_E2M3), 6);
  EXPECT_EQ(st_dtype_bits(StDType::C64), 64);
  EXPECT_EQ(st_dtype_bits(StDType::BOOL), 8);
  EXPECT_FALSE(parse_st_dtype("f32").has_value());
  for (DType d : kAllDTypes) EXPECT_EQ(to_dtype(from_dtype(d)), d);
  EXPECT_FALSE(to_dtype(StDType::F8_E4M3).has_value());
}

}  // namespace
}  // namespace lt::io
