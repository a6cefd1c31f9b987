// Causal attention (ops.h): checks shapes, dtypes and params once for every backend, then dispatches on the
// tensors' device. dq is written; dk and dv accumulate.
#include <climits>
#include <cmath>

#include "ops/cpu/cpu_attention.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {
namespace {

void check_params(const AttentionParams& p, const char* op) {
  LT_CHECK(p.batch >= 0 && p.q_len >= 0 && p.kv_len >= 0,
           "{}: batch = {}, q_len = {}, kv_len = {}; expected >= 0", op, p.batch, p.q_len, p.kv_len);
  LT_CHECK(p.heads >= 1 && p.kv_heads >= 1 && p.head_dim >= 1,
           "{}: heads = {}, kv_heads = {}, head_dim = {}; expected each >= 1", op, p.heads, p.kv_heads,
           p.head_dim);
  LT_CHECK(p.heads % p.kv_heads == 0,
           "{}: heads = {} is not a multiple of kv_heads = {}; GQA needs kv_heads to divide heads", op,
           p.heads, p.kv_heads);
  LT_CHECK(p.q_offset >= 0, "{}: q_offset = {}; expected >= 0", op, p.q_offset);
  LT_CHECK(p.window >= 0, "{}: window = {}; expected >= 0 (0 = no sliding window)", op, p.window);
  LT_CHECK(
      p.kv_len >= p.q_offset + p.q_len,
      "{}: kv_len = {} is shorter than q_offset + q_len = {} + {} = {}; the keys must reach the last query",
      op, p.kv_len, p.q_offset, p.q_len, p.q_offset + p.q_len);
  LT_CHECK(std::isfinite(p.scale), "{}: scale = {}; expected a finite number (usually 1/sqrt(head_dim))", op,
           p.scale);
  LT_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.0,
           "{}: softcap = {}; expected a finite number >= 0 (0 = no soft-capping)", op, p.softcap);
  // BLAS takes int sizes and strides.
  LT_CHECK(p.kv_len <= INT_MAX && p.heads * p.head_dim <= INT_MAX,
           "{}: kv_len = {} or heads * head_dim = {} exceeds the int range of BLAS", op, p.kv_len,
           p.heads * p.head_dim);
}

void check_segments(const AttentionParams& p, const Tensor& q_segments, const Tensor& k_segments,
                    const char* op) {
  // A tensor without elements may have no data pointer: with q_len == 0 or batch == 0 nothing is checked.
  const bool has_queries = p.batch * p.q_len > 0;
  LT_CHECK(q_segments.empty() == k_segments.empty() || !has_queries,
           "{}: q_segments is {} but k_segments is {}; give both (packed sequences) or neither", op,
           q_segments.empty() ? "empty" : "given", k_segments.empty() ? "empty" : "given");
  if (k_segments.empty() || !has_queries) return;
  check_shape(q_segments, {p.batch, p.q_len}, fmt::format("{} q_segments (B, Tq)", op));
  check_shape(k_segments, {p.batch, p.kv_len}, fmt::format("{} k_segments (B, S)", op));
  check_dtype(q_segments, DType::I32, fmt::format("{} q_segments", op));
  check_dtype(k_segments, DType::I32, fmt::format("{} k_segments", op));
}

// Shapes and dtypes of the tensors both directions share.
void check_inputs(const AttentionParams& p, const Tensor& out, const Tensor& lse, const Tensor& q,
                  const Tensor& k, const Tensor& v, const char* op) {
  const int64_t B = p.batch, Tq = p.q_len, S = p.kv_len, H = p.heads, KVH = p.kv_heads, HD = p.head_dim;
  check_shape(q, {B, Tq, H, HD}, fmt::format("{} q (B, Tq, H, HD)", op));
  check_shape(k, {B, S, KVH, HD}, fmt::format("{} k (B, S, KVH, HD)", op));
  check_shape(v, {B, S, KVH, HD}, fmt::format("{} v (B, S, KVH, HD)", op));
  check_shape(out, {B, Tq, H, HD}, fmt::format("{} out (B, Tq, H, HD)", op));
  check_shape(lse, {B, H, Tq}, fmt::format("{} lse (B, H, Tq)", op));
  LT_CHECK(is_floating(q.dtype), "{}: q has dtype {}; expected a floating dtype", op, dtype_name(q.dtype));
  check_same_dtype(k, q, fmt::format("{} k vs q", op));
  check_same_dtype(v, q, fmt::format("{} v vs q", op));
  check_same_dtype(out, q, fmt::format("{} out vs q", op));
  if (q.device == Device::CPU)
    check_same_dtype(lse, q, fmt::format("{} lse vs q (CPU keeps lse in the compute dtype)", op));
}

}  // namespace

void attention_forward(const Context& ctx, const AttentionParams& p, Tensor out, Tensor lse, Tensor q,
                       Tensor k, Tensor v, Tensor q_segments, Tensor k_segments) {
  const char* op = "attention_forward";
  check_params(p, op);
  check_inputs(p, out, lse, q, k, v, op);
  check_segments(p, q_segments, k_segments, op);
  check_device(q.device, {&out, &lse, &q, &k, &v, &q_segments, &k_segments}, op);
  LT_OP_DISPATCH(ctx, q.device, attention_forward, p, out, lse, q, k, v, q_segments, k_segments);
}

void attention_backward(const Context& ctx, const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv,
                        Tensor dout, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor q_segments,
                        Tensor k_segments) {
  const char* op = "attention_backward";
  check_params(p, op);
  check_inputs(p, out, lse, q, k, v, op);
  check_segments(p, q_segments, k_segments, op);
  const int64_t B = p.batch, Tq = p.q_len, S = p.kv_len, H = p.heads, KVH = p.kv_heads, HD = p.head_dim;
  check_shape(dq, {B, Tq, H, HD}, fmt::format("{} dq (B, Tq, H, HD)", op));
  check_shape(dk, {B, S, KVH, HD}, fmt::format("{} dk (B, S, KVH, HD)", op));
  check_shape(dv, {B, S, KVH, HD}, fmt::format("{} dv (B, S, KVH, HD)", op));
  check_shape(dout, {B, Tq, H, HD}, fmt::format("{} dout (B, Tq, H, HD)", op));
  check_same_dtype(dq, q, fmt::format("{} dq vs q", op));
  check_same_dtype(dk, q, fmt::format("{} dk vs q", op));
  check_same_dtype(dv, q, fmt::format("{} dv vs q", op));
  check_same_dtype(dout, q, fmt::format("{} dout vs q", op));
  check_device(q.device, {&dq, &dk, &dv, &dout, &out, &lse, &q, &k, &v, &q_segments, &k_segments}, op);
  LT_OP_DISPATCH(ctx, q.device, attention_backward, p, dq, dk, dv, dout, out, lse, q, k, v, q_segments,
                 k_segments);
}

}  // namespace lt::ops
