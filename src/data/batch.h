// Micro-batches: rows of one or more examples, right-padded to the longest row.
//
// Shift convention (HF): the logits at position t are scored against labels[t + 1]. So the label at the
// first token of every sequence in a row is set to -100: at row position 0 it would never be scored
// anyway, and inside a packed row it would make the last token of the previous sequence predict the
// first token of the next one, across a document boundary. With that done, label_tokens counts
// labels[:, 1:] != -100, which equals the count of all labels != -100 in the batch, and is exactly the
// number of (logit, label) pairs the loss scores.
//
// Padding: input_ids = pad_id, labels = -100, positions = 0, segment_ids = -1. Within a row, positions
// restart at 0 for each packed sequence and segment_ids count the sequences 0, 1, 2, ...; attention must
// only connect tokens of the same segment (right padding never precedes a real token, so padding is only
// ever attended by padding).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/example.h"
#include "data/tokenizer.h"

namespace lt::data {

struct Batch {
  int64_t B = 0;                         // rows
  int64_t T = 0;                         // tokens per row (the longest row)
  std::vector<int32_t> input_ids;        // (B, T)
  std::vector<int32_t> labels;           // (B, T) -100 where no loss
  std::vector<int32_t> positions;        // (B, T) position within each sequence
  std::vector<int32_t> segment_ids;      // (B, T) sequence number within the row, -1 on padding
  std::vector<int64_t> row_lengths;      // (B) real tokens per row
  int64_t label_tokens = 0;              // labels[:, 1:] != -100
  int64_t tokens = 0;                    // real (non-padding) tokens
  std::vector<int64_t> example_indices;  // which dataset examples, row by row, in row order
};

// The id padding is filled with: the tokenizer's pad token, else 0 (Llama 3 and Qwen2 define none; padding
// carries label -100 and segment -1, so its id is never scored or attended by a real token).
int32_t padding_id(const Tokenizer& tokenizer);

// Each entry of `rows` lists the example indices that share one row (one index: plain padding; several:
// packing). `pad_to_multiple` rounds T up (1: no rounding).
Batch make_batch(std::span<const Example> examples, const std::vector<std::vector<int64_t>>& rows,
                 int32_t pad_id, int64_t pad_to_multiple = 1);

// Packing plan: assign examples to rows of at most `row_budget` tokens with best-fit decreasing (each
// example, longest first, goes to the fullest row it still fits in; among equally full rows, the one
// that reached that fill first).
// Deterministic and independent of any seed; an example longer than row_budget is an error.
std::vector<std::vector<int64_t>> pack_rows(const std::vector<int64_t>& lengths, int64_t row_budget);

}  // namespace lt::data
