// What BLOOM support does not cover is refused by name, before anything runs: QLoRA on a fused
// query_key_value whose q/k/v rows start inside a quantization block, the residual after the LayerNorm,
// dropout in the base model. cuDNN's refusal of ALiBi is
// an op test (tests/ops/test_attention_alibi.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/qlora_model.h"

namespace lt {
namespace {

const std::string kGolden = "tests/model/golden/bloom";

nlohmann::json golden_config() {
  nlohmann::json j;
  std::ifstream(test::source_path(kGolden + "/config.json")) >> j;
  return j;
}

void expect_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// QLoRA dequantizes each of q, k and v alone from the fused 4-bit weight, run by run of whole blocks: a
// second head of 10-row parts of 20 values starts its q rows 600 values in, inside a block. (The golden's
// 8-row heads of 24 values start every run on a block boundary: tests/train/test_peft_training_golden.cpp
// trains them.)
TEST(BloomRefusals, QloraOnAFusedQueryKeyValueWhosePartsSplitABlock) {
  nlohmann::json j = golden_config();
  j["hidden_size"] = 20;
  j["n_head"] = 2;
  test::TempDir dir;
  std::ofstream(dir.file("config.json")) << j.dump();
  expect_error(
      [&] {
        train::load_qlora_model(ctx, dir.path(), train::QloraOptions{}, DType::F32, /*random_init=*/true, 1,
                                Device::CPU);
      },
      {"transformer.h.0.self_attention.query_key_value.weight", "(60 x 20)", "q rows from row 30",
       "quantization block"});
}

TEST(BloomRefusals, ConfigKeysThatChangeTheMath) {
  nlohmann::json post = golden_config();
  post["apply_residual_connection_post_layernorm"] = true;
  expect_error([&] { model::parse_model_config(post, "m/config.json"); },
               {"m/config.json", "'apply_residual_connection_post_layernorm'", "not supported"});
  nlohmann::json dropout = golden_config();
  dropout["hidden_dropout"] = 0.1;
  expect_error([&] { model::parse_model_config(dropout, "m/config.json"); }, {"'hidden_dropout'", "0.1"});
  nlohmann::json no_heads = golden_config();
  no_heads.erase("n_head");
  expect_error([&] { model::parse_model_config(no_heads, "m/config.json"); }, {"'n_head'", "missing"});
  EXPECT_NO_THROW(model::parse_model_config(golden_config(), "m/config.json"));
}

}  // namespace
}  // namespace lt
