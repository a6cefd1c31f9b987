#include "model/sampling.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace lt::model {

void apply_repetition_penalty(std::vector<double>& logits, std::span<const int32_t> history, double penalty) {
  LT_CHECK(penalty > 0, "generate: repetition_penalty is {}, expected a value > 0 (1: none)", penalty);
  if (penalty == 1) return;
  std::vector<bool> seen(logits.size(), false);
  for (int32_t id : history) {
    LT_CHECK(id >= 0 && size_t(id) < logits.size(), "generate: token id {} outside the vocabulary ({})", id,
             logits.size());
    if (seen[size_t(id)]) continue;
    seen[size_t(id)] = true;
    double& l = logits[size_t(id)];
    l = l < 0 ? l * penalty : l / penalty;
  }
}

void apply_top_k(std::vector<double>& logits, int64_t k) {
  if (k <= 0 || size_t(k) >= logits.size()) return;
  std::vector<double> sorted = logits;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
  const double kth = sorted[size_t(k - 1)];
  for (double& l : logits)
    if (l < kth) l = -std::numeric_limits<double>::infinity();
}

}  // namespace lt::model
