// The CUDA 4-bit kernels give the CPU reference's bytes (which tests/ops/test_quant4_golden.cpp ties to
// bitsandbytes): packed codes and absmax of NF4 and FP4 from f32/bf16/f16 inputs, the dequantized values in
// every output dtype, and the nested 8-bit quantization of the scales. Inputs cover blocks crossing rows,
// a partial last block, an odd element count, all-zero blocks and values exactly on the code midpoints.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "core/dtype.h"
#include "ops/cuda/quant4_launch.h"
#include "ops/quant4.h"
#include "parity_support.h"

namespace lt {
namespace {

using ops::kQuant4BlockSize;
using ops::Quant4Type;

// A device copy of a host vector, freed at scope end.
template <class T>
struct DeviceVec {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceVec(size_t n) : count(n) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
  }
  explicit DeviceVec(const std::vector<T>& host) : DeviceVec(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVec() { cudaFree(ptr); }
  std::vector<T> download() const {
    std::vector<T> host(count);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

// n values of `dtype` (raw bytes): Gaussian-ish values of varied block scales, block 1 all zeros (when it
// exists), and in block 2 a 1.0 (so absmax is 1) followed by the exact midpoints of the NF4 codes.
std::vector<uint8_t> make_input(DType dtype, int64_t n, uint64_t seed) {
  std::vector<float> v = [&] {
    std::vector<double> u = test::random_values(size_t(n), seed, -1.0, 1.0);
    std::vector<float> f(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double scale = std::pow(10.0, double((i / kQuant4BlockSize) % 5) - 3.0);
      f[size_t(i)] = float(u[size_t(i)] * std::fabs(u[size_t(i)]) * scale);
    }
    return f;
  }();
  for (int64_t i = kQuant4BlockSize; i < std::min(n, 2 * kQuant4BlockSize); ++i) v[size_t(i)] = 0.0f;
  const float midpoints[] = {-0.8480964004993439f, -0.045525018125772476f,
                             0.03979014977812767f, 0.8614784181118011f,
                             0.29166667f,          -0.0859375f,
                             0.00260417f};
  if (n >= 3 * kQuant4BlockSize) {
    v[size_t(2 * kQuant4BlockSize)] = 1.0f;
    for (size_t k = 0; k < std::size(midpoints); ++k) v[size_t(2 * kQuant4BlockSize) + 1 + k] = midpoints[k];
  }
  std::vector<uint8_t> bytes(size_t(n) * dtype_size(dtype));
  convert_elements(bytes.data(), dtype, v.data(), DType::F32, size_t(n));
  return bytes;
}

TEST(CudaQuant4, QuantizeAndDequantizeMatchTheCpuReference) {
  LT_REQUIRE_GPU();
  for (Quant4Type type : {Quant4Type::NF4, Quant4Type::FP4}) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (int64_t n : {int64_t(1), int64_t(63), int64_t(64), int64_t(65), int64_t(7 * 193),
                        int64_t(4096 * 3 + 37), int64_t(1) << 21}) {
        SCOPED_TRACE(::testing::Message()
                     << ops::quant4_type_name(type) << " " << dtype_name(dtype) << " n=" << n);
        const std::vector<uint8_t> x = make_input(dtype, n, uint64_t(n) * 7 + uint64_t(dtype));
        std::vector<uint8_t> packed(size_t(ops::quant4_packed_bytes(n)));
        std::vector<float> absmax(size_t(ops::quant4_blocks(n)));
        ops::quantize_4bit_cpu(dtype, x.data(), n, type, packed.data(), absmax.data());

        DeviceVec<uint8_t> d_x(x), d_packed(packed.size());
        DeviceVec<float> d_absmax(absmax.size());
        ops::cuda::launch_quantize_4bit(dtype, d_x.ptr, n, type, d_packed.ptr, d_absmax.ptr, nullptr);
        EXPECT_EQ(d_packed.download(), packed);
        const std::vector<float> gpu_absmax = d_absmax.download();
        ASSERT_EQ(std::memcmp(gpu_absmax.data(), absmax.data(), absmax.size() * 4), 0);

        for (DType out : {DType::F32, DType::BF16, DType::F16}) {
          std::vector<uint8_t> ref(size_t(n) * dtype_size(out));
          ops::dequantize_4bit_cpu(packed.data(), absmax.data(), n, type, out, ref.data());
          DeviceVec<uint8_t> d_out(ref.size());
          ops::cuda::launch_dequantize_4bit(d_packed.ptr, d_absmax.ptr, n, type, out, d_out.ptr, nullptr);
          EXPECT_EQ(d_out.download(), ref) << "dequantized to " << dtype_name(out);
        }
      }
    }
  }
}

TEST(CudaQuant4, NestedAbsmaxQuantizationMatchesTheCpuReference) {
  LT_REQUIRE_GPU();
  const std::vector<float> map = ops::signed_dynamic_map();
  DeviceVec<float> d_map(map);
  for (int64_t blocks : {int64_t(1), int64_t(255), int64_t(256), int64_t(3 * 256 + 5), int64_t(1) << 16}) {
    SCOPED_TRACE(::testing::Message() << "blocks=" << blocks);
    std::vector<double> u = test::random_values(size_t(blocks), uint64_t(blocks), 0.001, 0.2);
    std::vector<float> absmax(u.begin(), u.end());
    const float offset = ops::absmax_mean(absmax.data(), blocks);
    std::vector<uint8_t> q(static_cast<size_t>(blocks));
    std::vector<float> nested(size_t(ops::nested_blocks(blocks)));
    ops::quantize_absmax_cpu(absmax.data(), blocks, offset, map.data(), q.data(), nested.data());

    DeviceVec<float> d_absmax(absmax), d_nested(nested.size()), d_back(absmax.size());
    DeviceVec<uint8_t> d_q(q.size());
    ops::cuda::launch_quantize_absmax(d_absmax.ptr, blocks, offset, d_map.ptr, d_q.ptr, d_nested.ptr,
                                      nullptr);
    EXPECT_EQ(d_q.download(), q);
    const std::vector<float> gpu_nested = d_nested.download();
    ASSERT_EQ(std::memcmp(gpu_nested.data(), nested.data(), nested.size() * 4), 0);

    std::vector<float> back(absmax.size());
    ops::dequantize_absmax_cpu(q.data(), nested.data(), map.data(), offset, blocks, back.data());
    ops::cuda::launch_dequantize_absmax(d_q.ptr, d_nested.ptr, d_map.ptr, offset, blocks, d_back.ptr,
                                        nullptr);
    const std::vector<float> gpu_back = d_back.download();
    ASSERT_EQ(std::memcmp(gpu_back.data(), back.data(), back.size() * 4), 0);
  }
}

}  // namespace
}  // namespace lt
