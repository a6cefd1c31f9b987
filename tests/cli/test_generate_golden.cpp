// `leantune generate` against transformers' generate on the tiny real Llama (../shared stories260K-hf;
// tools/make_generate_golden.py): greedy continuations, with and without repetition_penalty, token for
// token from the text prompt; stop strings, a prompts file and streaming.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_test_util.h"
#include "data/tokenizer.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(GenerateGolden, GreedyWithRepetitionPenaltyEqualsTransformers) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  const nlohmann::json golden =
      read_json_file(test::source_path("tests/cli/golden/generate_stories260K.json"));
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt"];
    const double penalty = c["repetition_penalty"];
    SCOPED_TRACE(prompt + " penalty " + std::to_string(penalty));
    test::CliResult r = test::run_cli({"generate", "--model", model, "--prompt", prompt, "--max_new_tokens",
                                       std::to_string(c["max_new_tokens"].get<int>()), "--repetition_penalty",
                                       fmt::format("{}", penalty), "--precision", "fp64", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_ids"], c["prompt_ids"]);
    EXPECT_EQ(j["ids"], c["ids"]);
  }
}

TEST(GenerateGolden, StopStringsPromptsFileAndStreaming) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  test::TempDir dir;
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"generate", "--model",     model, "--max_new_tokens",
                                  "40",       "--precision", "fp64"};
    args.insert(args.end(), extra.begin(), extra.end());
    test::CliResult r = test::run_cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r;
  };
  const nlohmann::json full = nlohmann::json::parse(run({"--prompt", "Once upon a time", "--json"}).out);
  const std::string text = full["text"];
  const size_t at = text.find("Lily");
  ASSERT_NE(at, std::string::npos) << text;
  // --stop: generation ends at the token that completes the stop string; the text is cut before it.
  const nlohmann::json stopped =
      nlohmann::json::parse(run({"--prompt", "Once upon a time", "--stop", "Lily", "--json"}).out);
  EXPECT_EQ(stopped["text"], text.substr(0, at));
  EXPECT_LT(stopped["ids"].size(), full["ids"].size());
  const auto& ids = stopped["ids"];
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], full["ids"][i]);

  // --prompts_file: one JSON line per prompt, each equal to its own run.
  {
    std::ofstream f(dir.file("prompts.txt"));
    f << "Once upon a time\n\n{\"prompt\": \"The little dog\"}\n";
  }
  test::CliResult both = run({"--prompts_file", dir.file("prompts.txt"), "--json"});
  std::istringstream lines(both.out);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(nlohmann::json::parse(first), full);
  EXPECT_EQ(nlohmann::json::parse(second),
            nlohmann::json::parse(run({"--prompt", "The little dog", "--json"}).out));

  // --stream prints the same text (as it comes) as the plain run prints at the end.
  EXPECT_EQ(run({"--prompt", "Once upon a time", "--stream"}).out, run({"--prompt", "Once upon a time"}).out);

  // With a prompts file it streams the answers one after the other, one line each, and with a stop string
  // that spans tokens (" little", " girl") it holds back what may begin the stop string: nothing printed is
  // taken back, the lines equal the plain run's.
  const std::vector<std::string> stream_args{"--prompts_file", dir.file("prompts.txt"), "--stop",
                                             "little girl"};
  const std::string plain = run(stream_args).out;
  std::vector<std::string> streamed_args = stream_args;
  streamed_args.push_back("--stream");
  EXPECT_EQ(run(streamed_args).out, plain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), 2) << plain;
  EXPECT_EQ(plain.find("little gir"), std::string::npos) << plain;
  EXPECT_NE(text.find("little girl"), std::string::npos) << text;
}

// A prompts file decoded in batches (rows of one KV cache, left-padded) prints what decoding each prompt
// alone prints: prompts of different lengths, a stop string that ends some rows early, fp64 and fp32, a
// last batch that is not full.
TEST(GenerateGolden, BatchedPromptsFileEqualsEachPromptAlone) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  test::TempDir dir;
  const std::vector<std::string> prompts{"Once upon a time", "The little dog", "Lily",
                                         "One day, a girl named Sue went to the park with her mom"};
  {
    std::ofstream f(dir.file("prompts.txt"));
    for (const std::string& p : prompts) f << p << "\n";
  }
  for (const char* precision : {"fp64", "fp32"}) {
    SCOPED_TRACE(precision);
    auto run = [&](std::vector<std::string> extra) {
      std::vector<std::string> args{"generate", "--model",     model,     "--max_new_tokens",
                                    "24",       "--precision", precision, "--stop",
                                    "Lily",     "--json"};
      args.insert(args.end(), extra.begin(), extra.end());
      test::CliResult r = test::run_cli(args);
      EXPECT_EQ(r.code, 0) << r.err;
      return r.out;
    };
    std::string alone;
    for (const std::string& p : prompts) alone += run({"--prompt", p});
    EXPECT_EQ(run({"--prompts_file", dir.file("prompts.txt"), "--batch_size", "1"}), alone);
    EXPECT_EQ(run({"--prompts_file", dir.file("prompts.txt"), "--batch_size", "3"}), alone);
    EXPECT_EQ(run({"--prompts_file", dir.file("prompts.txt")}), alone);  // all four in one batch
  }
}

// A model with its own chat template (tokenizer_config.json): generate renders the prompt with it as one
// user turn plus the generation prompt and tokenizes the text with its special tokens, as
// apply_chat_template(add_generation_prompt=True, tokenize=True) does.
TEST(GenerateGolden, TheModelsOwnChatTemplateRendersThePrompt) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  test::TempDir dir;
  const std::string copy = dir.file("chat-model");
  std::filesystem::create_directories(copy);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    std::filesystem::copy_file(model + "/" + f, copy + "/" + f);
  const std::string chat_template =
      "{{ bos_token }}{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] | trim }}\n{% "
      "endfor %}"
      "{% if add_generation_prompt %}Assistant:{% endif %}";
  std::ofstream(copy + "/tokenizer_config.json") << nlohmann::json{{"chat_template", chat_template}}.dump();
  test::CliResult r = test::run_cli({"generate", "--model", copy, "--prompt", "  Tell me a story. ",
                                     "--max_new_tokens", "5", "--precision", "fp64", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(copy);
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(),
            tok->encode("<s>User: Tell me a story.\nAssistant:", /*allow_special=*/true));
  EXPECT_EQ(j["prompt_ids"][0], 1);  // "<s>" became the BOS token, not its characters
}

}  // namespace
}  // namespace lt::cli
