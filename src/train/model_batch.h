// A data::Batch as the decoder takes it. The data layer marks padding with segment id -1, but attention
// needs non-decreasing segment ids per row; padding becomes a segment of its own (the row's last id + 1),
// which nothing real attends to. A batch without packing (one sequence per row) passes no segments at all:
// right padding then sits after every real token, which causal attention never lets a real token see.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "model/decoder.h"

namespace lt::train {

struct ModelBatch {
  std::vector<int32_t> input_ids;  // (B, T)
  std::vector<int32_t> positions;  // (B, T)
  std::vector<int32_t> segments;   // (B, T), empty when no row is packed
  std::vector<int32_t> labels;     // (B, T)
  int64_t B = 0, T = 0;
  int64_t label_tokens = 0;  // model::count_label_tokens: the scored (logit, label) pairs
  int64_t tokens = 0;        // real tokens

  // Views into the vectors above: valid while this object lives and is not moved.
  model::Batch view();
};

ModelBatch to_model_batch(const data::Batch& batch);

}  // namespace lt::train
