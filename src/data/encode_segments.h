// Segments (prompt_template.h) to an Example: tokenization, BOS/EOS, cutoff_len truncation and label masking.
//
// Tokenization. Adjacent segments with the same allow_special are encoded as one string (a run), so the
// tokens at a prompt/target boundary are what encoding the whole text gives (this matters for
// SentencePiece, which adds a "▁" prefix on every encode call, and for BPE merges across the boundary).
// Since templates mark only the special-token strings as special, runs break exactly at special tokens,
// as HF tokenizers break a text before encoding its pieces. Inside such a run a
// boundary is found from p = encode(text up to the boundary): by default it falls after len(p) tokens,
// clamped to the run: alpaca-lora's rule (user_prompt_len = len(tokenize(prompt))), so Alpaca examples mask
// exactly as alpaca-lora does. With spanning_token_is_target (chat templates) a token that straddles the
// boundary -- the first token where the run and p disagree, when p is not a prefix of the run -- goes to
// the target side, as transformers' assistant_masks do.
//
// Length. As alpaca-lora's tokenize(): BOS (if any) + tokens, truncated to cutoff_len; then EOS is appended
// only when the policy asks for it, the result is shorter than cutoff_len and the last token is not
// already EOS. A truncated example therefore has no EOS.
//
// Labels. train_on_inputs=true: labels = input_ids. false: -100 on prompt tokens (BOS counts as prompt);
// EOS is a target.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/example.h"
#include "data/prompt_template.h"
#include "data/tokenizer.h"

namespace lt::data {

struct EncodeOptions {
  int64_t cutoff_len = 256;  // >= 2
  bool train_on_inputs = false;
  bool add_bos = false;  // the caller resolves: template force_bos or tokenizer adds_bos
  bool add_eos = false;
  bool spanning_token_is_target = false;
};

// The chat template's marker strings (<|eot_id|>, <|im_start|>, ...) that are not tokens of `tokenizer`.
std::vector<std::string> markers_missing_from_vocabulary(TemplateKind kind, const Tokenizer& tokenizer);

// add_bos/add_eos for a template and tokenizer; errors when the template needs a BOS or EOS the tokenizer
// does not define; warns (stderr) when its markers are not tokens of the vocabulary.
EncodeOptions encode_options_for(TemplateKind kind, const Tokenizer& tokenizer, int64_t cutoff_len,
                                 bool train_on_inputs);

// `truncated`, when given, is set to whether cutoff_len cut tokens off.
Example encode_segments(const Tokenizer& tokenizer, std::span<const Segment> segments,
                        const EncodeOptions& options, bool* truncated = nullptr);

}  // namespace lt::data
