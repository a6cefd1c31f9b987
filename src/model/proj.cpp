#include "model/proj.h"

#include <vector>

#include "core/error.h"
#include "model/lora_layer.h"
#include "ops/ops.h"

namespace lt::model {

namespace {

// The dense (out, in) weight to compute with: the tensor itself, or the 4-bit weight dequantized into the
// shared scratch (valid until the next projection's). A shard is refused until its path lands.
Tensor resident(const ops::Context& ctx, const ProjWeight& pw, ProjId id) {
  if (pw.format == WeightFormat::Nf4) return dequantize_to_scratch(ctx, *pw.nf4, *pw.nf4_scratch);
  LT_CHECK(pw.format == WeightFormat::Dense, "projection {}: weight format {} is not supported yet", int(id),
           int(pw.format));
  return pw.weight;
}

ops::LinearParams linear_params(const Tensor& x, const Tensor& w) {
  return {.rows = x.dim(0), .in = w.dim(1), .out = w.dim(0)};
}

// The tensors the layer holds for projection `id` (its matrix is empty when it is held in 4 bits).
ProjWeight held(const LayerWeights& w, ProjId id) {
  switch (id) {
    case ProjId::Q:
      return {.weight = w.attn_q, .bias = w.attn_q_bias};
    case ProjId::K:
      return {.weight = w.attn_k, .bias = w.attn_k_bias};
    case ProjId::V:
      return {.weight = w.attn_v, .bias = w.attn_v_bias};
    case ProjId::O:
      return {.weight = w.attn_o, .bias = w.attn_o_bias};
    case ProjId::Gate:
      return {.weight = w.ffn_gate, .bias = w.ffn_gate_bias};
    case ProjId::Up:
      return {.weight = w.ffn_up, .bias = w.ffn_up_bias};
    case ProjId::Down:
      return {.weight = w.ffn_down, .bias = w.ffn_down_bias};
  }
  LT_FAIL("unknown projection {}", int(id));
}

}  // namespace

ProjWeight proj_weight(const LayerWeights& w, ProjId id) {
  ProjWeight pw = held(w, id);
  if (w.nf4 != nullptr) {
    pw.format = WeightFormat::Nf4;
    pw.nf4 = &w.nf4->proj[id];
    pw.nf4_scratch = w.nf4->scratch;
  }
  return pw;
}

void proj_forward(const ops::Context& ctx, const LayerProjs& p, ProjId id, Tensor x, Tensor y,
                  Tensor residual) {
  const bool adapter_wrote =
      lora_forward(ctx, p.lora, p.layer, id, p.chunk, x, p.lora_t[id], y, LoraInto::Write, residual);
  if (y.empty()) return;
  const ProjWeight pw = proj_weight(p.weights, id);
  const Tensor w = resident(ctx, pw, id);
  ops::LinearParams lp = linear_params(x, w);
  lp.accumulate_y = adapter_wrote;
  ops::linear_forward(ctx, lp, y, x, w, pw.bias, adapter_wrote ? Tensor() : residual);
}

void projs_forward(const ops::Context& ctx, const LayerProjs& p, std::span<const ProjId> ids, Tensor x,
                   std::span<const Tensor> ys) {
  std::vector<Tensor> ts;
  for (ProjId id : ids) ts.push_back(p.lora_t[id]);
  const std::vector<bool> adapter_wrote =
      lora_forward_shared(ctx, p.lora, p.layer, ids, p.chunk, x, ts, ys, LoraInto::Write);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ys[i].empty()) continue;
    const ProjWeight pw = proj_weight(p.weights, ids[i]);
    const Tensor w = resident(ctx, pw, ids[i]);
    ops::LinearParams lp = linear_params(x, w);
    lp.accumulate_y = adapter_wrote[i];
    ops::linear_forward(ctx, lp, ys[i], x, w, pw.bias);
  }
}

void proj_backward(const ops::Context& ctx, const LayerProjs& p, ProjId id, Tensor x, Tensor dy, Tensor dx) {
  LT_CHECK(p.grads != nullptr, "proj_backward: no gradients given");
  const bool adapter_wrote =
      lora_backward(ctx, p.lora, p.layer, id, p.chunk, x, p.lora_t[id], dy, dx, LoraInto::Write);
  const ProjWeight pw = proj_weight(p.weights, id), pg = proj_weight(*p.grads, id);
  const Tensor w = resident(ctx, pw, id);
  ops::LinearParams lp = linear_params(x, w);
  lp.accumulate_dx = adapter_wrote;
  ops::linear_backward(ctx, lp, dx, pg.weight, pg.bias, dy, x, w);
}

void projs_backward(const ops::Context& ctx, const LayerProjs& p, std::span<const ProjId> ids, Tensor x,
                    std::span<const Tensor> dys, Tensor dx) {
  LT_CHECK(p.grads != nullptr, "projs_backward: no gradients given");
  std::vector<Tensor> ts;
  for (ProjId id : ids) ts.push_back(p.lora_t[id]);
  // dx is written by the first that touches it (an adapter, else the first projection), then added to.
  bool dx_written = lora_backward_shared(ctx, p.lora, p.layer, ids, p.chunk, x, ts, dys, dx, LoraInto::Write);
  for (size_t i = 0; i < ids.size(); ++i) {
    const ProjWeight pw = proj_weight(p.weights, ids[i]), pg = proj_weight(*p.grads, ids[i]);
    const Tensor w = resident(ctx, pw, ids[i]);
    ops::LinearParams lp = linear_params(x, w);
    lp.accumulate_dx = dx_written;
    ops::linear_backward(ctx, lp, dx, pg.weight, pg.bias, dys[i], x, w);
    dx_written = true;
  }
}

}  // namespace lt::model
