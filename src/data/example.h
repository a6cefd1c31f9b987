// One training sequence after templating and tokenization: the unit every dataset reader produces and the
// batcher consumes.
//
// Label convention (HF causal LM): labels has input_ids' length and the model shifts them itself, so the
// logits at position t are scored against labels[t + 1]. labels[0] is therefore never scored, and a label
// of kIgnoreIndex (-100) means "no loss here".
#pragma once

#include <cstdint>
#include <vector>

namespace lt::data {

inline constexpr int32_t kIgnoreIndex = -100;

struct Example {
  std::vector<int32_t> input_ids;  // (T)
  std::vector<int32_t> labels;     // (T), token id or kIgnoreIndex
};

// Number of labels the loss will score after the shift: labels[1:] != -100.
int64_t count_label_tokens(const Example& example);

}  // namespace lt::data
