#include "data/dataset_split.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/sampler.h"

namespace lt::data {

int64_t validation_count(double val_set_size, int64_t n, const std::string& source) {
  LT_CHECK(std::isfinite(val_set_size) && val_set_size >= 0,
           "val_set_size is {}, expected 0, a fraction in (0, 1) or a whole number of examples",
           val_set_size);
  int64_t count = 0;
  if (val_set_size < 1) {
    count = int64_t(std::ceil(val_set_size * double(n)));
  } else {
    LT_CHECK(val_set_size == std::floor(val_set_size),
             "val_set_size is {}: a value of 1 or more is a count of examples and must be a whole number",
             val_set_size);
    count = int64_t(val_set_size);
  }
  LT_CHECK(count < n,
           "dataset {}: val_set_size {} takes {} of its {} examples for validation, leaving none to train on",
           source, val_set_size, count, n);
  return count;
}

SplitIndices split_indices(int64_t n, double val_set_size, uint64_t seed, const std::string& source) {
  int64_t count = validation_count(val_set_size, n, source);
  std::vector<int64_t> order = seeded_permutation(n, seed, kSplitStream);
  SplitIndices split;
  split.val.assign(order.begin(), order.begin() + count);
  split.train.assign(order.begin() + count, order.end());
  std::sort(split.val.begin(), split.val.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

SplitExamples split_examples(std::vector<Example> examples, double val_set_size, uint64_t seed,
                             const std::string& source) {
  SplitIndices split = split_indices(int64_t(examples.size()), val_set_size, seed, source);
  SplitExamples out;
  out.train.reserve(split.train.size());
  out.val.reserve(split.val.size());
  for (int64_t i : split.train) out.train.push_back(std::move(examples[size_t(i)]));
  for (int64_t i : split.val) out.val.push_back(std::move(examples[size_t(i)]));
  return out;
}

}  // namespace lt::data
