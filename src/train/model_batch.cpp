#include "train/model_batch.h"

#include <algorithm>

namespace lt::train {

model::Batch ModelBatch::view() {
  return {.input_ids = Tensor(input_ids.data(), DType::I32, {B, T}),
          .positions = Tensor(positions.data(), DType::I32, {B, T}),
          .segments = segments.empty() ? Tensor() : Tensor(segments.data(), DType::I32, {B, T}),
          .labels = Tensor(labels.data(), DType::I32, {B, T})};
}

ModelBatch to_model_batch(const data::Batch& batch) {
  ModelBatch out;
  out.B = batch.B;
  out.T = batch.T;
  out.input_ids = batch.input_ids;
  out.positions = batch.positions;
  out.labels = batch.labels;
  out.tokens = batch.tokens;
  const bool packed =
      std::any_of(batch.segment_ids.begin(), batch.segment_ids.end(), [](int32_t s) { return s > 0; });
  if (packed) {
    out.segments = batch.segment_ids;
    for (int64_t b = 0; b < batch.B; ++b) {
      int32_t last = 0;
      for (int64_t t = 0; t < batch.T; ++t) {
        int32_t& s = out.segments[size_t(b * batch.T + t)];
        if (s < 0)
          s = last + 1;  // padding closes the row: a fresh id, non-decreasing
        else
          last = s;
      }
    }
  }
  out.label_tokens = model::count_label_tokens(out.view());
  return out;
}

}  // namespace lt::train
