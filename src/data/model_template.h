// Chat data rendered by a model's own Jinja chat template (`prompt_template: auto` on a model that has one,
// or the `chat_template` key), with the assistant-only mask TRL's `assistant_only_loss` computes.
//
// Rendering. transformers' apply_chat_template: the template gets `messages` (role/content), the
// tokenizer's bos_token/eos_token (absent when it has none) and add_generation_prompt false; the text is
// tokenized whole with special tokens recognized and nothing added (add_special_tokens=False): BOS and EOS
// are what the template writes.
//
// Which tokens are trained (assistant turns):
//   - a template with {% generation %} blocks: the tokens overlapping the blocks' output, as transformers'
//     return_assistant_tokens_mask gives them and TRL's SFTTrainer(assistant_only_loss=True) trains;
//   - a template without them (most published templates): the prefix-diff rule. Assistant turn i is the
//     text between render(messages[:i], add_generation_prompt=True) and render(messages[:i+1]): exactly
//     what the model is asked to produce after the generation prompt, up to where the next turn begins
//     (its end-of-turn marker included). Both renderings must be prefixes of the whole conversation's;
//     a template that rewrites earlier turns (Qwen3 drops past <think> blocks) is refused with the record's
//     location. TRL refuses assistant_only_loss for such templates unless it ships a training variant.
// A token that straddles a span boundary is trained (transformers' overlap rule).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data/jinja.h"
#include "data/prompt_template.h"
#include "data/tokenizer.h"

namespace lt::data {

struct ModelTemplate {
  std::string source;  // where it came from (a file), for messages
  JinjaTemplate jinja;
  bool generation_blocks = false;
};

// The template text `text` (from `source`; parse errors name it).
std::shared_ptr<const ModelTemplate> make_model_template(const std::string& text, const std::string& source);
// A model directory's own template (data/jinja.h model_chat_template), or null when it has none.
std::shared_ptr<const ModelTemplate> load_model_template(const std::string& model_dir);
// A .jinja file (the `chat_template` key).
std::shared_ptr<const ModelTemplate> load_template_file(const std::string& path);

// The conversation as segments: every one may hold special tokens; assistant spans are targets. The
// template sees `tokenizer`'s bos_token/eos_token. Throws RecordError when the template raises or is not
// prefix-preserving.
std::vector<Segment> render_with_model_template(const ModelTemplate& tmpl, const Tokenizer& tokenizer,
                                                const std::vector<ChatMessage>& messages);

// TRL's conversational prompt/completion record through the template, as its SFTTrainer tokenizes one:
// input_ids = the whole conversation (prompt then completion turns) tokenized with its special tokens,
// the prompt = render(prompt turns, add_generation_prompt=True) tokenized likewise, and the completion
// starts after the two token lists' common prefix (TRL's common_prefix_length: a template that renders
// the prompt alone differently, or a token merging across the boundary, moves the start back).
// `prompt_tokens` is set to that prefix's length and `whole_text` to the rendering. Throws RecordError
// when the template raises.
std::vector<int32_t> encode_prompt_completion(const ModelTemplate& tmpl, const Tokenizer& tokenizer,
                                              const std::vector<ChatMessage>& prompt,
                                              const std::vector<ChatMessage>& completion,
                                              size_t& prompt_tokens, std::string& whole_text);

// Marker-like strings of `text` (<|...|>, <start_of_turn>-style <word_word>) that are not tokens of
// `tokenizer`: they are encoded as plain text, so the model gets no single token to learn and stop on.
void collect_missing_markers(std::string_view text, const Tokenizer& tokenizer,
                             std::set<std::string>& missing);
// The warning for them (stderr), once per dataset; nothing when `missing` is empty.
void warn_missing_markers(const ModelTemplate& tmpl, const std::set<std::string>& missing);

}  // namespace lt::data
