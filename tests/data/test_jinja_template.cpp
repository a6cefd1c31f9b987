// The chat-template renderer against transformers' render_jinja_template (what apply_chat_template
// calls): every family's real template (tests/data/golden/chat_templates/) on 50 conversations each —
// system turns, multi-turn, generation prompts, contents with surrounding whitespace, newlines, quotes and
// non-ASCII; Gemma 3's template; Qwen3's thinking paths with enable_thinking — byte for byte, and
// raise_exception where transformers raises
// (tools/make_jinja_template_golden.py). Unsupported constructs are refused naming the offset.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/jinja.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

TEST(JinjaTemplate, RendersEveryFamilysTemplateAsTransformers) {
  const nlohmann::json golden =
      nlohmann::json::parse(test::read_text(lt::test::source_path("tests/data/golden/jinja_templates.json")));
  ASSERT_GE(golden["cases"].size(), 400u);
  std::map<std::string, int> per_template;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["template"];
    const std::string source =
        test::read_text(lt::test::source_path("tests/data/golden/chat_templates/" + name));
    nlohmann::json context{{"messages", c["messages"]},
                           {"add_generation_prompt", c["add_generation_prompt"]},
                           {"bos_token", golden["bos_token"]},
                           {"eos_token", golden["eos_token"]}};
    // Template variables beyond the usual ones (Qwen3's enable_thinking), passed to transformers alike.
    if (c.contains("extra")) context.update(c["extra"]);
    SCOPED_TRACE(name + " " + c["messages"].dump());
    if (c.contains("error")) {
      const std::string message = test::error_message([&] { render_jinja(source, context); });
      EXPECT_NE(message.find(c["error"].get<std::string>()), std::string::npos) << message;
    } else {
      EXPECT_EQ(render_jinja(source, context), c["expected"].get<std::string>());
    }
    ++per_template[name];
  }
  for (const char* family : {"llama2.jinja", "llama3.jinja", "qwen2.jinja", "mistral.jinja", "gemma.jinja",
                             "gemma3.jinja", "phi3.jinja"})
    EXPECT_EQ(per_template[family], 50) << family;
  EXPECT_EQ(per_template["qwen3.jinja"], 50 + 20) << "qwen3.jinja: 50 conversations and 20 thinking ones";
}

TEST(JinjaTemplate, WhitespaceControlLoopsAndExpressions) {
  const nlohmann::json ctx{{"xs", {1, 2, 3}}, {"s", "  a b  "}, {"d", {{"k", "v"}}}};
  EXPECT_EQ(render_jinja("{% for x in xs %}\n  {{ x }}{% if not loop.last %},{% endif %}\n{% endfor %}", ctx),
            "  1,  2,  3");
  EXPECT_EQ(render_jinja("[{{- s -}}] [{{ s | trim }}] [{{ s.strip() | upper }}]", ctx),
            "[  a b  ] [a b] [A B]");
  EXPECT_EQ(
      render_jinja("{{ xs | length }} {{ xs[-1] }} {{ xs[1:] }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 1 / 2 }}", ctx),
      "3 3 [2, 3] 3 2 0.5");
  EXPECT_EQ(
      render_jinja("{{ d.k }}{{ d.missing }}{{ 'x' if d.missing is defined else 'y' }}{{ d | tojson }}", ctx),
      "vy{\"k\": \"v\"}");
  EXPECT_EQ(render_jinja("{{ true }} {{ none }} {{ 'a' ~ 1 }} {{ 'k' in d }} {{ 2 in xs }}", ctx),
            "True None a1 True True");
  EXPECT_EQ(render_jinja("{% set n = 0 %}{% for x in xs %}{% set n = n + x %}{% endfor %}{{ n }}", ctx), "0");
  EXPECT_EQ(render_jinja("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}"
                         "{{ ns.n }}",
                         ctx),
            "6");
}

TEST(JinjaTemplate, UnsupportedConstructsAreRefusedNamingTheOffset) {
  const nlohmann::json ctx = nlohmann::json::object();
  EXPECT_NE(test::error_message([&] {
              render_jinja("ab{% macro m() %}{% endmacro %}", ctx);
            }).find("'macro' at offset 4 is not supported"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] { render_jinja("{{ x ", ctx); }).find("never closed"), std::string::npos);
  EXPECT_NE(test::error_message([&] { render_jinja("{% if x %}", ctx); }).find("'endif'"), std::string::npos);
  EXPECT_NE(test::error_message([&] { render_jinja("{{ x | frobnicate }}", ctx); }).find("'frobnicate'"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              render_jinja("{{ raise_exception('no system') }}", ctx);
            }).find("chat template raised: no system"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::data
