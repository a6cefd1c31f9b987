// Batches over (epoch, step), random access, so training can resume at any step.
//
// Order of an epoch (a pure function of the examples, the options and the epoch number):
//   - plain:           examples in epoch_permutation(n, seed, epoch) order (file order if !shuffle),
//                      cut into micro-batches of micro_batch_size.
//   - group_by_length: length_grouped_batches (sampler.h); needs shuffle.
//   - packing:         rows from pack_rows (best-fit decreasing into pack_len tokens) computed once; each
//                      epoch shuffles the rows with the epoch permutation and cuts them into micro-batches
//                      of micro_batch_size rows. The packing never changes, so steps_per_epoch is constant.
// The last micro-batch of an epoch may be short unless drop_last. Position (epoch, step) is all a checkpoint
// needs to store: seek() there and next() returns the same batch as the uninterrupted run.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/batch.h"
#include "data/example.h"

namespace lt::data {

struct LoaderOptions {
  int64_t micro_batch_size = 1;  // rows per batch
  bool shuffle = true;
  uint64_t seed = 42;
  bool group_by_length = false;
  int64_t megabatch_mult = 50;  // group_by_length: megabatch = micro_batch_size * this
  bool packing = false;
  int64_t pack_len = 0;  // packing: tokens per row; must be >= the longest example
  int32_t pad_id = 0;    // the tokenizer's pad id, else 0 (padding carries no label, so any id works)
  int64_t pad_to_multiple = 1;
  bool drop_last = false;
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t step = 0;  // micro-batch index within the epoch
};

class DataLoader {
 public:
  // `examples` must outlive the loader.
  DataLoader(std::span<const Example> examples, LoaderOptions options);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The rows (example indices) of micro-batch `step` of `epoch`.
  std::vector<std::vector<int64_t>> batch_rows(int64_t epoch, int64_t step);
  Batch batch(int64_t epoch, int64_t step);

  void seek(LoaderPosition position);
  LoaderPosition position() const { return position_; }
  // The batch at position(), then advances (to step 0 of the next epoch after the last step).
  Batch next();

 private:
  const std::vector<std::vector<std::vector<int64_t>>>& plan(int64_t epoch);  // batch -> row -> examples

  std::span<const Example> examples_;
  LoaderOptions options_;
  std::vector<int64_t> lengths_;                   // (n) tokens per example
  std::vector<std::vector<int64_t>> packed_rows_;  // packing only
  int64_t steps_per_epoch_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<std::vector<std::vector<int64_t>>> cached_plan_;
  LoaderPosition position_;
};

}  // namespace lt::data
