// cuDNN's fused flash attention (cudnn_attention.h), loaded at run time: the forward and backward calls,
// the probe and the deterministic switch. cuDNN recognizes a graph of matmul / pointwise / reduction
// operations as scaled dot-product attention and runs it with one fused flash-attention kernel:
//   cudnn_library.h          the library (dlopen), handles, status checks
//   cudnn_graph.h            descriptors and the graph builder
//   cudnn_attention_graph.h  the forward / backward graphs and a call's shape in cuDNN's terms
//   cudnn_plan_cache.h       execution plans per shape, cached
//   cudnn_execution.h        scratch, execution, autotune
// A chunk's backward (Tq < Se) runs as two calls in masks that cuDNN's fast engine takes (see Mask).
// cuDNN writes dK/dV; ops.h accumulates them, so they go to temporaries that are then added into dk/dv.
#include "ops/cuda/cudnn_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "ops/alibi.h"
#include "ops/cuda/attention_select.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cudnn_execution.h"
#include "ops/cuda/cudnn_library.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

using namespace cudnn;

namespace {

// The kernel option cudnn_split_backward false runs a chunk's backward as one call with the shifted mask
// (for measuring the split against it).
bool split_backward_enabled(const Context& ctx) {
  return ctx.kernels.cudnn_split_backward;
}

// The backward's scratch buffers after cuDNN's workspace: row sums, dQ accumulator, dK and dV temporaries.
std::array<size_t, 4> backward_buffers(const Shape& s) {
  const size_t rows = size_t(s.B * s.H * s.Tq), kv_elems = size_t(s.B * s.Se * s.KVH * s.HD);
  return {rows * sizeof(float), rows * size_t(s.HD) * sizeof(float), kv_elems * 2, kv_elems * 2};
}

// The tensors a graph does not read are not in its variant pack (cuDNN refuses extra tensors): the shift
// is read by a Shifted mask only, -inf by any mask but None (apply_mask), the slopes and the first key's
// position by an ALiBi graph only (apply_alibi).
void drop_unused_tensors(const Shape& s, std::vector<int64_t>& uids, std::vector<void*>& ptrs) {
  for (size_t i = uids.size(); i-- > 0;) {
    const bool unused = (uids[i] == kDiagonalShift && s.mask != Mask::Shifted) ||
                        (uids[i] == kNegInf && s.mask == Mask::None) ||
                        ((uids[i] == kAlibiSlopes || uids[i] == kFirstKey) && !s.alibi);
    if (unused) uids.erase(uids.begin() + long(i)), ptrs.erase(ptrs.begin() + long(i));
  }
}

// ALiBi's slopes of `heads` heads on `device`, (heads) f32: ops::alibi_slope's bits (transformers'), which
// the graph multiplies by each key's position. Uploaded on the first call of a head count and kept for the
// process's life, as the plans are (a few hundred bytes per head count). Call with g_mutex held.
const float* alibi_slopes_on_device(int device, int64_t heads) {
  static auto& uploaded = *new std::map<std::pair<int, int64_t>, float*>();
  const auto it = uploaded.find({device, heads});
  if (it != uploaded.end()) return it->second;
  std::vector<float> slopes(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) slopes[size_t(h)] = alibi_slope(h, heads);
  float* on_device = nullptr;
  LT_CUDA_CHECK(cudaMalloc(&on_device, slopes.size() * sizeof(float)));
  LT_CUDA_CHECK(cudaMemcpy(on_device, slopes.data(), slopes.size() * sizeof(float), cudaMemcpyHostToDevice));
  uploaded.emplace(std::make_pair(device, heads), on_device);
  return on_device;
}

}  // namespace

bool cudnn_attention_forward(const Context& ctx, const AttentionParams& p, Tensor out, Tensor lse, Tensor q,
                             Tensor k, Tensor v, std::string* why) {
  LT_CHECK(cudnn_attention_status(ctx).available, "cuDNN attention: unavailable: {}",
           cudnn_attention_status(ctx).reason);
  const Shape s(p);
  std::lock_guard<std::mutex> lock(g_mutex);
  CudnnState& state = state_of(ctx);
  const cudnnHandle_t handle = handle_of(state);
  Plan* plan = find_plan(state, s, false, ctx.device, ctx.kernels.cudnn_autotune, why);
  if (!plan) return false;
  const cudaStream_t stream = stream_of(ctx);
  Scratch scratch({size_t(plan->tuned ? plan->chosen().workspace : plan->max_workspace())}, stream);
  float scale = float(p.scale), neg_inf = -INFINITY;
  int32_t shift = int32_t(s.Se - s.Tq), first_key = 0;
  void* slopes = s.alibi ? const_cast<float*>(alibi_slopes_on_device(ctx.device, s.H)) : nullptr;
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale, kNegInf, kDiagonalShift, kAlibiSlopes, kFirstKey};
  std::vector<void*> ptrs{q.data, k.data,   v.data, out.data, lse.data,
                          &scale, &neg_inf, &shift, slopes,   &first_key};
  drop_unused_tensors(s, uids, ptrs);
  autotune(*plan, stream, ctx.kernels.cudnn_autotune_log,
           [&](const Candidate& c) { execute(handle, c, uids, ptrs, scratch.at(0), stream); });
  execute(handle, plan->chosen(), uids, ptrs, scratch.at(0), stream);
  return true;
}

bool cudnn_attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv,
                              Tensor dout, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                              std::string* why) {
  LT_CHECK(cudnn_attention_status(ctx).available, "cuDNN attention: unavailable: {}",
           cudnn_attention_status(ctx).reason);
  const Shape s(p);
  // The calls this backward runs, each with the first key row it starts at. A chunk's backward (Shifted)
  // is split in two calls in the fast mask forms (see Mask): the keys before the chunk, unmasked, and the
  // chunk's own keys, causal from the top-left. Both take the whole softmax's stats (lse) and sum(dO * O),
  // so each computes its keys' part of P and dS exactly. cuDNN's f32 dQ accumulator carries no sum from
  // one execution to the next, and what it holds afterwards is not dQ in the declared layout (measured:
  // adding two calls' accumulators gave wrong dQ), so the first call writes its dQ (bf16) to a temporary,
  // the second to dq, and dq += the temporary.
  struct Part {
    Shape shape;
    int64_t first_key;
    void* dq;  // where its dQ goes
    Plan* plan = nullptr;
  };
  std::vector<Part> parts;
  if (s.mask == Mask::Shifted && s.Tq > 1 && split_backward_enabled(ctx)) {
    const int64_t earlier = s.Se - s.Tq;
    parts = {{s.keys(earlier, Mask::None), 0, nullptr}, {s.keys(s.Tq, Mask::TopLeft), earlier, dq.data}};
  } else {
    parts = {{s, 0, dq.data}};
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  CudnnState& state = state_of(ctx);
  const cudnnHandle_t handle = handle_of(state);
  size_t workspace = 0;
  for (Part& part : parts) {
    part.plan = find_plan(state, part.shape, true, ctx.device, ctx.kernels.cudnn_autotune, why);
    if (!part.plan) return false;
    workspace = std::max(
        workspace, size_t(part.plan->tuned ? part.plan->chosen().workspace : part.plan->max_workspace()));
  }
  const cudaStream_t stream = stream_of(ctx);
  // workspace | row sums (B, H, Tq) f32 | dQ accumulator (B, H, Tq, HD) f32 | dK, dV (B, Se, KVH, HD) bf16
  // | the first call's dQ (B, Tq, H, HD) bf16 (split only)
  const std::array<size_t, 4> buffers = backward_buffers(s);
  Scratch scratch({workspace, buffers[0], buffers[1], buffers[2], buffers[3],
                   parts.size() > 1 ? size_t(dq.numel()) * 2 : 0},
                  stream);
  float scale = float(p.scale), neg_inf = -INFINITY, one = 1.0f;
  int32_t shift = int32_t(s.Se - s.Tq);
  void* slopes = s.alibi ? const_cast<float*>(alibi_slopes_on_device(ctx.device, s.H)) : nullptr;
  const size_t key_row_bytes = size_t(s.KVH * s.HD) * 2;  // one key row of one batch row, bf16
  auto execute_part = [&](const Part& part, const Candidate& c) {
    const size_t at = size_t(part.first_key) * key_row_bytes;
    // ALiBi's key positions are absolute: the chunk's own keys (the split's second call) start at
    // first_key, not at 0.
    int32_t first_key = int32_t(part.first_key);
    std::vector<int64_t> uids{kQ,   kK,      kV,       kO,           kDO,      kStats,
                              kDQ,  kDK,     kDV,      kScale,       kNegInf,  kDiagonalShift,
                              kOne, kRowSum, kDQAccum, kAlibiSlopes, kFirstKey};
    std::vector<void*> ptrs{q.data,
                            static_cast<char*>(k.data) + at,
                            static_cast<char*>(v.data) + at,
                            out.data,
                            dout.data,
                            lse.data,
                            part.dq ? part.dq : scratch.at(5),
                            static_cast<char*>(scratch.at(3)) + at,
                            static_cast<char*>(scratch.at(4)) + at,
                            &scale,
                            &neg_inf,
                            &shift,
                            &one,
                            scratch.at(1),
                            scratch.at(2),
                            slopes,
                            &first_key};
    drop_unused_tensors(part.shape, uids, ptrs);
    execute(handle, c, uids, ptrs, scratch.at(0), stream);
  };
  // cuDNN adds dQ into its f32 accumulator: zero it before every execution (the pool's memory is reused). A
  // shape's first call times its candidates (autotune); the real calls follow.
  auto run = [&](const Part& part, const Candidate& c) {
    LT_CUDA_CHECK(cudaMemsetAsync(scratch.at(2), 0, buffers[1], stream));
    execute_part(part, c);
  };
  for (const Part& part : parts)
    autotune(*part.plan, stream, ctx.kernels.cudnn_autotune_log, [&](const Candidate& c) { run(part, c); });
  for (const Part& part : parts) run(part, part.plan->chosen());
  if (parts.size() > 1) launch_add_inplace(DType::BF16, dq.data, scratch.at(5), dq.numel(), stream);
  // dk, dv += the temporaries: rows [0, Se) of each batch row (contiguous within a batch row).
  const size_t row_elems = size_t(s.Se * s.KVH * s.HD), stride = size_t(s.S * s.KVH * s.HD);
  for (int64_t b = 0; b < s.B; ++b) {
    const size_t at = size_t(b) * stride * 2, tmp_at = size_t(b) * row_elems * 2;
    launch_add_inplace(DType::BF16, static_cast<char*>(dk.data) + at,
                       static_cast<char*>(scratch.at(3)) + tmp_at, int64_t(row_elems), stream);
    launch_add_inplace(DType::BF16, static_cast<char*>(dv.data) + at,
                       static_cast<char*>(scratch.at(4)) + tmp_at, int64_t(row_elems), stream);
  }
  return true;
}

std::string cudnn_attention_probe(const Context& ctx, const AttentionParams& p, bool backward) {
  std::string log;
  const CudnnAttentionStatus& st = cudnn_attention_status(ctx);
  log += cudnn_attention_status_line(ctx) + "\n";
  if (!st.available) return log;
  const AttentionCallShape call{DType::BF16, p, false, true, false};
  if (const char* reason = cudnn_attention_ineligible_reason(call))
    log += fmt::format("note: attention_host would not send this call to cuDNN: {}\n", reason);
  std::lock_guard<std::mutex> lock(g_mutex);
  t_trace = &log;
  try {
    const cudnnHandle_t handle = handle_of(state_of(ctx));
    trace(fmt::format("device {}, handle ready", ctx.device));
    build_plan(Shape(p), backward, handle, true, ctx.kernels.cudnn_autotune);
    trace("probe: a plan was built");
  } catch (const std::exception& e) {
    trace(fmt::format("probe stopped: {}", e.what()));
  }
  t_trace = nullptr;
  return log;
}

bool attention_deterministic(const Context& ctx) {
  return ctx.kernels.deterministic;
}

}  // namespace lt::ops::cuda
