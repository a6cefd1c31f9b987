// The CPU reference of causal attention (ops/cpu/attention.cpp), float and double. The caller
// (ops/attention.cpp) has already checked shapes, dtypes and params; these check the segment ids' values.
#pragma once

#include "core/tensor.h"
#include "ops/ops.h"

namespace lt::ops::cpu {

void attention_forward(const AttentionParams& p, Tensor out /*(B, Tq, H, HD)*/, Tensor lse /*(B, H, Tq)*/,
                       Tensor q /*(B, Tq, H, HD)*/, Tensor k /*(B, S, KVH, HD)*/,
                       Tensor v /*(B, S, KVH, HD)*/, Tensor q_segments /*(B, Tq) i32 or empty*/,
                       Tensor k_segments /*(B, S) i32 or empty*/);

void attention_backward(const AttentionParams& p, Tensor dq /*(B, Tq, H, HD) =*/,
                        Tensor dk /*(B, S, KVH, HD) +=*/, Tensor dv /*(B, S, KVH, HD) +=*/,
                        Tensor dout /*(B, Tq, H, HD)*/, Tensor out /*(B, Tq, H, HD)*/,
                        Tensor lse /*(B, H, Tq)*/, Tensor q, Tensor k, Tensor v, Tensor q_segments,
                        Tensor k_segments);

}  // namespace lt::ops::cpu
