// Train/validation split with a fixed seed.
//
// val_set_size: 0 means no validation set; a value in (0, 1) is a fraction of the examples, rounded up
// (as HF datasets' train_test_split); a value >= 1 must be a whole number of examples. At least one
// example must stay in the training set. The validation indices are the first k of a Philox-seeded
// Fisher-Yates permutation of [0, n) (stream kSplitStream); both sides keep the file's order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example.h"

namespace lt::data {

inline constexpr uint64_t kSplitStream = 0x5B117ull;

struct SplitIndices {
  std::vector<int64_t> train;  // ascending
  std::vector<int64_t> val;    // ascending
};

// The number of validation examples for `n` examples; `source` names the dataset in errors.
int64_t validation_count(double val_set_size, int64_t n, const std::string& source);

SplitIndices split_indices(int64_t n, double val_set_size, uint64_t seed, const std::string& source);

struct SplitExamples {
  std::vector<Example> train;
  std::vector<Example> val;
};
SplitExamples split_examples(std::vector<Example> examples, double val_set_size, uint64_t seed,
                             const std::string& source);

}  // namespace lt::data
