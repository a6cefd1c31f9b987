// AdamW on many tensors at once (ops/adamw_many.h's CUDA side): the small tensors (a LoRA run has hundreds of
// adapters of some 10^4 - 10^5 elements, each of which alone is a few microseconds of launch) in a handful of
// launches, every element updated by the very code and scalars of launch_adamw_step (the same bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "ops/adamw_many.h"

namespace lt::ops::cuda {

// One tensor's step: param f32 or bf16; grad the param's dtype or f32; moments f32; copy (nullptr: none) of
// copy_dt (bf16 or f16) for an f32 param.
struct AdamWLaunch {
  DType param_dt;
  void* param;
  DType grad_dt;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t count;
  double weight_decay;
  bool stochastic_rounding;
  uint64_t seed;
  DType copy_dt;
  void* copy;
};

// Tensors above this many elements get a launch of their own (they fill the GPU by themselves).
constexpr int64_t kAdamWManyMaxCount = int64_t(1) << 20;

void launch_adamw_many(std::span<const AdamWLaunch> tensors, double lr, double beta1, double beta2,
                       double eps, int64_t step, cudaStream_t stream);

// ops::adamw_step_many's CUDA side (the public function has checked every tensor and the shared scalars).
void adamw_step_many(const Context& ctx, std::span<const AdamWTensor> tensors);

}  // namespace lt::ops::cuda
