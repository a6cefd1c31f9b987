#include "data/batch.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace lt::data {

int32_t padding_id(const Tokenizer& tokenizer) { return tokenizer.pad_id().value_or(0); }

Batch make_batch(std::span<const Example> examples, const std::vector<std::vector<int64_t>>& rows,
                 int32_t pad_id, int64_t pad_to_multiple) {
  LT_CHECK(!rows.empty(), "cannot make a batch of zero rows");
  LT_CHECK(pad_to_multiple >= 1, "pad_to_multiple is {}, expected >= 1", pad_to_multiple);
  Batch batch;
  batch.B = int64_t(rows.size());
  for (const auto& row : rows) {
    LT_CHECK(!row.empty(), "a batch row holds no example");
    int64_t length = 0;
    for (int64_t i : row) {
      LT_CHECK(i >= 0 && i < int64_t(examples.size()), "example index {} out of range [0, {})", i,
               examples.size());
      const Example& e = examples[size_t(i)];
      LT_CHECK(e.labels.size() == e.input_ids.size(), "example {} has {} labels for {} tokens", i,
               e.labels.size(), e.input_ids.size());
      length += int64_t(e.input_ids.size());
    }
    batch.row_lengths.push_back(length);
    batch.T = std::max(batch.T, length);
  }
  batch.T = (batch.T + pad_to_multiple - 1) / pad_to_multiple * pad_to_multiple;
  size_t cells = size_t(batch.B * batch.T);
  batch.input_ids.assign(cells, pad_id);
  batch.labels.assign(cells, kIgnoreIndex);
  batch.positions.assign(cells, 0);
  batch.segment_ids.assign(cells, -1);
  for (size_t r = 0; r < rows.size(); ++r) {
    size_t t = r * size_t(batch.T);
    int32_t segment = 0;
    for (int64_t i : rows[r]) {
      const Example& e = examples[size_t(i)];
      for (size_t k = 0; k < e.input_ids.size(); ++k, ++t) {
        batch.input_ids[t] = e.input_ids[k];
        batch.labels[t] = k == 0 ? kIgnoreIndex : e.labels[k];
        batch.positions[t] = int32_t(k);
        batch.segment_ids[t] = segment;
        batch.label_tokens += batch.labels[t] != kIgnoreIndex;
      }
      ++segment;
      batch.example_indices.push_back(i);
    }
    batch.tokens += batch.row_lengths[r];
  }
  return batch;
}

std::vector<std::vector<int64_t>> pack_rows(const std::vector<int64_t>& lengths, int64_t row_budget) {
  LT_CHECK(row_budget >= 1, "packing row budget is {} tokens, expected >= 1", row_budget);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
  std::vector<std::vector<int64_t>> rows;
  std::multimap<int64_t, size_t> free_space;  // remaining tokens -> row, in insertion order among equals
  for (int64_t i : order) {
    int64_t length = lengths[size_t(i)];
    LT_CHECK(length <= row_budget, "example {} has {} tokens, more than the packing budget of {} per row", i,
             length, row_budget);
    auto it = free_space.lower_bound(length);
    if (it == free_space.end()) {
      rows.push_back({i});
      free_space.emplace(row_budget - length, rows.size() - 1);
    } else {
      size_t row = it->second;
      int64_t left = it->first - length;
      free_space.erase(it);
      rows[row].push_back(i);
      free_space.emplace(left, row);
    }
  }
  return rows;
}

}  // namespace lt::data
