// LoRA inside a decoder layer: one call after each projection's forward (and its backward), a no-op for a
// projection without adapter. Used by layer_forward / layer_backward only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/decoder.h"
#include "model/lora.h"
#include "ops/context.h"

namespace lt::model {

// How an adapter's product meets its projection's: added into what the projection's GEMM wrote (Add), or
// written first (Write: y = [residual +] scaling t B^T, dx = dt A) for the projection's GEMM to add into,
// which then reads it as its C: the adapter's skinny GEMM writes its output once instead of reading and
// rewriting what the projection wrote (layer_forward.cpp / layer_backward.cpp). The sums are the same; only
// where the one rounding of the bf16 sum happens moves.
enum class LoraInto : uint8_t { Add, Write };

// y (N, out) gets scaling * t B^T (as `into` says; residual: Write's y = residual + ...) with
// t = dropout(x) A^T (N, r), which is written into `t` for backward. An empty y: t only (a recomputation for
// backward). Returns whether y was touched (an adapter exists and y was given).
bool lora_forward(const ops::Context& ctx, const LoraPass& lora, int64_t layer, LoraModule m,
                  const ChunkInfo& chunk, Tensor x, Tensor t, Tensor y, LoraInto into = LoraInto::Add,
                  Tensor residual = Tensor());

// With dt = scaling * dy B:  dB += scaling * dy^T t,  dA += dt^T dropout(x),  dx gets dropout'(dt A) as
// `into` says. x (N, in), t (N, r), dy (N, out), dx (N, in) the projection input's gradient. Returns whether
// dx was touched.
bool lora_backward(const ops::Context& ctx, const LoraPass& lora, int64_t layer, LoraModule m,
                   const ChunkInfo& chunk, Tensor x, Tensor t, Tensor dy, Tensor dx,
                   LoraInto into = LoraInto::Add);

// The adapters of projections that share their input x (q/k/v, gate/up), forward (for a fused module, one
// adapter whose parts these are: t = x A^T once into ts[0], then each part's y_i from its rows of B): with no
// dropout and their A's back to back (allocate_lora's layout), x [A_1; A_2; ...]^T is ONE GEMM (x read once),
// split into each t_i (lora.scratch_in holds the stacked (N, sum r)); then each y_i gets scaling_i t_i B_i^T.
// Otherwise one lora_forward per module. The same values either way; an empty y_i: t_i only. Returns, per
// module, whether its y was touched.
std::vector<bool> lora_forward_shared(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                                      std::span<const LoraModule> modules, const ChunkInfo& chunk, Tensor x,
                                      std::span<const Tensor> ts, std::span<const Tensor> ys,
                                      LoraInto into = LoraInto::Add);
// Whether lora_forward_shared (backward: lora_backward_shared) takes the stacked path for these modules.
bool lora_stacks(const LoraPass& lora, std::span<const LoraModule> modules, bool backward);
// Their backward: each dt_i = scaling_i dy_i B_i (and dB_i), gathered into one (N, sum r), then dA (stacked,
// when the gradients are back to back too) and dx (+)= dt [A_1; ...] as ONE GEMM each. Otherwise one
// lora_backward per module, in order (with Write the first writes dx). Returns whether dx was touched.
bool lora_backward_shared(const ops::Context& ctx, const LoraPass& lora, int64_t layer,
                          std::span<const LoraModule> modules, const ChunkInfo& chunk, Tensor x,
                          std::span<const Tensor> ts, std::span<const Tensor> dys, Tensor dx,
                          LoraInto into = LoraInto::Add);

}  // namespace lt::model
