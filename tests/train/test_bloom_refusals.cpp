// What BLOOM support does not cover is refused by name, before anything runs: QLoRA on the fused
// query_key_value, the residual after the LayerNorm, dropout in the base model. cuDNN's refusal of ALiBi is
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

TEST(BloomRefusals, QloraOnTheFusedQueryKeyValue) {
  expect_error(
      [] {
        train::load_qlora_model(ctx, test::source_path(kGolden), train::QloraOptions{}, DType::F32, false, 1,
                                Device::CPU);
      },
      {"QLoRA (bits 4)", "BloomForCausalLM", "self_attention.query_key_value", "not supported yet"});
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
