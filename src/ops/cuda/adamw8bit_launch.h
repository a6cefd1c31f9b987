// The CUDA launcher of AdamW with bitsandbytes' 8-bit state (ops/adamw8bit.h), for adamw8bit_host.cpp. No fmt
// here: adamw8bit.cu includes it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "ops/adamw8bit_math.h"

namespace lt::ops::cuda {

// One tensor's step, checked by ops::adamw8bit_step_many: param f32 or bf16, grad f32 or the param's dtype.
// With 8-bit state (eight_bit): state1/state2 (count) u8 codes, absmax1/absmax2 (ceil(count/256)) f32;
// otherwise state1/state2 (count) f32 moments and no absmax.
struct AdamW8bitLaunch {
  DType param_dt, grad_dt;
  void* param;
  const void* grad;
  void* state1;
  void* state2;
  float* absmax1;
  float* absmax2;
  int64_t count;
  bool eight_bit;
  DType copy_dt;  // of copy (nullptr: none): bf16 or f16, for an f32 param
  void* copy;
  AdamW8bitScalars s;
};

void launch_adamw8bit(const AdamW8bitLaunch& t, cudaStream_t stream);

}  // namespace lt::ops::cuda
