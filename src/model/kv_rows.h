// Moving a chunk's rows between a (B, C, KVH, HD) chunk buffer and a (B, S, KVH, HD) K/V range at q_offset.
// When the chunk buffer is the range itself (whole-sequence training, C == S, q_offset 0) nothing moves.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/context.h"

namespace lt::model {

// range[b, q_offset + i] = chunk[b, i] for every row b.
void append_chunk_rows(const ops::Context& ctx, Tensor range /*(B, S, KVH, HD)*/,
                       Tensor chunk /*(B, C, KVH, HD)*/, int64_t q_offset);
// chunk[b, i] = range[b, q_offset + i] for every row b.
void take_chunk_rows(const ops::Context& ctx, Tensor chunk /*(B, C, KVH, HD)*/,
                     Tensor range /*(B, S, KVH, HD)*/, int64_t q_offset);

}  // namespace lt::model
