// Prompt templates: turn an instruction record or a conversation into text segments, each marked as
// prompt (no loss unless train_on_inputs) or target, and as a special-token marker (encoded with
// allow_special=true) or text (allow_special=false, so a user cannot inject <|eot_id|> and friends).
// Only the marker strings themselves are special segments; template text around them ("user\n", "\n\n")
// is plain text. The encoder joins neighbouring plain segments, so text is tokenized in the same chunks
// as HF tokenizers do (split at special tokens, then encode each chunk whole).
//
// Templates and their BOS/EOS policy:
//   alpaca  alpaca-lora's text (FORMATS.md "Instruction data"); BOS as the tokenizer adds it; target is
//           output + EOS (EOS appended only when it fits in cutoff_len, as alpaca-lora's tokenize()).
//   llama3  <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> per turn, BOS first; no
//           EOS: <|eot_id|> ends every turn and is trained on assistant turns. Content is trimmed of
//           surrounding whitespace, as the Llama 3 Instruct template's `| trim` does. No default system
//           prompt is injected (Llama 3.1's "Cutting Knowledge Date" header is not reproduced).
//   chatml  <|im_start|>{role}\n{content}<|im_end|>\n per turn; BOS only if the tokenizer adds one (Qwen2
//           does not); <|im_end|> is trained on assistant turns, the newline after it is not. Content is
//           kept as is; Qwen's default system prompt is not injected (give a system turn explicitly).
//   plain   no decoration: instruction records become "{instruction}\n{input}\n" (input line left out
//           when empty) + output; conversations become each content followed by "\n"; BOS as the
//           tokenizer adds it, EOS appended.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

enum class TemplateKind { alpaca, llama3, chatml, plain };

struct Segment {
  std::string text;
  bool is_prompt = true;       // true: label -100 when train_on_inputs is false
  bool allow_special = false;  // true only for a special-token marker of the template
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct TemplatePolicy {
  bool force_bos = false;   // prepend BOS even if the tokenizer does not add one (llama3)
  bool append_eos = false;  // end the example with EOS when it fits (alpaca, plain)
  // Who gets a token that spans a prompt/target boundary (e.g. "\n" + "\n\n" merged into one token):
  // false: the side encode(text before the boundary) gives it, alpaca-lora's rule (alpaca, plain);
  // true: the target, as transformers' assistant_masks and TRL's assistant-only loss (llama3, chatml).
  bool spanning_token_is_target = false;
};

// "alpaca", "llama3" (also "llama-3", "llama3_chat"), "chatml", "plain" (also "none"); anything else is an
// error that lists the names.
TemplateKind template_from_name(std::string_view name);
const char* template_name(TemplateKind kind);
TemplatePolicy template_policy(TemplateKind kind);

// The alpaca prompt exactly as alpaca-lora builds it (without the output): with or without input.
std::string alpaca_prompt(std::string_view instruction, std::string_view input);

std::vector<Segment> render_instruction(TemplateKind kind, std::string_view instruction,
                                        std::string_view input, std::string_view output);
// Instruction records under a chat template: one user turn (instruction, blank line, input) and one
// assistant turn.
std::vector<ChatMessage> instruction_as_chat(std::string_view instruction, std::string_view input,
                                             std::string_view output);
// Messages must have known roles (checked by the reader); assistant turns are the targets. The alpaca
// template cannot render conversations (error).
std::vector<Segment> render_chat(TemplateKind kind, const std::vector<ChatMessage>& messages);

// Which template a model's tokenizer_config.json asks for. The rule, from the Jinja `chat_template`:
//   - contains "<|start_header_id|>" and "<|eot_id|>"  -> llama3
//   - contains "<|im_start|>" and "<|im_end|>"         -> chatml
//   - absent (base models)                              -> alpaca
//   - present but neither                               -> error naming the file: choose a template by name.
// `chat_template` may be a string or HF's list form [{"name", "template"}] (the "default" entry, else the
// first). The argument is a model directory or the tokenizer_config.json file itself; a directory without
// the file means alpaca.
TemplateKind detect_template(const std::string& model_dir_or_file);
// The marker rule alone, for a template text; `source` names it in the error.
TemplateKind template_from_chat_template(std::string_view chat_template, const std::string& source);

}  // namespace lt::data
