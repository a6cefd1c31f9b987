// LoRA inside a decoder layer: one call after each projection's forward (and its backward), a no-op for a
// projection without adapter. Used by layer_forward / layer_backward only.
#pragma once

#include <cstdint>

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

}  // namespace lt::model
