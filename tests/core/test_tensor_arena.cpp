#include <gtest/gtest.h>

#include "core/arena.h"
#include "core/tensor.h"

namespace lt {
namespace {

TEST(Tensor, ShapeNumelSliceReshape) {
  float data[24];
  Tensor t(data, DType::F32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96u);
  EXPECT_EQ(t.shape_string(), "(2, 3, 4)");
  Tensor r = t.reshaped({6, 4});
  EXPECT_EQ(r.dim(0), 6);
  EXPECT_EQ(r.dim(-1), 4);
  Tensor s = r.slice_rows(2, 5);
  EXPECT_EQ(s.ptr<float>(), data + 8);
  EXPECT_EQ(s.dim(0), 3);
  EXPECT_THROW(t.reshaped({5, 5}), Error);
  EXPECT_THROW(r.slice_rows(4, 7), Error);
}

TEST(Tensor, ChecksNameWhatWasExpected) {
  float data[6];
  Tensor t(data, DType::F32, {2, 3});
  EXPECT_NO_THROW(check_shape(t, {2, -1}, "x"));
  try {
    check_shape(t, {3, 2}, "attn_q input");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_q input: shape (2, 3) expected (3, 2)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.ptr<double>("weights"), Error);
  EXPECT_THROW(check_dtype(t, DType::BF16, "w"), Error);
}

TEST(Arena, NamedAllocationsMarksAndHighWater) {
  Arena arena("test", HostMemory::instance(), 1 << 20);
  Tensor a = arena.alloc("a", DType::F32, {100});
  auto m = arena.mark();
  Tensor b = arena.alloc("b", DType::F64, {1000});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 256, 0u);
  EXPECT_EQ(arena.allocations().size(), 2u);
  EXPECT_EQ(arena.allocations()[1].name, "b");
  size_t peak = arena.used();
  arena.release(m);
  EXPECT_EQ(arena.allocations().size(), 1u);
  EXPECT_LT(arena.used(), peak);
  EXPECT_EQ(arena.high_water(), peak);
  Tensor c = arena.alloc("c", DType::F32, {10});
  EXPECT_EQ(c.data, b.data);  // reused
  (void)a;
}

TEST(Arena, OutOfMemoryNamesTheAllocation) {
  Arena arena("gpu0", HostMemory::instance(), 4096);
  try {
    arena.alloc("kv_cache", DType::F32, {4096});
    FAIL();
  } catch (const OutOfMemory& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kv_cache"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gpu0"), std::string::npos) << msg;
  }
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
}

}  // namespace
}  // namespace lt
