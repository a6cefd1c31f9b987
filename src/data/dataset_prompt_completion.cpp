#include "data/dataset_prompt_completion.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "core/error.h"
#include "data/dataset_chat.h"
#include "data/encode_segments.h"
#include "data/model_template.h"

namespace lt::data {
namespace {

const nlohmann::json& required(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end()) throw RecordError(fmt::format("missing field '{}'", key));
  if (!it->is_string() && !it->is_array())
    throw RecordError(
        fmt::format("field '{}' is a JSON {}, expected a string or a list of turns", key, it->type_name()));
  return *it;
}

std::vector<Segment> conversational_segments(TemplateKind kind, const nlohmann::json& prompt,
                                             const nlohmann::json& completion) {
  std::vector<Segment> segments = render_chat(kind, parse_turns(prompt, "prompt", false));
  for (Segment& s : segments) s.is_prompt = true;
  std::vector<Segment> answer = render_chat(kind, parse_turns(completion, "completion", false));
  segments.insert(segments.end(), answer.begin(), answer.end());
  return segments;
}

}  // namespace

Dataset load_prompt_completion(const std::string& path, const Tokenizer& tokenizer,
                               const DatasetOptions& options) {
  // Standard records: the plain template's policy (BOS as the tokenizer adds it, EOS appended, a spanning
  // token on the prompt's side) without its decoration.
  const EncodeOptions text_encode =
      encode_options_for(TemplateKind::plain, tokenizer, options.cutoff_len, options.train_on_inputs);
  // Conversational records: the chat template's policy (resolved on the first one: standard data needs no
  // chat template).
  std::optional<EncodeOptions> chat_encode;
  Dataset dataset;
  dataset.source = path;
  BadRecords bad(options.on_bad_record);
  std::set<std::string> missing;  // the model template's markers the vocabulary lacks
  for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
    require_object(record);
    const nlohmann::json& prompt = required(record, "prompt");
    const nlohmann::json& completion = required(record, "completion");
    if (prompt.is_string() != completion.is_string())
      throw RecordError(
          fmt::format("'prompt' is a {} but 'completion' is a {}; expected both strings or both "
                      "lists of turns",
                      prompt.is_string() ? "string" : "list", completion.is_string() ? "string" : "list"));
    bool truncated = false;
    Example example;
    if (prompt.is_string()) {
      std::vector<Segment> segments;
      if (!prompt.get_ref<const std::string&>().empty())
        segments.push_back({prompt.get<std::string>(), true, false});
      if (!completion.get_ref<const std::string&>().empty())
        segments.push_back({completion.get<std::string>(), false, false});
      example = encode_segments(tokenizer, segments, text_encode, &truncated);
    } else if (options.model_template) {
      size_t prompt_tokens = 0;
      std::string text;
      std::vector<int32_t> ids =
          encode_prompt_completion(*options.model_template, tokenizer, parse_turns(prompt, "prompt", false),
                                   parse_turns(completion, "completion", false), prompt_tokens, text);
      if (dataset.examples.size() < 64) collect_missing_markers(text, tokenizer, missing);
      const size_t cutoff = size_t(options.cutoff_len);
      truncated = ids.size() > cutoff;
      if (truncated) ids.resize(cutoff);
      example.input_ids = ids;
      example.labels = std::move(ids);
      if (!options.train_on_all_turns)
        std::fill_n(example.labels.begin(), std::min(prompt_tokens, example.labels.size()), kIgnoreIndex);
    } else {
      LT_CHECK(options.prompt_template != TemplateKind::alpaca,
               "dataset {}: conversational prompt/completion needs a chat template (prompt_template llama3, "
               "chatml, plain, a chat_template file, or auto with a model that has its own), not alpaca",
               path);
      if (!chat_encode)
        chat_encode = encode_options_for(options.prompt_template, tokenizer, options.cutoff_len,
                                         options.train_on_all_turns);
      std::vector<Segment> segments = conversational_segments(options.prompt_template, prompt, completion);
      example = encode_segments(tokenizer, segments, *chat_encode, &truncated);
    }
    add_record_example(dataset, std::move(example), truncated);
  });
  if (options.model_template) warn_missing_markers(*options.model_template, missing);
  finish_dataset(dataset, bad);
  return dataset;
}

}  // namespace lt::data
