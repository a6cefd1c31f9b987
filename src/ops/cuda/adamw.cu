// The fused AdamW step (ops.h adamw_step): one pass over param, grad, exp_avg and exp_avg_sq, f32 math in
// registers, the same operations as the CPU op in the same order. Every product, sum, quotient and square
// root is an explicitly rounded intrinsic (_rn), so nvcc cannot contract a product and a sum into an FMA the
// CPU does not do; the two FMAs the CPU does (lerp, the v update) are explicit. The result is therefore the
// CPU f32 op's, bit for bit. Memory bound: 4-element vectors when every pointer is 16-byte aligned.
#include <type_traits>

#include "ops/adamw_math.h"
#include "ops/cuda/adamw_many.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 4;

// The scalars of the step, rounded once to f32.
struct Scalars {
  float decay_factor, w1, b2, w2, bc2_sqrt, eps, neg_step;
  bool decay, stochastic;
  uint64_t seed;
  int64_t step;
};

// The compute copy of an f32 parameter (ops.h adamw_step's param_copy): nullptr, bf16 or f16.
struct Copy {
  void* data;
  bool is_bf16;
  __device__ __forceinline__ void store(int64_t i, float p) const {
    if (is_bf16)
      store_f(static_cast<bf16*>(data) + i, p);
    else
      store_f(static_cast<fp16*>(data) + i, p);
  }
};

__device__ __forceinline__ float lerp_f(float self, float end, float w) {
  const float diff = __fsub_rn(end, self);
  return fabsf(w) < 0.5f ? __fmaf_rn(w, diff, self) : __fmaf_rn(__fsub_rn(w, 1.0f), diff, end);
}

// `bits`: the element's random bits (adamw_rounding_bits), used only for stochastic rounding.
template <class P>
__device__ __forceinline__ P store_param(float p, const Scalars& s, uint32_t bits) {
  if constexpr (std::is_same_v<P, bf16>) {
    return s.stochastic ? bf16_stochastic_round(p, bits) : to_bf16(p);
  } else {
    return p;
  }
}

// One element: p, g in, m and v updated in place; returns the new parameter (f32, before rounding).
__device__ __forceinline__ float update(float p, float g, float& m, float& v, const Scalars& s) {
  if (s.decay) p = __fmul_rn(p, s.decay_factor);
  m = lerp_f(m, g, s.w1);
  v = __fmaf_rn(__fmul_rn(s.w2, g), g, __fmul_rn(v, s.b2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), s.eps);
  return __fadd_rn(p, __fdiv_rn(__fmul_rn(s.neg_step, m), denom));
}

template <class T>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

// in: param, grad, m, v. out: param, m, v. Each element is read before the same thread writes it. Thread tid
// of `stride` threads takes vectors (or elements) tid, tid + stride, ...: an element's result does not depend
// on the partition (its random bits come from its index), so any grid gives the same bits.
template <class P, class G>
__device__ __forceinline__ void adamw_elements(P* __restrict__ param, const G* __restrict__ grad,
                                               float* __restrict__ m_state, float* __restrict__ v_state,
                                               int64_t count, bool vectorized, const Scalars& s,
                                               const Copy& copy, int64_t tid, int64_t stride) {
  int64_t done = 0;
  if (vectorized) {
    const int64_t vecs = count / kVec;
    for (int64_t k = tid; k < vecs; k += stride) {
      Vec<P> p = reinterpret_cast<const Vec<P>*>(param)[k];
      const Vec<G> g = reinterpret_cast<const Vec<G>*>(grad)[k];
      float4 m = reinterpret_cast<const float4*>(m_state)[k];
      float4 v = reinterpret_cast<const float4*>(v_state)[k];
      float* mm = &m.x;
      float* vv = &v.x;
      // Stochastic rounding: one Philox block gives the bits of all four elements.
      uint32_t bits[kVec] = {0, 0, 0, 0};
      if (std::is_same_v<P, bf16> && s.stochastic) {
        const PhiloxCounter r = adamw_rounding_quad(s.seed, s.step, k);
        bits[0] = r.c0;
        bits[1] = r.c1;
        bits[2] = r.c2;
        bits[3] = r.c3;
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float np = update(load_f(&p.v[j]), load_f(&g.v[j]), mm[j], vv[j], s);
        p.v[j] = store_param<P>(np, s, bits[j]);
        if (copy.data) copy.store(k * kVec + j, np);
      }
      reinterpret_cast<Vec<P>*>(param)[k] = p;
      reinterpret_cast<float4*>(m_state)[k] = m;
      reinterpret_cast<float4*>(v_state)[k] = v;
    }
    done = vecs * kVec;
  }
  for (int64_t i = done + tid; i < count; i += stride) {
    float m = m_state[i], v = v_state[i];
    const float np = update(load_f(param + i), load_f(grad + i), m, v, s);
    const uint32_t bits =
        std::is_same_v<P, bf16> && s.stochastic ? adamw_rounding_bits(s.seed, s.step, i) : 0u;
    param[i] = store_param<P>(np, s, bits);
    if (copy.data) copy.store(i, np);
    m_state[i] = m;
    v_state[i] = v;
  }
}

template <class P, class G>
__global__ void adamw_kernel(P* __restrict__ param, const G* __restrict__ grad, float* __restrict__ m_state,
                             float* __restrict__ v_state, int64_t count, bool vectorized, Scalars s,
                             Copy copy) {
  adamw_elements(param, grad, m_state, v_state, count, vectorized, s, copy,
                 int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x);
}

// One tensor of a many-tensor launch: its blocks are [first_block, first_block + blocks) of the grid.
struct Slice {
  void* param;
  const void* grad;
  float* m;
  float* v;
  int64_t count;
  int64_t first_block, blocks;
  bool vectorized;
  Scalars s;
  Copy copy;
};

// The tensors of one many-tensor launch, passed by value as the kernel's parameter (no descriptor copy, so
// no host synchronization; 128 slices are about 13 KB of the 32 KB a kernel parameter may take).
constexpr int kSlicesPerLaunch = 128;
struct SliceBatch {
  Slice slice[kSlicesPerLaunch];
  int count;
};

template <class P, class G>
__global__ void adamw_many_kernel(const __grid_constant__ SliceBatch batch) {
  int lo = 0, hi = batch.count - 1;  // the last slice whose first block <= this block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.slice[mid].first_block <= int64_t(blockIdx.x))
      lo = mid;
    else
      hi = mid - 1;
  }
  const Slice& t = batch.slice[lo];
  adamw_elements(static_cast<P*>(t.param), static_cast<const G*>(t.grad), t.m, t.v, t.count, t.vectorized,
                 t.s, t.copy, (int64_t(blockIdx.x) - t.first_block) * blockDim.x + threadIdx.x,
                 t.blocks * blockDim.x);
}

template <class P, class G>
void launch(void* param, const void* grad, float* m, float* v, int64_t count, const Scalars& s, Copy copy,
            cudaStream_t stream) {
  const bool vectorized = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  const unsigned blocks = grid_for(vectorized ? (count + kVec - 1) / kVec : count, kThreads);
  adamw_kernel<P, G><<<blocks, kThreads, 0, stream>>>(static_cast<P*>(param), static_cast<const G*>(grad), m,
                                                      v, count, vectorized, s, copy);
}

Scalars scalars_of(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
                   bool stochastic_rounding, uint64_t seed) {
  const AdamWScalars d = adamw_scalars(lr, beta1, beta2, eps, weight_decay, step);
  return Scalars{float(d.decay_factor),
                 float(d.one_minus_beta1),
                 float(d.beta2),
                 float(d.one_minus_beta2),
                 float(d.bias_correction2_sqrt),
                 float(d.eps),
                 float(d.neg_step_size),
                 weight_decay != 0,
                 stochastic_rounding,
                 seed,
                 step};
}

}  // namespace

void launch_adamw_step(DType param_dt, void* param, DType grad_dt, const void* grad, float* exp_avg,
                       float* exp_avg_sq, int64_t count, double lr, double beta1, double beta2, double eps,
                       double weight_decay, int64_t step, bool stochastic_rounding, uint64_t seed,
                       DType copy_dt, void* copy, cudaStream_t stream) {
  if (count == 0) return;
  const Scalars s = scalars_of(lr, beta1, beta2, eps, weight_decay, step, stochastic_rounding, seed);
  if (param_dt == DType::BF16) {
    if (grad_dt == DType::BF16)
      launch<bf16, bf16>(param, grad, exp_avg, exp_avg_sq, count, s, Copy{}, stream);
    else
      launch<bf16, float>(param, grad, exp_avg, exp_avg_sq, count, s, Copy{}, stream);
  } else {
    launch<float, float>(param, grad, exp_avg, exp_avg_sq, count, s, Copy{copy, copy_dt == DType::BF16},
                         stream);
  }
  LT_CUDA_CHECK_LAUNCH();
}

void launch_adamw_many(std::span<const AdamWLaunch> tensors, double lr, double beta1, double beta2,
                       double eps, int64_t step, cudaStream_t stream) {
  // Small tensors by (param, grad) dtype pair, up to kSlicesPerLaunch per launch; large ones on their own.
  auto batched = [&](DType pdt, DType gdt, auto kernel) {
    SliceBatch batch{};
    int64_t blocks = 0;
    auto flush = [&] {
      if (batch.count == 0) return;
      kernel<<<unsigned(blocks), kThreads, 0, stream>>>(batch);
      LT_CUDA_CHECK_LAUNCH();
      batch.count = 0;
      blocks = 0;
    };
    for (const AdamWLaunch& t : tensors) {
      if (t.count == 0 || t.count > kAdamWManyMaxCount || t.param_dt != pdt || t.grad_dt != gdt) continue;
      const bool vectorized =
          aligned16(t.param) && aligned16(t.grad) && aligned16(t.exp_avg) && aligned16(t.exp_avg_sq);
      const int64_t b = grid_for(vectorized ? (t.count + kVec - 1) / kVec : t.count, kThreads);
      batch.slice[batch.count++] =
          Slice{t.param,
                t.grad,
                t.exp_avg,
                t.exp_avg_sq,
                t.count,
                blocks,
                b,
                vectorized,
                scalars_of(lr, beta1, beta2, eps, t.weight_decay, step, t.stochastic_rounding, t.seed),
                Copy{t.copy, t.copy_dt == DType::BF16}};
      blocks += b;
      if (batch.count == kSlicesPerLaunch) flush();
    }
    flush();
  };
  batched(DType::F32, DType::F32, adamw_many_kernel<float, float>);
  batched(DType::BF16, DType::BF16, adamw_many_kernel<bf16, bf16>);
  batched(DType::BF16, DType::F32, adamw_many_kernel<bf16, float>);
  for (const AdamWLaunch& t : tensors)
    if (t.count > kAdamWManyMaxCount)
      launch_adamw_step(t.param_dt, t.param, t.grad_dt, t.grad, t.exp_avg, t.exp_avg_sq, t.count, lr, beta1,
                        beta2, eps, t.weight_decay, step, t.stochastic_rounding, t.seed, t.copy_dt, t.copy,
                        stream);
}

}  // namespace lt::ops::cuda
