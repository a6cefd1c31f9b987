#include <gtest/gtest.h>

#include <cuda_runtime.h>

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

// A rank of several sets its own GPU once (cudaSetDevice(LOCAL_RANK)); asking about the device (its name
// for the log, its free memory for the plan) must not move the thread back to GPU 0, or the rank's weights
// land on GPU 0 while its NCCL communicator works on its own GPU (illegal memory access in the first
// collective). With one GPU the current device can only be 0; the check bites on a machine with several.
TEST(CudaDevice, DeviceInfoLeavesTheCurrentDevice) {
  const int n = ops::cuda::device_count();
  ASSERT_GT(n, 0) << "no GPU visible: test_cuda must run on the GPU machine";
  const int last = n - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  const ops::cuda::DeviceInfo mine = ops::cuda::device_info();
  int now = -1;
  ASSERT_EQ(cudaGetDevice(&now), cudaSuccess);
  EXPECT_EQ(now, last);
  for (int d = 0; d < n; ++d) {
    const ops::cuda::DeviceInfo other = ops::cuda::device_info(d);
    EXPECT_GT(other.total_bytes, 0u);
    ASSERT_EQ(cudaGetDevice(&now), cudaSuccess);
    EXPECT_EQ(now, last) << "device_info(" << d << ") moved the thread to another GPU";
  }
  EXPECT_EQ(mine.total_bytes, ops::cuda::device_info(last).total_bytes);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
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
