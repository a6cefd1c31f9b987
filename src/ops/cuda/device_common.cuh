// Device helpers shared by the kernels: loads/stores through f32 for the storage dtypes (bf16/f16 use
// core/dtype.h's round-to-nearest-even conversions, the same bits as the CPU side), block reductions in a
// fixed order (deterministic), and the device error record. Header for .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace lt::ops::cuda {

__device__ __forceinline__ float load_f(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_f(const bf16* p) {
  return to_float(*p);
}
__device__ __forceinline__ float load_f(const fp16* p) {
  return to_float(*p);
}
__device__ __forceinline__ float load_f(const double* p) {
  return float(*p);
}
__device__ __forceinline__ void store_f(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store_f(bf16* p, float v) {
  *p = to_bf16(v);
}
__device__ __forceinline__ void store_f(fp16* p, float v) {
  *p = to_fp16(v);
}
__device__ __forceinline__ void store_f(double* p, float v) {
  *p = double(v);
}

constexpr int kWarp = 32;

// 16 bytes of T: one vector load or store (8 bf16, 4 f32).
template <class T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. `scratch` holds
// 32 floats of shared memory; the call ends with the scratch free for reuse.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float t = lane < warps ? scratch[lane] : 0.0f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

// Records the first error (code != 0) in the slot; later ones are dropped.
__device__ __forceinline__ void report_error(int64_t* slot, int64_t code, int64_t row, int64_t value) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(slot), 0ull, static_cast<unsigned long long>(code)) ==
      0ull) {
    slot[1] = row;
    slot[2] = value;
  }
}

// Calls fn(T{}) with T = float, bf16 or fp16 for the compute dtypes of the GPU kernels.
template <class Fn>
void dispatch_compute(DType dt, Fn&& fn) {
  if (dt == DType::BF16)
    fn(bf16{});
  else if (dt == DType::F16)
    fn(fp16{});
  else
    fn(float{});
}

inline unsigned grid_for(int64_t count, int threads, int64_t max_blocks = 65535 * 32) {
  int64_t b = (count + threads - 1) / threads;
  if (b < 1) b = 1;
  return unsigned(b < max_blocks ? b : max_blocks);
}

}  // namespace lt::ops::cuda
