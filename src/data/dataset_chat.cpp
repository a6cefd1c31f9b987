#include "data/dataset_chat.h"

#include <fmt/format.h>

#include <set>

#include "core/error.h"
#include "data/encode_segments.h"
#include "data/model_template.h"

namespace lt::data {
namespace {

std::string map_role(const std::string& role, bool sharegpt, size_t turn) {
  if (role == "system" || role == "user" || role == "assistant") return role;
  if (sharegpt && role == "human") return "user";
  if (sharegpt && role == "gpt") return "assistant";
  throw RecordError(fmt::format("turn {}: unknown role '{}', expected {}", turn, role,
                                sharegpt ? "human, gpt or system" : "system, user or assistant"));
}

}  // namespace

std::vector<ChatMessage> parse_turns(const nlohmann::json& list, const char* list_key, bool sharegpt) {
  const char* role_key = sharegpt ? "from" : "role";
  const char* content_key = sharegpt ? "value" : "content";
  if (!list.is_array())
    throw RecordError(
        fmt::format("field '{}' is a JSON {}, expected a list of turns", list_key, list.type_name()));
  if (list.empty()) throw RecordError(fmt::format("empty conversation ('{}' has no turns)", list_key));
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& turn = list[i];
    if (!turn.is_object())
      throw RecordError(
          fmt::format("{} turn {}: expected a JSON object, found a JSON {}", list_key, i, turn.type_name()));
    std::string role, content;
    try {
      role = string_field(turn, role_key);
      content = string_field(turn, content_key);
    } catch (const RecordError& e) {
      throw RecordError(fmt::format("{} turn {}: {}", list_key, i, e.what()));
    }
    messages.push_back({map_role(role, sharegpt, i), std::move(content)});
  }
  return messages;
}

Dataset load_with_model_template(
    const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options,
    const std::function<std::vector<ChatMessage>(const nlohmann::json&)>& conversation_of) {
  const ModelTemplate& tmpl = *options.model_template;
  LT_CHECK(options.cutoff_len >= 2,
           "cutoff_len is {}, expected at least 2 (one token to read, one to predict)", options.cutoff_len);
  // As apply_chat_template(tokenize=True): the template writes BOS/EOS itself, nothing is added.
  EncodeOptions encode;
  encode.cutoff_len = options.cutoff_len;
  encode.train_on_inputs = options.train_on_all_turns;
  encode.spanning_token_is_target = true;
  Dataset dataset;
  dataset.source = path;
  BadRecords bad(options.on_bad_record);
  std::set<std::string> missing;
  for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
    std::vector<Segment> segments = render_with_model_template(tmpl, tokenizer, conversation_of(record));
    if (dataset.examples.size() < 64)  // the markers a template writes show in its first renderings
      for (const Segment& s : segments) collect_missing_markers(s.text, tokenizer, missing);
    bool truncated = false;
    Example example = encode_segments(tokenizer, segments, encode, &truncated);
    add_record_example(dataset, std::move(example), truncated);
  });
  warn_missing_markers(tmpl, missing);
  finish_dataset(dataset, bad);
  return dataset;
}

std::vector<ChatMessage> parse_conversation(const nlohmann::json& record) {
  require_object(record);
  bool sharegpt = !record.contains("messages") && record.contains("conversations");
  const char* list_key = sharegpt ? "conversations" : "messages";
  auto it = record.find(list_key);
  if (it == record.end()) throw RecordError("missing field 'messages' (or ShareGPT 'conversations')");
  return parse_turns(*it, list_key, sharegpt);
}

Dataset load_chat(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options) {
  if (options.model_template) return load_with_model_template(path, tokenizer, options, parse_conversation);
  LT_CHECK(
      options.prompt_template != TemplateKind::alpaca,
      "dataset {}: chat data needs a chat template: prompt_template llama3, chatml or plain, a chat_template "
      "file, or prompt_template auto with a model that has its own; not alpaca",
      path);
  EncodeOptions encode =
      encode_options_for(options.prompt_template, tokenizer, options.cutoff_len, options.train_on_all_turns);
  Dataset dataset;
  dataset.source = path;
  BadRecords bad(options.on_bad_record);
  for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
    std::vector<ChatMessage> messages = parse_conversation(record);
    std::vector<Segment> segments = render_chat(options.prompt_template, messages);
    bool truncated = false;
    Example example = encode_segments(tokenizer, segments, encode, &truncated);
    add_record_example(dataset, std::move(example), truncated);
  });
  finish_dataset(dataset, bad);
  return dataset;
}

}  // namespace lt::data
