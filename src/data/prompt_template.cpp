#include "data/prompt_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace lt::data {
namespace {

constexpr std::string_view kAlpacaWithInput =
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n";
constexpr std::string_view kAlpacaNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes the "
    "request.\n\n";

void add(std::vector<Segment>& out, std::string text, bool is_prompt, bool allow_special) {
  if (!text.empty()) out.push_back({std::move(text), is_prompt, allow_special});
}

// Jinja's `trim` (Python str.strip()), which the Llama 3 Instruct template applies to every content.
std::string trimmed(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return "";
  size_t last = text.find_last_not_of(kSpace);
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

std::vector<ChatMessage> instruction_as_chat(std::string_view instruction, std::string_view input,
                                             std::string_view output) {
  std::string user(instruction);
  if (!input.empty()) user += "\n\n" + std::string(input);
  return {{"user", std::move(user)}, {"assistant", std::string(output)}};
}

TemplateKind template_from_name(std::string_view name) {
  if (name == "alpaca") return TemplateKind::alpaca;
  if (name == "llama3" || name == "llama-3" || name == "llama3_chat") return TemplateKind::llama3;
  if (name == "chatml") return TemplateKind::chatml;
  if (name == "plain" || name == "none") return TemplateKind::plain;
  LT_FAIL("unknown prompt template '{}': expected one of alpaca, llama3, chatml, plain", name);
}

const char* template_name(TemplateKind kind) {
  switch (kind) {
    case TemplateKind::alpaca:
      return "alpaca";
    case TemplateKind::llama3:
      return "llama3";
    case TemplateKind::chatml:
      return "chatml";
    case TemplateKind::plain:
      return "plain";
  }
  return "?";
}

TemplatePolicy template_policy(TemplateKind kind) {
  switch (kind) {
    case TemplateKind::alpaca:
      return {.force_bos = false, .append_eos = true, .spanning_token_is_target = false};
    case TemplateKind::llama3:
      return {.force_bos = true, .append_eos = false, .spanning_token_is_target = true};
    case TemplateKind::chatml:
      return {.force_bos = false, .append_eos = false, .spanning_token_is_target = true};
    case TemplateKind::plain:
      return {.force_bos = false, .append_eos = true, .spanning_token_is_target = false};
  }
  return {};
}

std::string alpaca_prompt(std::string_view instruction, std::string_view input) {
  std::string out;
  if (!input.empty()) {
    out.append(kAlpacaWithInput).append("### Instruction:\n").append(instruction);
    out.append("\n\n### Input:\n").append(input).append("\n\n### Response:\n");
  } else {
    out.append(kAlpacaNoInput).append("### Instruction:\n").append(instruction).append("\n\n### Response:\n");
  }
  return out;
}

std::vector<Segment> render_instruction(TemplateKind kind, std::string_view instruction,
                                        std::string_view input, std::string_view output) {
  std::vector<Segment> out;
  switch (kind) {
    case TemplateKind::alpaca:
      // The template text holds no special-token strings, so the whole prompt is encoded as user text:
      // an instruction containing "<|eot_id|>" stays plain bytes.
      add(out, alpaca_prompt(instruction, input), true, false);
      add(out, std::string(output), false, false);
      return out;
    case TemplateKind::plain: {
      std::string prompt(instruction);
      prompt += "\n";
      if (!input.empty()) prompt += std::string(input) + "\n";
      add(out, std::move(prompt), true, false);
      add(out, std::string(output), false, false);
      return out;
    }
    case TemplateKind::llama3:
    case TemplateKind::chatml:
      return render_chat(kind, instruction_as_chat(instruction, input, output));
  }
  return out;
}

std::vector<Segment> render_chat(TemplateKind kind, const std::vector<ChatMessage>& messages) {
  std::vector<Segment> out;
  for (const ChatMessage& m : messages) {
    bool target = m.role == "assistant";
    switch (kind) {
      case TemplateKind::llama3:
        add(out, "<|start_header_id|>", true, true);
        add(out, m.role, true, false);
        add(out, "<|end_header_id|>", true, true);
        add(out, "\n\n", true, false);
        add(out, trimmed(m.content), !target, false);
        add(out, "<|eot_id|>", !target, true);
        break;
      case TemplateKind::chatml:
        add(out, "<|im_start|>", true, true);
        add(out, m.role + "\n", true, false);
        add(out, m.content, !target, false);
        add(out, "<|im_end|>", !target, true);
        add(out, "\n", true, false);
        break;
      case TemplateKind::plain:
        add(out, m.content, !target, false);
        add(out, "\n", !target, false);
        break;
      case TemplateKind::alpaca:
        LT_FAIL(
            "prompt template 'alpaca' renders instruction records ({{instruction, input, output}}), not "
            "conversations: choose llama3, chatml or plain for chat data");
    }
  }
  return out;
}

TemplateKind template_from_chat_template(std::string_view chat_template, const std::string& source) {
  auto has = [&](std::string_view s) { return chat_template.find(s) != std::string_view::npos; };
  if (has("<|start_header_id|>") && has("<|eot_id|>")) return TemplateKind::llama3;
  if (has("<|im_start|>") && has("<|im_end|>")) return TemplateKind::chatml;
  LT_FAIL(
      "{}: chat_template is neither Llama 3 (<|start_header_id|> ... <|eot_id|>) nor ChatML (<|im_start|> "
      "... "
      "<|im_end|>): choose a prompt template by name (alpaca, llama3, chatml, plain)",
      source);
}

TemplateKind detect_template(const std::string& model_dir_or_file) {
  namespace fs = std::filesystem;
  fs::path path = model_dir_or_file;
  if (fs::is_directory(path)) path /= "tokenizer_config.json";
  if (!fs::exists(path)) return TemplateKind::alpaca;
  const nlohmann::json config = read_json(path.string(), kMaxTokenizerJsonBytes);
  LT_CHECK(config.is_object(), "{}: expected a JSON object, found {}", path.string(), config.type_name());
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return TemplateKind::alpaca;
  if (it->is_string()) return template_from_chat_template(it->get<std::string>(), path.string());
  if (it->is_array() && !it->empty()) {
    const nlohmann::json* chosen = &(*it)[0];
    for (const auto& entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default") chosen = &entry;
    if (chosen->is_object() && chosen->contains("template") && (*chosen)["template"].is_string())
      return template_from_chat_template((*chosen)["template"].get<std::string>(), path.string());
  }
  LT_FAIL("{}: chat_template must be a string or a list of {{name, template}} objects, found {}",
          path.string(), it->dump().substr(0, 80));
}

}  // namespace lt::data
