// Chat templates: the subset of Jinja2 that Hugging Face chat templates use, rendered as transformers'
// apply_chat_template renders them (an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
// raise_exception, tojson, strftime_now absent).
//
// Supported: text; {{ expr }}; {% if / elif / else / endif %}; {% for x in expr %} (also `for a, b in`,
// `loop.index0 / index / first / last / length / revindex / revindex0`, a trailing `if` filter, {% else %});
// {% set name = expr %}, {% set ns.attr = expr %} with namespace(...); {# comments #}; whitespace control
// (-) and transformers' trim_blocks / lstrip_blocks; {% generation %} ... {% endgeneration %} (transformers'
// assistant-mask markers: no output of their own, their ranges are reported). Expressions: string, integer,
// float, true/false/none literals, lists, dicts, names, `.attr`, `[key]`, slices `[a:b]` and `[a:b:step]`, calls, `|` filters
// (trim, length, count, upper, lower, tojson, string, int, first, last, join, default/d, list, items,
// capitalize, title, replace, selectattr/rejectattr with equalto), `is` tests (defined, undefined, none,
// string, number, mapping, iterable, sequence, boolean, true, false, even, odd, equalto), `not`, `and`, `or`,
// comparisons, `in`, `not in`, `+ - * / // %`, `~`, `x if c else y`, and the string and dict methods
// templates call (strip, lstrip, rstrip, startswith, endswith, split, upper, lower, replace, title, items,
// get, keys, values). Anything else is an error naming the template position — never a silent difference.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lt::data {

namespace jinja {
struct Node;
}

// A rendering and where its {% generation %} blocks put their output: the [begin, end) byte ranges of
// `text`, in order (transformers' assistant-mask spans; a block rendered twice gives two ranges).
struct RenderedTemplate {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation;
};

// A template parsed once and rendered many times (one rendering per training record).
class JinjaTemplate {
 public:
  explicit JinjaTemplate(std::string_view source);  // parse errors: lt::Error naming the offset
  RenderedTemplate render(const nlohmann::json& context) const;
  bool has_generation_blocks() const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> body_;
};

// Renders `source` with the variables of `context` (a JSON object: messages, add_generation_prompt,
// bos_token, eos_token, ...). raise_exception(msg) in the template throws lt::Error with msg.
std::string render_jinja(std::string_view source, const nlohmann::json& context);

// A model directory's own chat template, as transformers finds it: chat_template.jinja, else
// tokenizer_config.json's `chat_template` (a string, or HF's list of {name, template}: the "default"
// one); nullopt when it has none.
std::optional<std::string> model_chat_template(const std::string& model_dir);

}  // namespace lt::data
