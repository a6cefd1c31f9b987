// A tokenizer whose ids reach past the model's embedding rows is refused when the model's tokenizer is
// loaded (issue 15, class 6), not at the first embedding lookup of a run.
#include <gtest/gtest.h>

#include <fstream>

#include "data/tokenizer.h"
#include "support/test_support.h"
#include "train/run_setup.h"

namespace lt::train {
namespace {

TEST(ModelTokenizerFit, TokenizerLargerThanTheVocabularyIsRefusedAtLoad) {
  test::TempDir dir;
  std::ofstream(dir.file("tokenizer.json"))
      << R"({"added_tokens": [{"id": 3, "content": "<s>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
  EXPECT_EQ(load_model_tokenizer(dir.path(), true, 4)->vocab_size(), 4);
  test::expect_error_mentions([&] { load_model_tokenizer(dir.path(), true, 3); },
                              {dir.path(), "4 tokens", "vocab_size is 3"});
}

}  // namespace
}  // namespace lt::train
