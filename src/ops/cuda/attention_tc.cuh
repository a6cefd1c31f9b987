// Shared pieces of the tensor-core flash attention (attention_tc.cu forward, attention_tc_bwd.cu backward):
// tile geometry, and thin wrappers of the PTX instructions they use (cp.async, ldmatrix, mma.sync m16n8k16
// bf16/f16 -> f32, ex2.approx). Header for those .cu files only.
//
// mma.m16n8k16 fragments (PTX ISA; lane = 4 * gid + tig), as (row, columns) of each register:
// - A (16 x 16, row-major): a0 (gid, 2tig..+1), a1 (gid + 8, 2tig..+1), a2 (gid, 2tig + 8..+9),
//   a3 (gid + 8, 2tig + 8..+9);
// - B (16 x 8, column-major): b0 (k 2tig..+1, n gid), b1 (k 2tig + 8..+9, n gid);
// - C (16 x 8, f32): c0, c1 (gid, 2tig..+1), c2, c3 (gid + 8, 2tig..+1).
// The C fragments of two adjacent 8-column blocks form the A fragment of one 16-wide k step, so a score
// tile becomes the left operand of the next product without leaving registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda::tc {

inline constexpr int kTcWarps = 4;  // of the backward kernels, and the forward's default
inline constexpr int kTcThreads = kWarp * kTcWarps;
inline constexpr int kTcRows = 16 * kTcWarps;  // query rows of a CTA (64)
inline constexpr int kTcKeys = 64;             // keys of a tile
inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr float kTcNegInf = -__builtin_huge_valf();

template <int HD>
struct TcShape {
  // bf16 elements per shared row: 16 bytes of padding put the 8 rows an ldmatrix reads on different banks.
  static constexpr int kLd = HD + 8;
  static constexpr int kChunks = HD / 8;  // 16-byte pieces of a row
  static constexpr int kKvElems = kTcKeys * kLd;
};

struct TcGeometry {
  int64_t B, Tq, S, H, KVH, q_offset, window;
  float scale_log2;  // scale * log2(e)
  float scale;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, or 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The 16-bit element type of the kernels, bf16 or f16: the fragment layouts are the same; the MMA
// instruction, the packing of two f32 into a 16-bit pair (round to nearest even) and the widening of one
// 16-bit value to f32 differ.
struct TcBf16 {
  // d (16 x 8 f32) += a (16 x 16 bf16) b (16 x 8 bf16).
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Two floats -> bf16x2, `lo` in the low half (the lower column of a fragment).
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return uint32_t(__bfloat16_as_ushort(v.x)) | (uint32_t(__bfloat16_as_ushort(v.y)) << 16);
  }
  static __device__ __forceinline__ float widen(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }
};

struct TcF16 {
  // d (16 x 8 f32) += a (16 x 16 f16) b (16 x 8 f16).
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return uint32_t(__half_as_ushort(v.x)) | (uint32_t(__half_as_ushort(v.y)) << 16);
  }
  static __device__ __forceinline__ float widen(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
};

// Calls fn(TcBf16{}) or fn(TcF16{}) for the kernels' dtype (attention_tc_eligible has checked it).
template <class Fn>
void dispatch_tc_element(DType dt, Fn&& fn) {
  if (dt == DType::F16)
    fn(TcF16{});
  else
    fn(TcBf16{});
}

// 2^x; 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// rows [row0, row0 + ROWS) of x (row stride ld elements, HD columns) -> tile (ROWS, HD + 8); rows at or
// past `limit` become zeros.
template <int HD, int ROWS>
__device__ __forceinline__ void load_tile_async(uint16_t* tile, const uint16_t* x, int64_t row0,
                                                int64_t limit, int64_t ld) {
  constexpr int kChunks = TcShape<HD>::kChunks;
  for (int c = threadIdx.x; c < ROWS * kChunks; c += blockDim.x) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < limit;
    const uint16_t* src = x + (valid ? row0 + r : 0) * ld + col;
    cp_async_16(smem_u32(tile + r * TcShape<HD>::kLd + col), src, valid);
  }
}

}  // namespace lt::ops::cuda::tc
