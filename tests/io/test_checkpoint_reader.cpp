// CheckpointReader over single files, model.safetensors directories and sharded index.json checkpoints;
// read_into with dtype conversion and shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/dtype.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace lt::io {
namespace {

using test::fails_with;
using test::TempDir;

std::vector<bf16> bf16_values(size_t count, uint64_t seed) {
  std::vector<double> v = test::random_values(count, seed, -3.0, 3.0);
  std::vector<bf16> out;
  for (double x : v) out.push_back(to_bf16(float(x)));
  return out;
}

std::vector<float> f32_values(size_t count, uint64_t seed) {
  std::vector<double> v = test::random_values(count, seed, -3.0, 3.0);
  return std::vector<float>(v.begin(), v.end());
}

// Two shards: "a" and "b" in shard 1, "c" in shard 2, plus the index.
struct ShardedCheckpoint {
  TempDir dir;
  std::vector<bf16> a = bf16_values(6, 1);   // (2, 3)
  std::vector<float> b = f32_values(4, 2);   // (4,)
  std::vector<float> c = f32_values(10, 3);  // (5, 2)
  std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";

  ShardedCheckpoint() {
    write_safetensors(dir.file(shard1), {{"a", Tensor(a.data(), DType::BF16, {2, 3})},
                                         {"b", Tensor(b.data(), DType::F32, {4})}});
    write_safetensors(dir.file(shard2), {{"c", Tensor(c.data(), DType::F32, {5, 2})}});
    write_index({{"a", shard1}, {"b", shard1}, {"c", shard2}});
  }
  void write_index(const nlohmann::json& weight_map) {
    nlohmann::json index = {{"metadata", {{"total_size", 12 + 16 + 40}}}, {"weight_map", weight_map}};
    write_json_file_atomic(dir.file("model.safetensors.index.json"), index);
  }
};

TEST(CheckpointReader, ShardedReadIntoAcrossShards) {
  ShardedCheckpoint ckpt;
  auto reader = CheckpointReader::open(ckpt.dir.path());
  EXPECT_EQ(reader->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(reader->contains("c"));
  EXPECT_FALSE(reader->contains("d"));
  EXPECT_EQ(reader->entry("c").shape, (std::vector<int64_t>{5, 2}));

  std::vector<float> a(6), b(4), c(10);
  reader->read_into("a", Tensor(a.data(), DType::F32, {2, 3}));
  reader->read_into("b", Tensor(b.data(), DType::F32, {4}));
  reader->read_into("c", Tensor(c.data(), DType::F32, {5, 2}));
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(a[i], to_float(ckpt.a[i])) << i;
  EXPECT_EQ(b, ckpt.b);
  EXPECT_EQ(c, ckpt.c);
  EXPECT_TRUE(fails_with([&] { reader->entry("d"); }, {ckpt.dir.path(), "no tensor named 'd'"}));
}

TEST(CheckpointReader, MissingShard) {
  ShardedCheckpoint ckpt;
  std::filesystem::remove(ckpt.dir.file(ckpt.shard2));
  EXPECT_TRUE(
      fails_with([&] { CheckpointReader::open(ckpt.dir.path()); },
                 {ckpt.dir.path(), "shard 'model-00002-of-00002.safetensors'", "tensor 'c'", "missing"}));
}

TEST(CheckpointReader, IndexNamesTensorAbsentFromShard) {
  ShardedCheckpoint ckpt;
  ckpt.write_index({{"a", ckpt.shard1}, {"b", ckpt.shard1}, {"c", ckpt.shard1}});
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(ckpt.dir.path()); },
                         {"tensor 'c'", "shard 'model-00001-of-00002.safetensors'", "does not contain it"}));
}

TEST(CheckpointReader, IndexProblems) {
  ShardedCheckpoint ckpt;
  ckpt.write_index({{"a", "../elsewhere.safetensors"}});
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(ckpt.dir.path()); },
                         {"tensor 'a'", "../elsewhere.safetensors", "inside the directory"}));
  ckpt.write_index({{"a", 3}});
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(ckpt.dir.path()); }, {"tensor 'a' maps to 3"}));
  test::write_bytes(ckpt.dir.file("model.safetensors.index.json"), "{\"weight_map\": {\n \"a\": }");
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(ckpt.dir.path()); },
                         {"model.safetensors.index.json", "invalid JSON at line 2"}));
  test::write_bytes(ckpt.dir.file("model.safetensors.index.json"), "{\"metadata\": {}}");
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(ckpt.dir.path()); }, {"'weight_map'"}));
}

TEST(CheckpointReader, SingleFileAndModelSafetensorsDirectory) {
  TempDir dir;
  std::vector<float> w = f32_values(6, 9);
  write_safetensors(dir.file("model.safetensors"), {{"w", Tensor(w.data(), DType::F32, {3, 2})}});
  for (const std::string& path : {dir.file("model.safetensors"), dir.path()}) {
    auto reader = CheckpointReader::open(path);
    EXPECT_EQ(reader->path(), path);
    EXPECT_EQ(reader->names(), std::vector<std::string>{"w"});
    std::vector<float> got(6);
    reader->read_into("w", Tensor(got.data(), DType::F32, {3, 2}));
    EXPECT_EQ(got, w);
  }
  TempDir empty;
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(empty.path()); },
                         {empty.path(), "neither model.safetensors nor model.safetensors.index.json"}));
  EXPECT_TRUE(fails_with([&] { CheckpointReader::open(empty.file("nope")); }, {"nope", "no such file"}));
}

TEST(CheckpointReader, ReadIntoConvertsBf16Exactly) {
  TempDir dir;
  std::vector<bf16> w = bf16_values(12, 5);
  w[0] = to_bf16(1e30f);           // far outside f16's range: stays exact in f32/f64
  w[1] = bf16::from_bits(0x0001);  // the smallest bf16 subnormal
  write_safetensors(dir.file("w.safetensors"), {{"w", Tensor(w.data(), DType::BF16, {3, 4})}});
  auto reader = CheckpointReader::open(dir.file("w.safetensors"));
  std::vector<float> f32(12);
  std::vector<double> f64(12);
  std::vector<bf16> same(12);
  reader->read_into("w", Tensor(f32.data(), DType::F32, {3, 4}));
  reader->read_into("w", Tensor(f64.data(), DType::F64, {3, 4}));
  reader->read_into("w", Tensor(same.data(), DType::BF16, {3, 4}));
  for (size_t i = 0; i < 12; ++i) {
    // bf16 -> f32 is the high half of the float's bits: exact
    EXPECT_EQ(float_bits(f32[i]), uint32_t(w[i].bits) << 16) << i;
    EXPECT_EQ(f64[i], double(to_float(w[i]))) << i;
    EXPECT_EQ(same[i].bits, w[i].bits) << i;
  }
  EXPECT_EQ(f64[1], std::ldexp(1.0, -133));
}

TEST(CheckpointReader, ReadIntoRoundsF32ToBf16AndF16) {
  TempDir dir;
  std::vector<float> w = f32_values(8, 6);
  std::vector<double> w64(w.begin(), w.end());
  write_safetensors(dir.file("w.safetensors"), {{"w", Tensor(w.data(), DType::F32, {8})},
                                                {"d", Tensor(w64.data(), DType::F64, {2, 4})}});
  auto reader = CheckpointReader::open(dir.file("w.safetensors"));
  std::vector<bf16> b(8);
  std::vector<fp16> h(8);
  std::vector<float> f(8);
  reader->read_into("w", Tensor(b.data(), DType::BF16, {8}));
  reader->read_into("w", Tensor(h.data(), DType::F16, {8}));
  reader->read_into("d", Tensor(f.data(), DType::F32, {2, 4}));
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(b[i].bits, to_bf16(w[i]).bits) << i;
    EXPECT_EQ(h[i].bits, to_fp16(w[i]).bits) << i;
    EXPECT_EQ(f[i], w[i]) << i;
  }
}

TEST(CheckpointReader, ReadIntoChecksShapeAndDtype) {
  TempDir dir;
  std::vector<float> w = f32_values(6, 7);
  std::vector<int32_t> ids = {3, -1, 7};
  write_safetensors(dir.file("w.safetensors"), {{"layer.w", Tensor(w.data(), DType::F32, {2, 3})},
                                                {"ids", Tensor(ids.data(), DType::I32, {3})}});
  std::string path = dir.file("w.safetensors");
  auto reader = CheckpointReader::open(path);
  std::vector<float> out(6);
  EXPECT_TRUE(fails_with(
      [&] {
        reader->read_into("layer.w", Tensor(out.data(), DType::F32, {3, 2}));
      },
      {path, "tensor 'layer.w'", "shape (2, 3)", "expected (3, 2)"}));
  EXPECT_TRUE(fails_with([&] { reader->read_into("layer.w", Tensor(out.data(), DType::F32, {6})); },
                         {"shape (2, 3)", "expected (6)"}));
  EXPECT_TRUE(fails_with([&] { reader->read_into("ids", Tensor(out.data(), DType::F32, {3})); },
                         {"tensor 'ids'", "I32 on disk", "into f32"}));
  std::vector<int64_t> wide(3);
  EXPECT_TRUE(
      fails_with([&] { reader->read_into("ids", Tensor(wide.data(), DType::I64, {3})); }, {"into i64"}));
  std::vector<int32_t> got(3);
  reader->read_into("ids", Tensor(got.data(), DType::I32, {3}));
  EXPECT_EQ(got, ids);
  EXPECT_TRUE(fails_with([&] { reader->read_into("missing", Tensor(got.data(), DType::I32, {3})); },
                         {"no tensor named 'missing'"}));
}

TEST(CheckpointReader, ReadIntoUnalignedData) {
  // A 13-byte header puts the data at file offset 21: every element is misaligned in the mapping.
  TempDir dir;
  std::vector<float> w = f32_values(5, 8);
  std::string data(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,20]}}";
  std::string path = test::write_image(dir, "odd.safetensors", header, data);
  auto reader = CheckpointReader::open(path);
  EXPECT_NE(reinterpret_cast<uintptr_t>(reader->entry("w").data) % 4, 0u);
  std::vector<double> got(5);
  std::vector<float> same(5);
  reader->read_into("w", Tensor(got.data(), DType::F64, {5}));
  reader->read_into("w", Tensor(same.data(), DType::F32, {5}));
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], double(w[i]));
  EXPECT_EQ(same, w);
}

}  // namespace
}  // namespace lt::io
