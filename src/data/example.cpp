#include "data/example.h"

#include <cstddef>

namespace lt::data {

int64_t count_label_tokens(const Example& example) {
  int64_t count = 0;
  for (std::size_t t = 1; t < example.labels.size(); ++t) count += example.labels[t] != kIgnoreIndex;
  return count;
}

}  // namespace lt::data
