// 4-bit (NF4/FP4) blockwise quantization and dequantization, and the nested 8-bit quantization of the block
// scales: the same f32 operations as the CPU reference (ops/cpu/quant4.cpp), written with explicit
// round-to-nearest intrinsics so that nvcc fuses nothing (bitsandbytes' kernels do one multiply per value).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/quant4_launch.h"
#include "ops/quant4_code.h"

namespace lt::ops::cuda {

namespace {

__constant__ float kCodeValues[2][16] = {{LT_NF4_CODE_VALUES}, {LT_FP4_CODE_VALUES}};

constexpr int kWarpsPerBlock = 8;  // one warp per 64-element block: each lane owns one packed byte

__device__ __forceinline__ uint8_t code4(bool nf4, float scaled) {
  return nf4 ? nf4_code(scaled) : fp4_code(scaled);
}

// One warp per quantization block; lane l holds elements 2l and 2l+1 of it (zeros past the end, as the
// reference pads them).
template <class T>
__global__ void quantize_4bit_kernel(const T* x, int64_t n, bool nf4, uint8_t* packed, float* absmax) {
  const int lane = threadIdx.x % kWarp;
  const int64_t blocks = (n + kQuant4BlockSize - 1) / kQuant4BlockSize;
  const int64_t warp_stride = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t b = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; b < blocks; b += warp_stride) {
    const int64_t i = b * kQuant4BlockSize + 2 * lane;
    const float v0 = i < n ? load_f(x + i) : 0.0f;
    const float v1 = i + 1 < n ? load_f(x + i + 1) : 0.0f;
    float amax = fmaxf(fabsf(v0), fabsf(v1));
    for (int o = kWarp / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float inv = __frcp_rn(amax);  // 1.0f / amax, correctly rounded; inf for an all-zero block
    if (lane == 0) absmax[b] = amax;
    if (i < n) packed[i / 2] = uint8_t(code4(nf4, __fmul_rn(v0, inv)) << 4 | code4(nf4, __fmul_rn(v1, inv)));
  }
}

// One thread per packed byte: two outputs, each one f32 product rounded once to T.
template <class T>
__global__ void dequantize_4bit_kernel(const uint8_t* packed, const float* absmax, int64_t n, int table,
                                       T* out) {
  const int64_t bytes = (n + 1) / 2;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < bytes;
       k += int64_t(gridDim.x) * blockDim.x) {
    const uint8_t byte = packed[k];
    const float scale = absmax[(2 * k) / kQuant4BlockSize];
    store_f(out + 2 * k, __fmul_rn(kCodeValues[table][byte >> 4], scale));
    if (2 * k + 1 < n) store_f(out + 2 * k + 1, __fmul_rn(kCodeValues[table][byte & 0x0f], scale));
  }
}

// The same values sixteen at a time, for QLoRA's per-GEMM dequantization where this kernel's bandwidth is the
// cost: one 8-byte load of codes, one block scale (16 divides 64), the 16-entry table in shared memory (a
// __constant__ table read at lane-dependent indices serializes), and 16-byte stores. Needs n % 16 == 0 and
// 16-byte-aligned pointers (the launcher checks and otherwise uses the kernel above).
template <class T>
__global__ void dequantize_4bit_x16_kernel(const uint64_t* packed, const float* absmax, int64_t groups,
                                           int table, T* out) {
  __shared__ float lut[16];
  if (threadIdx.x < 16) lut[threadIdx.x] = kCodeValues[table][threadIdx.x];
  __syncthreads();
  constexpr int kPerStore = 16 / int(sizeof(T));  // values per 16-byte store
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t bytes = packed[g];
    const float scale = absmax[(16 * g) / kQuant4BlockSize];
    alignas(16) T v[16];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned byte = unsigned(bytes >> (8 * k)) & 0xffu;  // byte k of the group (little-endian)
      store_f(v + 2 * k, __fmul_rn(lut[byte >> 4], scale));
      store_f(v + 2 * k + 1, __fmul_rn(lut[byte & 0x0f], scale));
    }
    uint4* dst = reinterpret_cast<uint4*>(out + 16 * g);
#pragma unroll
    for (int k = 0; k < 16 / kPerStore; ++k) dst[k] = reinterpret_cast<const uint4*>(v)[k];
  }
}

// One CUDA block of 256 threads per nested block of 256 absmax values.
__global__ void quantize_absmax_kernel(const float* absmax, int64_t blocks, float offset, const float* map,
                                       uint8_t* q, float* nested_absmax) {
  __shared__ float smem_map[256];
  __shared__ float warp_max[kNestedBlockSize / kWarp];
  smem_map[threadIdx.x] = map[threadIdx.x];
  const int64_t i = int64_t(blockIdx.x) * kNestedBlockSize + threadIdx.x;
  const float y = i < blocks ? __fsub_rn(absmax[i], offset) : 0.0f;
  float amax = fabsf(y);
  for (int o = kWarp / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (threadIdx.x % kWarp == 0) warp_max[threadIdx.x / kWarp] = amax;
  __syncthreads();
  amax = warp_max[0];
  for (int w = 1; w < kNestedBlockSize / kWarp; ++w) amax = fmaxf(amax, warp_max[w]);
  if (threadIdx.x == 0) nested_absmax[blockIdx.x] = amax;
  if (i < blocks) q[i] = dynamic8_code(smem_map, __fmul_rn(y, __frcp_rn(amax)));
}

__global__ void dequantize_absmax_kernel(const uint8_t* q, const float* nested_absmax, const float* map,
                                         float offset, int64_t blocks, float* absmax) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < blocks;
       i += int64_t(gridDim.x) * blockDim.x)
    absmax[i] = __fadd_rn(__fmul_rn(map[q[i]], nested_absmax[i / kNestedBlockSize]), offset);
}

}  // namespace

void launch_quantize_4bit(DType x_dt, const void* x, int64_t n, Quant4Type type, uint8_t* packed,
                          float* absmax, cudaStream_t s) {
  if (n == 0) return;
  const int64_t blocks = quant4_blocks(n);
  dispatch_compute(x_dt, [&](auto tag) {
    using T = decltype(tag);
    quantize_4bit_kernel<T><<<grid_for(blocks, kWarpsPerBlock), kWarpsPerBlock * kWarp, 0, s>>>(
        static_cast<const T*>(x), n, type == Quant4Type::NF4, packed, absmax);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n, Quant4Type type,
                            DType out_dt, void* out, cudaStream_t s) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const bool x16 = n % 16 == 0 && reinterpret_cast<uintptr_t>(packed) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0;
  dispatch_compute(out_dt, [&](auto tag) {
    using T = decltype(tag);
    if (x16) {
      dequantize_4bit_x16_kernel<T><<<grid_for(n / 16, kThreads), kThreads, 0, s>>>(
          reinterpret_cast<const uint64_t*>(packed), absmax, n / 16, type == Quant4Type::NF4 ? 0 : 1,
          static_cast<T*>(out));
      return;
    }
    dequantize_4bit_kernel<T><<<grid_for(quant4_packed_bytes(n), kThreads), kThreads, 0, s>>>(
        packed, absmax, n, type == Quant4Type::NF4 ? 0 : 1, static_cast<T*>(out));
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_quantize_absmax(const float* absmax, int64_t blocks, float offset, const float* map, uint8_t* q,
                            float* nested_absmax, cudaStream_t s) {
  if (blocks == 0) return;
  quantize_absmax_kernel<<<unsigned(nested_blocks(blocks)), kNestedBlockSize, 0, s>>>(absmax, blocks, offset,
                                                                                      map, q, nested_absmax);
  LT_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_absmax(const uint8_t* q, const float* nested_absmax, const float* map, float offset,
                              int64_t blocks, float* absmax, cudaStream_t s) {
  if (blocks == 0) return;
  constexpr int kThreads = 256;
  dequantize_absmax_kernel<<<grid_for(blocks, kThreads), kThreads, 0, s>>>(q, nested_absmax, map, offset,
                                                                           blocks, absmax);
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
