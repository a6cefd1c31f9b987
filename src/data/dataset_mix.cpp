#include "data/dataset_mix.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/sampler.h"

namespace lt::data {
namespace {

// The seeded sample of a fractional weight: its own Philox stream per file (index i), so adding a file
// does not change another's sample.
constexpr uint64_t kMixStream = 0x313Cull;

void take(Dataset& into, const Example& e) {
  into.examples.push_back(e);
  account_example(into.stats, e);
}

}  // namespace

Dataset mix_datasets(std::vector<WeightedDataset> parts, uint64_t seed) {
  LT_CHECK(!parts.empty(), "datasets: the list is empty, expected at least one dataset file");
  Dataset out;
  out.format = parts.front().dataset.format;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Dataset& d = parts[i].dataset;
    const double weight = parts[i].weight;
    LT_CHECK(std::isfinite(weight) && weight >= 0,
             "dataset_weights: {} has weight {}, expected a number >= 0", d.source, weight);
    out.source += (i ? " + " : "") + d.source;
    out.stats.records += d.stats.records;
    out.stats.skipped += d.stats.skipped;
    if (out.stats.first_skip.empty()) out.stats.first_skip = d.stats.first_skip;
    out.stats.truncated += d.stats.truncated;
    out.stats.dropped += d.stats.dropped;
    const double whole = std::floor(weight);
    for (int64_t copy = 0; copy < int64_t(whole); ++copy)
      for (const Example& e : d.examples) take(out, e);
    const auto n = int64_t(d.examples.size());
    const auto extra = int64_t(std::llround((weight - whole) * double(n)));
    if (extra > 0) {
      std::vector<int64_t> order = seeded_permutation(n, seed, kMixStream + i);
      order.resize(size_t(extra));
      std::sort(order.begin(), order.end());  // the file's order
      for (int64_t k : order) take(out, d.examples[size_t(k)]);
    }
  }
  LT_CHECK(!out.examples.empty(), "datasets {}: the weights leave no example", out.source);
  return out;
}

}  // namespace lt::data
