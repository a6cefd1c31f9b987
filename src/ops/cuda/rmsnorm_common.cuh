// What the RMSNorm kernels share (rmsnorm.cu): the 16-byte packs a thread loads,
// the register kernels' shape (packs per thread, threads per block) and the dispatch over it. Internal
// linkage: each .cu that includes it gets its own copy, and each kernel lives in the one .cu that launches
// it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda {

// The factor a column is multiplied by: w, or Gemma's 1 + w (RmsNormParams::one_plus_weight).
__device__ __forceinline__ float norm_weight(float w, bool one_plus) {
  return one_plus ? 1.0f + w : w;
}

namespace {

constexpr int kThreads = 256;
constexpr int kMaxPacks = 4;  // packs per thread of the register kernels

template <class T>
constexpr int kPack = int(16 / sizeof(T));

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p, int64_t k) {
  return reinterpret_cast<const Pack<T>*>(p)[k];
}

// An empty asm that "changes" a pack's words: the compiler then converts the 16-bit values to f32 again
// where they are used next instead of keeping both the packed and the converted values alive across a
// block reduction or a row loop (twice the registers for bf16, which spilled).
template <class T>
__device__ __forceinline__ void keep_packed(Pack<T>& p) {
  uint32_t* u = reinterpret_cast<uint32_t*>(p.v);
#pragma unroll
  for (int q = 0; q < 4; ++q) asm volatile("" : "+r"(u[q]));
}

// The register kernels' shape: K packs per thread (1, 2 or 4, the fewest that cover the row with at most
// kThreads threads) and the threads per block (a multiple of 32: small rows get fewer threads, not idle
// ones).
struct RegShape {
  int packs_per_thread = 0;  // 0: the row does not fit, use the general kernels
  int threads = 0;
};

RegShape reg_shape(int64_t packs) {
  for (int k = 1; k <= kMaxPacks; k *= 2)
    if (packs <= int64_t(k) * kThreads) {
      const int64_t t = (packs + k - 1) / k;
      return {k, int((t + kWarp - 1) / kWarp * kWarp)};
    }
  return {};
}

template <class T>
bool rows_packed(int64_t dim, std::initializer_list<const void*> pointers) {
  if (dim % kPack<T> != 0) return false;
  for (const void* p : pointers)
    if (p && !aligned16(p)) return false;
  return true;
}

// Calls fn(std::integral_constant<int, K>) for K = packs_per_thread (1, 2 or 4).
template <class Fn>
void with_packs(int packs_per_thread, Fn&& fn) {
  if (packs_per_thread == 1)
    fn(std::integral_constant<int, 1>{});
  else if (packs_per_thread == 2)
    fn(std::integral_constant<int, 2>{});
  else
    fn(std::integral_constant<int, 4>{});
}

}  // namespace

}  // namespace lt::ops::cuda
