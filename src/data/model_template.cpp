#include "data/model_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/dataset_records.h"

namespace lt::data {
namespace {

nlohmann::json special_tokens_of(const Tokenizer& tokenizer) {
  nlohmann::json tokens = nlohmann::json::object();
  if (auto id = tokenizer.bos_id()) tokens["bos_token"] = tokenizer.id_to_token(*id);
  if (auto id = tokenizer.eos_id()) tokens["eos_token"] = tokenizer.id_to_token(*id);
  return tokens;
}

nlohmann::json messages_json(const std::vector<ChatMessage>& messages, size_t count) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < count; ++i)
    list.push_back({{"role", messages[i].role}, {"content", messages[i].content}});
  return list;
}

RenderedTemplate render(const ModelTemplate& tmpl, const nlohmann::json& special_tokens,
                        const std::vector<ChatMessage>& messages, size_t count, bool add_generation_prompt) {
  nlohmann::json context = special_tokens;
  context["messages"] = messages_json(messages, count);
  context["add_generation_prompt"] = add_generation_prompt;
  try {
    return tmpl.jinja.render(context);
  } catch (const Error& e) {
    throw RecordError(fmt::format("chat template {}: {}", tmpl.source, e.what()));
  }
}

// The assistant turns' byte ranges by the prefix-diff rule (model_template.h).
std::vector<std::pair<size_t, size_t>> prefix_diff_spans(const ModelTemplate& tmpl,
                                                         const nlohmann::json& special_tokens,
                                                         const std::vector<ChatMessage>& messages,
                                                         const std::string& whole) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const std::string before = render(tmpl, special_tokens, messages, i, true).text;
    const std::string through = render(tmpl, special_tokens, messages, i + 1, false).text;
    if (!through.starts_with(before) || !whole.starts_with(through))
      throw RecordError(fmt::format(
          "chat template {}: turn {}: the rendering of the conversation up to this assistant turn is not a "
          "prefix of the whole conversation's (the template rewrites earlier turns), so the assistant's "
          "tokens cannot be told apart; give a template with {{% generation %}} blocks (chat_template key) "
          "or set train_on_all_turns true",
          tmpl.source, i));
    spans.emplace_back(before.size(), through.size());
  }
  return spans;
}

bool is_marker_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::shared_ptr<const ModelTemplate> make_model_template(const std::string& text, const std::string& source) {
  try {
    JinjaTemplate jinja(text);
    const bool generation = jinja.has_generation_blocks();
    return std::make_shared<const ModelTemplate>(ModelTemplate{source, std::move(jinja), generation});
  } catch (const Error& e) {
    LT_FAIL("chat template {}: {}", source, e.what());
  }
}

std::shared_ptr<const ModelTemplate> load_model_template(const std::string& model_dir) {
  const std::optional<std::string> text = model_chat_template(model_dir);
  if (!text) return nullptr;
  return make_model_template(*text, model_dir + " (the model's chat template)");
}

std::shared_ptr<const ModelTemplate> load_template_file(const std::string& path) {
  return make_model_template(read_input_file(path, kMaxTokenizerJsonBytes, "chat template"), path);
}

std::vector<Segment> render_with_model_template(const ModelTemplate& tmpl, const Tokenizer& tokenizer,
                                                const std::vector<ChatMessage>& messages) {
  const nlohmann::json special_tokens = special_tokens_of(tokenizer);
  RenderedTemplate whole = render(tmpl, special_tokens, messages, messages.size(), false);
  std::vector<std::pair<size_t, size_t>> spans =
      tmpl.generation_blocks ? std::move(whole.generation)
                             : prefix_diff_spans(tmpl, special_tokens, messages, whole.text);
  std::sort(spans.begin(), spans.end());
  std::vector<Segment> segments;
  auto add = [&](size_t begin, size_t end, bool is_prompt) {
    if (end > begin) segments.push_back({whole.text.substr(begin, end - begin), is_prompt, true});
  };
  size_t at = 0;
  for (auto [begin, end] : spans) {
    begin = std::max(begin, at);  // overlapping blocks (a block rendered inside another) merge
    if (end <= begin) continue;
    add(at, begin, true);
    add(begin, end, false);
    at = end;
  }
  add(at, whole.text.size(), true);
  return segments;
}

std::vector<int32_t> encode_prompt_completion(const ModelTemplate& tmpl, const Tokenizer& tokenizer,
                                              const std::vector<ChatMessage>& prompt,
                                              const std::vector<ChatMessage>& completion,
                                              size_t& prompt_tokens, std::string& whole_text) {
  const nlohmann::json special_tokens = special_tokens_of(tokenizer);
  std::vector<ChatMessage> whole = prompt;
  whole.insert(whole.end(), completion.begin(), completion.end());
  const std::string asked = render(tmpl, special_tokens, prompt, prompt.size(), true).text;
  whole_text = render(tmpl, special_tokens, whole, whole.size(), false).text;
  const std::vector<int32_t> prompt_ids = tokenizer.encode(asked, /*allow_special=*/true);
  std::vector<int32_t> ids = tokenizer.encode(whole_text, /*allow_special=*/true);
  prompt_tokens = size_t(std::mismatch(prompt_ids.begin(), prompt_ids.end(), ids.begin(), ids.end()).first -
                         prompt_ids.begin());
  return ids;
}

void collect_missing_markers(std::string_view text, const Tokenizer& tokenizer,
                             std::set<std::string>& missing) {
  for (size_t i = text.find('<'); i != std::string_view::npos; i = text.find('<', i + 1)) {
    const bool pipes = i + 1 < text.size() && text[i + 1] == '|';
    size_t j = i + (pipes ? 2 : 1);
    bool underscore = false;
    while (j < text.size() && is_marker_char(text[j])) underscore |= text[j++] == '_';
    if (j == i + (pipes ? 2 : 1)) continue;
    if (pipes ? !(j + 1 < text.size() && text[j] == '|' && text[j + 1] == '>')
              : !(j < text.size() && text[j] == '>' && underscore))
      continue;
    const std::string marker(text.substr(i, j + (pipes ? 2 : 1) - i));
    if (!tokenizer.token_to_id(marker)) missing.insert(marker);
  }
}

void warn_missing_markers(const ModelTemplate& tmpl, const std::set<std::string>& missing) {
  if (missing.empty()) return;
  fmt::print(stderr,
             "warning: chat template {}: {} not in the tokenizer's vocabulary, so encoded as plain text "
             "(several tokens each): the model gets no single token to learn and stop on\n",
             tmpl.source, fmt::join(missing, ", "));
}

}  // namespace lt::data
