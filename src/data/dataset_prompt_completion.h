// TRL's prompt-completion data: a JSON array or JSONL of
//   {"prompt": "...", "completion": "..."}                                   (standard), or
//   {"prompt": [{"role", "content"}, ...], "completion": [{"role", "content"}, ...]}   (conversational).
// Standard records are encoded as TRL's SFTTrainer does: prompt + completion as one text (BOS as the
// tokenizer adds it) with EOS appended when it fits; the prompt's tokens are those of encode(prompt), so
// a token spanning the boundary counts as prompt (TRL's completion_mask). train_on_inputs false masks the
// prompt (TRL's completion_only_loss), true trains on every token.
// Conversational records under a model's own Jinja template (options.model_template: prompt_template auto
// on a model that has one, or the chat_template key) are tokenized as TRL's SFTTrainer does
// (model_template.h encode_prompt_completion): the completion's tokens carry the labels, the prompt's are
// masked (train_on_all_turns: every token trained), truncated to cutoff_len. Under a built-in template
// (llama3, chatml, plain; not alpaca) they are rendered as prompt turns followed by completion turns; every
// prompt turn is masked, and the completion's assistant turns carry the labels (train_on_all_turns: every
// turn).
// Bad records: a missing prompt or completion, the two of different kinds, a field that is neither a
// string nor a list of turns, a malformed turn.
#pragma once

#include <string>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

Dataset load_prompt_completion(const std::string& path, const Tokenizer& tokenizer,
                               const DatasetOptions& options);

}  // namespace lt::data
