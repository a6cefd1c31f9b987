// How ops/<op>.cpp routes a call to ops/cpu or ops/cuda by the device of the op's tensors.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::ops {

// Throws unless every given non-empty tensor lives on `device`.
void check_device(Device device, std::initializer_list<const Tensor*> tensors, const char* op);
[[noreturn]] void fail_no_cuda(const char* op);

}  // namespace lt::ops

// LT_OP_DISPATCH(ctx, device, op, args...): cpu::op(args...) or, in CUDA builds, cuda::op(ctx, args...) with
// ctx the op call's context (ops/context.h), timed under profile_ops and waited for under cuda_sync (the
// scope objects live to the end of the full expression, i.e. across the call).
#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/op_profile.h"
#define LT_OP_DISPATCH(ctx, device, op, ...)                                            \
  ((device) == ::lt::Device::CUDA                                                       \
       ? (::lt::ops::cuda::DebugSync(ctx), ::lt::ops::cuda::OpProfileScope((ctx), #op), \
          ::lt::ops::cuda::op((ctx), __VA_ARGS__))                                      \
       : ::lt::ops::cpu::op(__VA_ARGS__))
#else
#define LT_OP_DISPATCH(ctx, device, op, ...)                                          \
  ((void)(ctx), (device) == ::lt::Device::CUDA                                        \
                    ? (::lt::ops::fail_no_cuda(#op), ::lt::ops::cpu::op(__VA_ARGS__)) \
                    : ::lt::ops::cpu::op(__VA_ARGS__))
#endif

// For an op whose CUDA twin does not exist yet: CUDA tensors are refused with a clear message.
#define LT_OP_DISPATCH_CPU(device, op, ...)                                                         \
  ((device) == ::lt::Device::CUDA ? (::lt::ops::fail_no_cuda(#op), ::lt::ops::cpu::op(__VA_ARGS__)) \
                                  : ::lt::ops::cpu::op(__VA_ARGS__))
