// LoRA on one projection of a layer, forward and backward, as three small GEMMs through the linear op (its
// out_scale carries the scaling, accumulate_y / accumulate_dx add into the projection's output and input
// gradient). Dropout masks are not stored: backward redraws them from the Philox stream (model/lora.h), so
// the adapter keeps only t = dropout(x) A^T, (N, r), between forward and backward.
#include "model/lora_layer.h"

#include <span>
#include <vector>

#include "ops/copy_block.h"
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

// x (N, in) *= mask in place (ops::dropout_apply, on the tensor's device); row b of the batch draws from its
// lora_dropout_stream, token i at position q_offset + i. The 1 / (1 - p) of the kept values is not applied
// here: each GEMM that reads or writes the masked values carries it in its scale (keep_scale), so the
// masked values are stored exactly (a bf16 product x / (1 - p) would be rounded once more than the rest).
void dropout_in_place(const ops::Context& ctx, Tensor x, const LoraDropout& d, int64_t layer, LoraModule m,
                      const ChunkInfo& chunk) {
  LT_CHECK(d.p > 0 && d.p < 1, "LoRA dropout {} outside [0, 1)", d.p);
  std::vector<uint64_t> streams(size_t(chunk.batch));  // (B)
  for (int64_t b = 0; b < chunk.batch; ++b) streams[size_t(b)] = lora_dropout_stream(d, layer, m, b);
  ops::dropout_apply(ctx,
                     {.batch = chunk.batch,
                      .tokens = chunk.tokens,
                      .dim = x.dim(1),
                      .q_offset = chunk.q_offset,
                      .p = d.p,
                      .seed = d.seed,
                      .scale_kept = false},
                     x, streams);
}

// The factor of dropout's kept values: 1 without dropout.
double keep_scale(const LoraDropout& d) {
  return d.p > 0 ? 1.0 / (1.0 - d.p) : 1.0;
}

const LoraAdapter* adapter_of(const LoraPass& lora, LoraModule m) {
  if (!lora.weights) return nullptr;
  const LoraAdapter& a = (*lora.weights)[m];
  return a.present() ? &a : nullptr;
}

}  // namespace

namespace {
// y (N, out) = [residual +] or += scaling * t B^T.
void lora_output(const ops::Context& ctx, const LoraAdapter& ad, int64_t N, Tensor t, Tensor y, LoraInto into,
                 Tensor residual) {
  ops::linear_forward(ctx,
                      {.rows = N,
                       .in = ad.rank,
                       .out = ad.b.dim(0),
                       .out_scale = ad.scaling,
                       .accumulate_y = into == LoraInto::Add},
                      y, t, ad.b, Tensor(), into == LoraInto::Write ? residual : Tensor());
}
}  // namespace

bool lora_forward(const ops::Context& ctx, const LoraPass& lora, int64_t layer, LoraModule m,
                  const ChunkInfo& chunk, Tensor x, Tensor t, Tensor y, LoraInto into, Tensor residual) {
  const LoraAdapter* ad = adapter_of(lora, m);
  if (!ad) return false;
  const int64_t N = chunk.batch * chunk.tokens, in = ad->a.dim(1), out = ad->b.dim(0), r = ad->rank;
  check_shape(t, {N, r}, "LoRA activation x A^T");
  Tensor input = x;  // (N, in)
  if (lora.dropout.p > 0) {
    input = scratch_view(lora.scratch_in, N, in, "dropout input");
    ops::cast(ctx, input, x);
    dropout_in_place(ctx, input, lora.dropout, layer, m, chunk);
  }
  ops::linear_forward(ctx, {.rows = N, .in = in, .out = r, .out_scale = keep_scale(lora.dropout)}, t, input,
                      ad->a, Tensor());
  if (y.empty()) return false;
  check_shape(y, {N, out}, "LoRA output");
  lora_output(ctx, *ad, N, t, y, into, residual);
  return true;
}

namespace {

// From dt (N, r), the gradient of t = dropout(x) A^T = keep * (mask x) A^T: dA += keep * dt^T (mask x) (da
// empty: frozen) and dx gets mask (keep * dt A) as `into` says. The dropout mask is module m's.
void input_side_backward(const ops::Context& ctx, const LoraPass& lora, int64_t layer, LoraModule m,
                         const ChunkInfo& chunk, const LoraAdapter& ad, Tensor da, Tensor x, Tensor dt,
                         Tensor dx, LoraInto into) {
  const int64_t N = chunk.batch * chunk.tokens, in = ad.a.dim(1), r = ad.rank;
  if (lora.dropout.p <= 0) {
    ops::linear_backward(ctx, {.rows = N, .in = in, .out = r, .accumulate_dx = into == LoraInto::Add}, dx, da,
                         Tensor(), dt, x, ad.a);
    return;
  }
  // The masked input for dA, then the same scratch for the masked input's gradient.
  Tensor scratch = scratch_view(lora.scratch_in, N, in, "dropout input");  // (N, in)
  if (!da.empty()) {
    ops::cast(ctx, scratch, x);
    dropout_in_place(ctx, scratch, lora.dropout, layer, m, chunk);
    ops::linear_backward(ctx, {.rows = N, .in = in, .out = r, .out_scale = keep_scale(lora.dropout)},
                         Tensor(), da, Tensor(), dt, scratch, ad.a);
  }
  ops::linear_backward(ctx, {.rows = N, .in = in, .out = r, .out_scale = keep_scale(lora.dropout)}, scratch,
                       Tensor(), Tensor(), dt, Tensor(), ad.a);
  dropout_in_place(ctx, scratch, lora.dropout, layer, m, chunk);
  if (into == LoraInto::Add)
    ops::add_inplace(ctx, dx, scratch);
  else
    ops::cast(ctx, dx, scratch);
}

// The gradient tensors of module m's adapter (empty when there are none or they are frozen).
LoraAdapter grads_of(const LoraPass& lora, int64_t layer, LoraModule m, const LoraAdapter& ad) {
  if (!lora.grads) return {};
  const LoraAdapter& g = (*lora.grads)[m];
  LT_CHECK(g.rank == ad.rank || !g.present(), "LoRA gradients of layer {} {}: rank {}, the adapter's is {}",
           layer, lora_module_name(m), g.rank, ad.rank);
  return g;
}

}  // namespace

bool lora_backward(const ops::Context& ctx, const LoraPass& lora, int64_t layer, LoraModule m,
                   const ChunkInfo& chunk, Tensor x, Tensor t, Tensor dy, Tensor dx, LoraInto into) {
  const LoraAdapter* ad = adapter_of(lora, m);
  if (!ad) return false;
  const int64_t N = chunk.batch * chunk.tokens, out = ad->b.dim(0), r = ad->rank;
  const LoraAdapter g = grads_of(lora, layer, m, *ad);
  Tensor dt = scratch_view(lora.scratch_r, N, r, "gradient of x A^T");  // (N, r)
  ops::linear_backward(ctx, {.rows = N, .in = r, .out = out, .out_scale = ad->scaling}, dt, g.b, Tensor(), dy,
                       t, ad->b);
  input_side_backward(ctx, lora, layer, m, chunk, *ad, g.a, x, dt, dx, into);
  return true;
}

namespace {

// `tensors` viewed as one (sum of their rows, cols) matrix when each starts where the one before ends (one
// dtype and column count); empty otherwise.
Tensor stacked_rows(std::span<const Tensor> tensors) {
  if (tensors.empty() || tensors[0].empty() || tensors[0].ndim != 2) return Tensor();
  const Tensor& first = tensors[0];
  int64_t rows = 0;
  for (const Tensor& t : tensors) {
    if (t.empty() || t.ndim != 2 || t.dtype != first.dtype || t.dim(1) != first.dim(1) ||
        t.device != first.device)
      return Tensor();
    if (static_cast<const char*>(t.data) !=
        static_cast<const char*>(first.data) + first.bytes() / size_t(first.dim(0)) * size_t(rows))
      return Tensor();
    rows += t.dim(0);
  }
  Tensor out = first;
  out.shape[0] = rows;
  return out;
}

// The adapters of `modules` stacked: A's as one (R, in) matrix (and their gradients, for backward), when all
// are present without dropout and laid out back to back (allocate_lora puts a layer's A's together).
struct Stacked {
  std::vector<const LoraAdapter*> adapters;
  Tensor a;   // (R, in)
  Tensor da;  // (R, in) or empty (backward without gradients)
  int64_t rank_sum = 0;
};

std::optional<Stacked> stacked(const LoraPass& lora, std::span<const LoraModule> modules, bool backward) {
  if (modules.size() < 2 || lora.dropout.p > 0) return std::nullopt;
  Stacked s;
  std::vector<Tensor> as, das;
  for (LoraModule m : modules) {
    const LoraAdapter* ad = adapter_of(lora, m);
    if (!ad) return std::nullopt;
    s.adapters.push_back(ad);
    as.push_back(ad->a);
    s.rank_sum += ad->rank;
    if (backward && lora.grads) das.push_back((*lora.grads)[m].a);
  }
  s.a = stacked_rows(as);
  if (s.a.empty()) return std::nullopt;
  if (backward && lora.grads) {
    s.da = stacked_rows(das);
    if (s.da.empty()) return std::nullopt;
  }
  return s;
}

// The one adapter of a fused module whose parts are `modules` (lora.h: held at the first part), or nullptr.
const LoraAdapter* fused_adapter(const LoraPass& lora, std::span<const LoraModule> modules) {
  const LoraAdapter* ad = modules.empty() ? nullptr : adapter_of(lora, modules[0]);
  if (!ad || ad->parts == 1) return nullptr;
  LT_CHECK(size_t(ad->parts) == modules.size(),
           "LoRA: the fused adapter at {} covers {} projections, {} were given", lora_module_name(modules[0]),
           ad->parts, modules.size());
  return ad;
}

// Part i's rows of a fused adapter's B (or of its gradient `b`): (part_out[i], r).
Tensor part_rows(const LoraAdapter& ad, const Tensor& b, size_t i) {
  int64_t begin = 0;
  for (size_t j = 0; j < i; ++j) begin += ad.part_out[j];
  return b.slice_rows(begin, begin + ad.part_out[i]);
}

// A fused module's forward: t = dropout(x) A^T once (into ts[0], the first part's), then each part's output
// y_i = scaling t B_i^T, B_i its rows of B.
std::vector<bool> fused_forward(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                                std::span<const LoraModule> modules, const LoraAdapter& ad,
                                const ChunkInfo& chunk, Tensor x, std::span<const Tensor> ts,
                                std::span<const Tensor> ys, LoraInto into) {
  const int64_t N = chunk.batch * chunk.tokens;
  lora_forward(ctx, lora, layer, modules[0], chunk, x, ts[0], Tensor());
  std::vector<bool> wrote(modules.size(), false);
  for (size_t i = 0; i < modules.size(); ++i) {
    if (ys[i].empty()) continue;
    LoraAdapter part = ad;
    part.b = part_rows(ad, ad.b, i);
    check_shape(ys[i], {N, part.b.dim(0)}, "LoRA output of a fused module's part");
    lora_output(ctx, part, N, ts[0], ys[i], into, Tensor());
    wrote[i] = true;
  }
  return wrote;
}

// Its backward: dt = sum_i scaling dy_i B_i (the shared A's input gradient sums the parts', as one
// nn.Linear's does), dB_i += scaling dy_i^T t, then dA and dx from dt once.
void fused_backward(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                    std::span<const LoraModule> modules, const LoraAdapter& ad, const ChunkInfo& chunk,
                    Tensor x, Tensor t, std::span<const Tensor> dys, Tensor dx, LoraInto into) {
  const int64_t N = chunk.batch * chunk.tokens, r = ad.rank;
  const LoraAdapter g = grads_of(lora, layer, modules[0], ad);
  Tensor dt = scratch_view(lora.scratch_r, N, r, "gradient of x A^T");  // (N, r)
  for (size_t i = 0; i < modules.size(); ++i)
    ops::linear_backward(
        ctx, {.rows = N, .in = r, .out = ad.part_out[i], .out_scale = ad.scaling, .accumulate_dx = i > 0}, dt,
        g.b.empty() ? Tensor() : part_rows(ad, g.b, i), Tensor(), dys[i], t, part_rows(ad, ad.b, i));
  input_side_backward(ctx, lora, layer, modules[0], chunk, ad, g.a, x, dt, dx, into);
}

}  // namespace

bool lora_stacks(const LoraPass& lora, std::span<const LoraModule> modules, bool backward) {
  return stacked(lora, modules, backward).has_value();
}

std::vector<bool> lora_forward_shared(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                                      std::span<const LoraModule> modules, const ChunkInfo& chunk, Tensor x,
                                      std::span<const Tensor> ts, std::span<const Tensor> ys, LoraInto into) {
  LT_CHECK(ts.size() == modules.size() && ys.size() == modules.size(),
           "lora_forward_shared: {} modules, {} t and {} outputs", modules.size(), ts.size(), ys.size());
  if (const LoraAdapter* fused = fused_adapter(lora, modules))
    return fused_forward(ctx, lora, layer, modules, *fused, chunk, x, ts, ys, into);
  std::vector<bool> wrote(modules.size(), false);
  const std::optional<Stacked> s = stacked(lora, modules, false);
  if (!s) {
    for (size_t i = 0; i < modules.size(); ++i)
      wrote[i] = lora_forward(ctx, lora, layer, modules[i], chunk, x, ts[i], ys[i], into);
    return wrote;
  }
  const int64_t N = chunk.batch * chunk.tokens, in = s->a.dim(1);
  Tensor t_all = scratch_view(lora.scratch_in, N, s->rank_sum, "stacked x A^T");  // (N, R)
  ops::linear_forward(ctx, {.rows = N, .in = in, .out = s->rank_sum}, t_all, x, s->a, Tensor());
  int64_t col = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const LoraAdapter& ad = *s->adapters[i];
    check_shape(ts[i], {N, ad.rank}, "LoRA activation x A^T");
    ops::copy_block(ctx, ts[i], 0, t_all, col, ad.rank);
    col += ad.rank;
    if (ys[i].empty()) continue;
    check_shape(ys[i], {N, ad.b.dim(0)}, "LoRA output");
    lora_output(ctx, ad, N, ts[i], ys[i], into, Tensor());
    wrote[i] = true;
  }
  return wrote;
}

bool lora_backward_shared(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                          std::span<const LoraModule> modules, const ChunkInfo& chunk, Tensor x,
                          std::span<const Tensor> ts, std::span<const Tensor> dys, Tensor dx, LoraInto into) {
  LT_CHECK(ts.size() == modules.size() && dys.size() == modules.size(),
           "lora_backward_shared: {} modules, {} t and {} output gradients", modules.size(), ts.size(),
           dys.size());
  if (const LoraAdapter* fused = fused_adapter(lora, modules)) {
    fused_backward(ctx, lora, layer, modules, *fused, chunk, x, ts[0], dys, dx, into);
    return true;
  }
  const std::optional<Stacked> s = stacked(lora, modules, true);
  if (!s) {
    bool wrote = false;  // Write: the first adapter writes dx, the others add into it
    for (size_t i = 0; i < modules.size(); ++i)
      wrote |= lora_backward(ctx, lora, layer, modules[i], chunk, x, ts[i], dys[i], dx,
                             wrote ? LoraInto::Add : into);
    return wrote;
  }
  const int64_t N = chunk.batch * chunk.tokens, in = s->a.dim(1);
  Tensor dt_all = scratch_view(lora.scratch_in, N, s->rank_sum, "stacked gradient of x A^T");  // (N, R)
  int64_t col = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const LoraAdapter& ad = *s->adapters[i];
    Tensor db = lora.grads ? (*lora.grads)[modules[i]].b : Tensor();
    Tensor dt = scratch_view(lora.scratch_r, N, ad.rank, "gradient of x A^T");  // (N, r)
    ops::linear_backward(ctx, {.rows = N, .in = ad.rank, .out = ad.b.dim(0), .out_scale = ad.scaling}, dt, db,
                         Tensor(), dys[i], ts[i], ad.b);
    ops::copy_block(ctx, dt_all, col, dt, 0, ad.rank);
    col += ad.rank;
  }
  ops::linear_backward(ctx, {.rows = N, .in = in, .out = s->rank_sum, .accumulate_dx = into == LoraInto::Add},
                       dx, s->da, Tensor(), dt_all, x, s->a);
  return true;
}

}  // namespace lt::model
