#include <gtest/gtest.h>

#include "ops/cuda/device_memory.h"

namespace lt {
namespace {

TEST(CudaDevice, ArenaOnTheGpu) {
  ASSERT_GT(ops::cuda::device_count(), 0) << "no GPU visible: test_cuda must run on the GPU machine";
  auto info = ops::cuda::device_info(0);
  EXPECT_GE(info.major, 9) << info.name;
  Arena arena("gpu", ops::cuda::DeviceMemory::instance(), 1 << 24);
  Tensor t = arena.alloc("x", DType::BF16, {1024, 1024});
  EXPECT_EQ(t.device, Device::CUDA);
  EXPECT_EQ(arena.high_water(), 2u << 20);
}

}  // namespace
}  // namespace lt

#include <cmath>
#include <vector>

#include "ops/cuda/poison.h"

namespace lt {
namespace {

TEST(CudaDevice, PoisonFillWritesNaNs) {
  ASSERT_GT(ops::cuda::device_count(), 0);
  Arena arena("gpu", ops::cuda::DeviceMemory::instance(), 1 << 20);
  Tensor t = arena.alloc("x", DType::F32, {1001});
  ops::cuda::poison_fill(t.data, t.bytes(), nullptr);
  std::vector<float> host(1001, 0.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace lt
