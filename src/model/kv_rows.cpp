#include "model/kv_rows.h"

#include "ops/ops.h"

namespace lt::model {
namespace {

// Rows [q_offset, q_offset + C) of row b of the range: a dense (C, KVH, HD) view.
Tensor range_rows(Tensor range, int64_t b, int64_t q_offset, int64_t C) {
  Tensor row = range.slice_rows(b, b + 1).reshaped({range.dim(1), range.dim(2), range.dim(3)});
  return row.slice_rows(q_offset, q_offset + C);
}

// True when chunk and range are the same memory; then they must be the same positions.
bool same_buffer(Tensor chunk, Tensor range, int64_t q_offset) {
  if (chunk.data != range.data) return false;
  LT_CHECK(q_offset == 0 && chunk.dim(1) == range.dim(1),
           "K/V chunk aliases its range but covers [{}, {}) of {} positions", q_offset,
           q_offset + chunk.dim(1), range.dim(1));
  return true;
}

void check_chunk(Tensor chunk, Tensor range, int64_t q_offset) {
  check_shape(range, {chunk.dim(0), -1, chunk.dim(2), chunk.dim(3)}, "K/V range");
  LT_CHECK(chunk.ndim == 4 && q_offset >= 0 && q_offset + chunk.dim(1) <= range.dim(1),
           "K/V chunk {} at offset {} does not fit the range {}", chunk.shape_string(), q_offset,
           range.shape_string());
}

}  // namespace

void append_chunk_rows(const ops::Context& ctx, Tensor range, Tensor chunk, int64_t q_offset) {
  check_chunk(chunk, range, q_offset);
  if (same_buffer(chunk, range, q_offset)) return;
  const int64_t B = chunk.dim(0), C = chunk.dim(1);
  for (int64_t b = 0; b < B; ++b)
    ops::cast(ctx, range_rows(range, b, q_offset, C),
              chunk.slice_rows(b, b + 1).reshaped({C, chunk.dim(2), chunk.dim(3)}));
}

void take_chunk_rows(const ops::Context& ctx, Tensor chunk, Tensor range, int64_t q_offset) {
  check_chunk(chunk, range, q_offset);
  if (same_buffer(chunk, range, q_offset)) return;
  const int64_t B = chunk.dim(0), C = chunk.dim(1);
  for (int64_t b = 0; b < B; ++b)
    ops::cast(ctx, chunk.slice_rows(b, b + 1).reshaped({C, chunk.dim(2), chunk.dim(3)}),
              range_rows(range, b, q_offset, C));
}

}  // namespace lt::model
