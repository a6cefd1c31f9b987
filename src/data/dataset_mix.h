// Several datasets as one training set (the `datasets` key): each file is read on its own (its own format
// and data report), then its examples join the set `weight` times: the whole part of the weight as that
// many copies, the fraction as a seeded sample without replacement of round(fraction x examples) of them.
// Weight 1 for every file (the default) is plain concatenation, in the order listed. The trainer shuffles
// the joined set as it shuffles one file.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset_types.h"

namespace lt::data {

struct WeightedDataset {
  Dataset dataset;
  double weight = 1.0;  // >= 0
};

// The joined set; `source` lists the files, the stats are the sums over the copies taken. Errors when the
// weights leave no example.
Dataset mix_datasets(std::vector<WeightedDataset> parts, uint64_t seed);

}  // namespace lt::data
