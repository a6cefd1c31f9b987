// LoRA inside a decoder layer: one call after each projection's forward (and its backward), a no-op for a
// projection without adapter. Used by layer_forward / layer_backward only.
#pragma once

#include <cstdint>
#include <span>

#include "model/decoder.h"
#include "model/lora.h"

namespace lt::model {

// y (N, out) += scaling * t B^T with t = dropout(x) A^T (N, r), which is written into `t` for backward; an
// empty y: t only (a recomputation for backward).
void lora_forward(const LoraPass& lora, int64_t layer, LoraModule m, const ChunkInfo& chunk, Tensor x,
                  Tensor t, Tensor y);

// With dt = scaling * dy B:  dB += scaling * dy^T t,  dA += dt^T dropout(x),  dx += dropout'(dt A).
// x (N, in), t (N, r), dy (N, out), dx (N, in) the projection input's gradient (accumulated).
void lora_backward(const LoraPass& lora, int64_t layer, LoraModule m, const ChunkInfo& chunk, Tensor x,
                   Tensor t, Tensor dy, Tensor dx);

// The adapters of projections that share their input x (q/k/v, gate/up), forward: with no dropout and their
// A's back to back (allocate_lora's layout), x [A_1; A_2; ...]^T is ONE GEMM (x read once), split into each
// t_i (lora.scratch_in holds the stacked (N, sum r)); then each y_i += scaling_i t_i B_i^T. Otherwise one
// lora_forward per module. The same values either way; an empty y_i: t_i only.
void lora_forward_shared(const LoraPass& lora, int64_t layer, std::span<const LoraModule> modules,
                         const ChunkInfo& chunk, Tensor x, std::span<const Tensor> ts, std::span<const Tensor> ys);
// Whether lora_forward_shared (backward: lora_backward_shared) takes the stacked path for these modules.
bool lora_stacks(const LoraPass& lora, std::span<const LoraModule> modules, bool backward);
// Their backward: each dt_i = scaling_i dy_i B_i (and dB_i), gathered into one (N, sum r), then dA (stacked,
// when the gradients are back to back too) and dx += dt [A_1; ...] as ONE GEMM each. Otherwise one
// lora_backward per module, in order.
void lora_backward_shared(const LoraPass& lora, int64_t layer, std::span<const LoraModule> modules,
                          const ChunkInfo& chunk, Tensor x, std::span<const Tensor> ts, std::span<const Tensor> dys,
                          Tensor dx);

}  // namespace lt::model
