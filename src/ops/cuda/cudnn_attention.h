// cuDNN's fused flash attention as an alternative backend of ops.h's attention (cudnn_attention.cpp):
// causal (bottom-right aligned: queries are the last q_len of the first q_offset + q_len keys), GQA, bf16,
// head_dim 64, 128 or 256, ALiBi or none, no segments, no window (attention_select.h says which calls
// qualify).
//
// cuDNN is loaded at run time (dlopen of libcudnn.so.9, or the path in LT_CUDNN_LIBRARY): the leantune
// binary neither links nor needs it. When it cannot be loaded, or is older than 9.16, the backend is simply
// unavailable and cudnn_attention_status() says why. No CUDA or cuDNN types here.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "ops/context.h"
#include "ops/ops.h"

namespace lt::ops::cuda {

struct CudnnAttentionStatus {
  bool available = false;
  int64_t version = 0;  // cudnnGetVersion(), e.g. 92600; 0 when the library did not load
  std::string library;  // the name or path given to dlopen
  std::string reason;   // why it is unavailable (empty when available)
};
// Loads cuDNN on the first call (thread-safe; from ctx.kernels.cudnn_library) and checks that it makes a
// handle on ctx.device.
const CudnnAttentionStatus& cudnn_attention_status(const Context& ctx = default_context());
// One line for `leantune devices`, e.g. "cudnn attention: available (cuDNN 9.26.0)" or "... unavailable:
// why".
std::string cudnn_attention_status_line(const Context& ctx = default_context());

// Run the call through cuDNN. The caller (attention_host.cpp) has checked eligibility and availability.
// Returns false, with *why set, when cuDNN builds no execution plan for this shape (the failure is cached:
// later calls of the shape return false at once); throws lt::Error when an execution fails.
// Backward: dq is written; dk and dv accumulate (+=): cuDNN writes its dK/dV into stream-ordered
// temporaries that are then added into dk, dv.
bool cudnn_attention_forward(const Context& ctx, const AttentionParams& p, Tensor out, Tensor lse, Tensor q,
                             Tensor k, Tensor v, std::string* why);
bool cudnn_attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv,
                              Tensor dout, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                              std::string* why);

// Plans are cached per run (its context's handles) and (device, direction, B, Tq, q_offset + Tq, kv_len, H,
// KVH, HD, ALiBi). For benchmarks: how many were built in this process and how long that took in total, and
// a way to drop a run's plans.
struct CudnnAttentionPlanStats {
  int64_t plans_built = 0;
  double build_seconds = 0;
};
CudnnAttentionPlanStats cudnn_attention_plan_stats();
void cudnn_attention_clear_plans(const Context& ctx);

// Diagnostics: builds the forward or backward graph of `p` step by step (every descriptor, the operation
// graph, each engine configuration the heuristics return and whether its plan finalizes) and returns the
// log, one step per line with cuDNN's status strings. Never throws; the log ends with the first failure.
std::string cudnn_attention_probe(const Context& ctx, const AttentionParams& p, bool backward);

// Deterministic attention (bit-identical gradients run to run): never cuDNN (its backward accumulates dQ
// with atomics). The kernel option deterministic (ops/kernel_options.h) of ctx.
bool attention_deterministic(const Context& ctx);

}  // namespace lt::ops::cuda
