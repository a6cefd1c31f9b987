// Chat data: JSONL or a JSON array of conversations, either
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}     (TRL / axolotl), or
//   {"conversations": [{"from": "system"|"human"|"gpt", "value": "..."}, ...]}     (ShareGPT; "user" and
//   "assistant" are accepted as `from` too).
// Rendered by the model's own Jinja template (model_template.h) or a built-in one (llama3, chatml, plain);
// only assistant turns (content and end-of-turn marker) carry labels unless train_on_all_turns. Bad records:
// missing messages/conversations, not a list, an empty list, a turn that is not an object, an unknown role, a
// content/value that is not a string.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

// A list of turns (the value of `list_key`; ShareGPT's from/value when `sharegpt`) with roles mapped to
// system/user/assistant; throws RecordError naming the list, the turn and the field when malformed.
std::vector<ChatMessage> parse_turns(const nlohmann::json& list, const char* list_key, bool sharegpt);
// The record's turns with roles mapped to system/user/assistant; throws RecordError when malformed.
std::vector<ChatMessage> parse_conversation(const nlohmann::json& record);

// Records (chat, or instruction records as one user and one assistant turn) rendered by
// options.model_template (data/model_template.h); `conversation_of` turns a record into its turns.
Dataset load_with_model_template(
    const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options,
    const std::function<std::vector<ChatMessage>(const nlohmann::json&)>& conversation_of);

Dataset load_chat(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options);

}  // namespace lt::data
