// AdamW with bitsandbytes' 8-bit state on the GPU (ops/adamw8bit.h): the CPU op's arithmetic
// (adamw8bit_math.h, every operation an explicitly rounded intrinsic), so the bits are the CPU's, which are
// bitsandbytes' CPU backend's. 8-bit state: one thread block per 256-element quantization block; each
// thread reads its element's codes back (code * absmax), updates the moments and the parameter, the block
// takes the new absmax of each moment (a max: exact in any order) and each thread codes its moments again.
// The bin -> code step is a binary search over the midpoints of the map in shared memory: the same index the
// CPU's 65536-entry table holds (it is built by the same function). 32-bit state: one element per thread.
#include <type_traits>

#include "ops/adamw8bit_maps.h"
#include "ops/cuda/adamw8bit_launch.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = int(kAdamW8bitBlock);  // one thread per element of a quantization block
static_assert(kThreads % kWarp == 0);

// The two maps, passed by value (2 KiB of kernel parameters) so that no device-global state is needed.
struct Maps {
  float code1[256];  // signed: the first moment
  float code2[256];  // unsigned: the second moment
};

Maps maps() {
  Maps m{};
  for (int i = 0; i < 256; ++i) {
    m.code1[i] = kDynamicSigned[i];
    m.code2[i] = kDynamicUnsigned[i];
  }
  return m;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = 0.0f;
  for (int w = 0; w < kThreads / kWarp; ++w) r = fmaxf(r, scratch[w]);
  __syncthreads();  // the scratch is free again
  return r;
}

// The code of x in a block whose absmax is `absmax` (code 0 when the block is all zeros).
__device__ __forceinline__ uint8_t code_of(float x, float absmax, const float* midpoints) {
  if (absmax == 0.0f) return 0;
  return adamw8bit_code_of_bin(midpoints, adamw8bit_bin(rn::mul(x, rn::div(1.0f, absmax))));
}

template <class P>
__device__ __forceinline__ void store_param(P* param, int64_t k, float p, DType copy_dt, void* copy) {
  store_f(param + k, p);
  if constexpr (std::is_same_v<P, float>) {
    if (copy != nullptr) {
      if (copy_dt == DType::BF16)
        store_f(static_cast<bf16*>(copy) + k, p);
      else
        store_f(static_cast<fp16*>(copy) + k, p);
    }
  }
}

template <class P, class G>
__global__ void __launch_bounds__(kThreads)
    adamw8bit_blocks_kernel(P* param, const G* grad, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                            int64_t count, DType copy_dt, void* copy, AdamW8bitScalars s, Maps maps) {
  __shared__ float code1[256], code2[256], mid1[255], mid2[255], scratch[kThreads / kWarp];
  const int tid = int(threadIdx.x);
  code1[tid] = maps.code1[tid];
  code2[tid] = maps.code2[tid];
  __syncthreads();
  if (tid < 255) {
    mid1[tid] = adamw8bit_midpoint(code1, tid);
    mid2[tid] = adamw8bit_midpoint(code2, tid);
  }
  const int64_t b = blockIdx.x, k = b * kAdamW8bitBlock + tid;
  const bool valid = k < count;
  float m = 0.0f, v = 0.0f;
  if (valid) {
    m = rn::mul(code1[q1[k]], absmax1[b]);
    v = rn::mul(code2[q2[k]], absmax2[b]);
    adamw8bit_moments(load_f(grad + k), m, v, s);
    store_param(param, k, adamw8bit_param(load_f(param + k), m, v, s), copy_dt, copy);
  }
  // Every thread has read absmax1[b] and absmax2[b] before the reductions' barriers; then they are rewritten.
  const float a1 = block_max(fabsf(m), scratch);
  const float a2 = block_max(fabsf(v), scratch);
  if (tid == 0) {
    absmax1[b] = a1;
    absmax2[b] = a2;
  }
  if (valid) {
    q1[k] = code_of(m, a1, mid1);
    q2[k] = code_of(v, a2, mid2);
  }
}

template <class P, class G>
__global__ void __launch_bounds__(kThreads)
    adamw32bit_kernel(P* param, const G* grad, float* m_state, float* v_state, int64_t count, DType copy_dt,
                      void* copy, AdamW8bitScalars s) {
  for (int64_t k = int64_t(blockIdx.x) * kThreads + threadIdx.x; k < count;
       k += int64_t(gridDim.x) * kThreads) {
    float m = m_state[k], v = v_state[k];
    adamw8bit_moments(load_f(grad + k), m, v, s);
    m_state[k] = m;
    v_state[k] = v;
    store_param(param, k, adamw32bit_param(load_f(param + k), m, v, s), copy_dt, copy);
  }
}

template <class P, class G>
void launch_typed(const AdamW8bitLaunch& t, cudaStream_t stream) {
  P* param = static_cast<P*>(t.param);
  const G* grad = static_cast<const G*>(t.grad);
  if (t.eight_bit) {
    const int64_t blocks = (t.count + kAdamW8bitBlock - 1) / kAdamW8bitBlock;
    adamw8bit_blocks_kernel<P, G><<<unsigned(blocks), kThreads, 0, stream>>>(
        param, grad, static_cast<uint8_t*>(t.state1), static_cast<uint8_t*>(t.state2), t.absmax1, t.absmax2,
        t.count, t.copy_dt, t.copy, t.s, maps());
  } else {
    const int64_t blocks = (t.count + kThreads - 1) / kThreads;
    adamw32bit_kernel<P, G><<<unsigned(blocks), kThreads, 0, stream>>>(
        param, grad, static_cast<float*>(t.state1), static_cast<float*>(t.state2), t.count, t.copy_dt, t.copy,
        t.s);
  }
}

}  // namespace

void launch_adamw8bit(const AdamW8bitLaunch& t, cudaStream_t stream) {
  if (t.count == 0) return;
  if (t.param_dt == DType::BF16) {
    if (t.grad_dt == DType::BF16)
      launch_typed<bf16, bf16>(t, stream);
    else
      launch_typed<bf16, float>(t, stream);
  } else {
    launch_typed<float, float>(t, stream);
  }
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
