// LoRA on one projection of a layer, forward and backward, as three small GEMMs through the linear op (its
// out_scale carries the scaling, accumulate_y / accumulate_dx add into the projection's output and input
// gradient). Dropout masks are not stored: backward redraws them from the Philox stream (model/lora.h), so
// the adapter keeps only t = dropout(x) A^T, (N, r), between forward and backward.
#include "model/lora_layer.h"

#include "ops/ops.h"

namespace lt::model {
namespace {

// The first rows*cols elements of a scratch buffer, as (rows, cols).
Tensor scratch_view(const Tensor& scratch, int64_t rows, int64_t cols, const char* what) {
  LT_CHECK(!scratch.empty() && scratch.numel() >= rows * cols,
           "LoRA: scratch '{}' holds {} elements, {} x {} are needed", what, scratch.numel(), rows, cols);
  Tensor t = scratch;
  t.ndim = 2;
  t.shape = {};
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

// x (N, in) *= mask / (1 - p) in place (ops::dropout_apply, on the tensor's device); row b of the batch
// draws from its lora_dropout_stream, token i at position q_offset + i.
void dropout_in_place(Tensor x, const LoraDropout& d, int64_t layer, LoraModule m, const ChunkInfo& chunk) {
  LT_CHECK(d.p > 0 && d.p < 1, "LoRA dropout {} outside [0, 1)", d.p);
  std::vector<uint64_t> streams(size_t(chunk.batch));  // (B)
  for (int64_t b = 0; b < chunk.batch; ++b) streams[size_t(b)] = lora_dropout_stream(d, layer, m, b);
  ops::dropout_apply({.batch = chunk.batch,
                      .tokens = chunk.tokens,
                      .dim = x.dim(1),
                      .q_offset = chunk.q_offset,
                      .p = d.p,
                      .seed = d.seed},
                     x, streams);
}

const LoraAdapter* adapter_of(const LoraPass& lora, LoraModule m) {
  if (!lora.weights) return nullptr;
  const LoraAdapter& a = (*lora.weights)[m];
  return a.present() ? &a : nullptr;
}

}  // namespace

void lora_forward(const LoraPass& lora, int64_t layer, LoraModule m, const ChunkInfo& chunk, Tensor x,
                  Tensor t, Tensor y) {
  const LoraAdapter* ad = adapter_of(lora, m);
  if (!ad) return;
  const int64_t N = chunk.batch * chunk.tokens, in = ad->a.dim(1), out = ad->b.dim(0), r = ad->rank;
  check_shape(t, {N, r}, "LoRA activation x A^T");
  Tensor input = x;  // (N, in)
  if (lora.dropout.p > 0) {
    input = scratch_view(lora.scratch_in, N, in, "dropout input");
    ops::cast(input, x);
    dropout_in_place(input, lora.dropout, layer, m, chunk);
  }
  ops::linear_forward({.rows = N, .in = in, .out = r}, t, input, ad->a, Tensor());
  if (y.empty()) return;
  ops::linear_forward({.rows = N, .in = r, .out = out, .out_scale = ad->scaling, .accumulate_y = true}, y, t,
                      ad->b, Tensor());
}

void lora_backward(const LoraPass& lora, int64_t layer, LoraModule m, const ChunkInfo& chunk, Tensor x,
                   Tensor t, Tensor dy, Tensor dx) {
  const LoraAdapter* ad = adapter_of(lora, m);
  if (!ad) return;
  const int64_t N = chunk.batch * chunk.tokens, in = ad->a.dim(1), out = ad->b.dim(0), r = ad->rank;
  Tensor da, db;
  if (lora.grads) {
    const LoraAdapter& g = (*lora.grads)[m];
    LT_CHECK(g.rank == r || !g.present(), "LoRA gradients of layer {} {}: rank {}, the adapter's is {}",
             layer, lora_module_name(m), g.rank, r);
    da = g.a;
    db = g.b;
  }
  Tensor dt = scratch_view(lora.scratch_r, N, r, "gradient of x A^T");  // (N, r)
  ops::linear_backward({.rows = N, .in = r, .out = out, .out_scale = ad->scaling}, dt, db, Tensor(), dy, t,
                       ad->b);
  if (lora.dropout.p <= 0) {
    ops::linear_backward({.rows = N, .in = in, .out = r, .accumulate_dx = true}, dx, da, Tensor(), dt, x,
                         ad->a);
    return;
  }
  // The masked input for dA, then the same scratch for the masked input's gradient.
  Tensor scratch = scratch_view(lora.scratch_in, N, in, "dropout input");  // (N, in)
  if (!da.empty()) {
    ops::cast(scratch, x);
    dropout_in_place(scratch, lora.dropout, layer, m, chunk);
    ops::linear_backward({.rows = N, .in = in, .out = r}, Tensor(), da, Tensor(), dt, scratch, ad->a);
  }
  ops::linear_backward({.rows = N, .in = in, .out = r}, scratch, Tensor(), Tensor(), dt, Tensor(), ad->a);
  dropout_in_place(scratch, lora.dropout, layer, m, chunk);
  ops::add_inplace(dx, scratch);
}

}  // namespace lt::model
