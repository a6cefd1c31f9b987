// Logits processors of transformers' generate, in the order it applies them: the repetition penalty (a
// LogitsProcessor, so greedy decoding sees it too) on the raw logits, then the warpers of sampling:
// temperature, top_k, top_p (model/generate.h's sample_token applies temperature and top_p).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lt::model {

// RepetitionPenaltyLogitsProcessor: every token id that occurs in `history` (prompt and generated so far,
// each id once however often it occurs) has its logit divided by `penalty` when positive, multiplied when
// negative. penalty 1 leaves the logits as they are; it must be > 0.
void apply_repetition_penalty(std::vector<double>& logits, std::span<const int32_t> history, double penalty);

// TopKLogitsWarper: logits below the k-th largest become -inf (ties with it are kept); k <= 0 or k >= V
// keeps every token.
void apply_top_k(std::vector<double>& logits, int64_t k);

}  // namespace lt::model
