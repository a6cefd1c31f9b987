// The first memory estimate: the byte counts are worked out by hand for Llama-3.1-8B below, then the
// estimate's structure is checked (scaling in tokens, LoRA vs full, fp32 compute).
#include <gtest/gtest.h>

#include "model/memory_estimate.h"
#include "model/param_counts.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using test::expect_error_mentions;

ModelConfig llama31() {
  return load_model_config(test::model_fixture("Llama-3.1-8B"));
}

TEST(MemoryEstimate, FullFineTuneLlama31ByHand) {
  MemoryEstimateSettings s;
  s.mode = TrainingMode::Full;
  s.batch = 1;
  s.seq_len = 2048;
  s.compute_bytes = 2;
  MemoryEstimate e = estimate_training_memory(llama31(), s);
  const int64_t P = 8'030'261'248, N = 2048;
  EXPECT_EQ(e.params, P);
  EXPECT_EQ(e.trainable_params, P);
  EXPECT_EQ(e.weights, 2 * P);
  EXPECT_EQ(e.master_weights, 4 * P);
  EXPECT_EQ(e.gradients, 4 * P);
  EXPECT_EQ(e.optimizer_state, 8 * P);  // AdamW m and v in fp32
  // Per token and layer, bf16: x, attn_norm, x_mid, ffn_norm 4 x 4096; q, attn_out 2 x 4096; k, v 2 x 1024;
  // gate, up, h 3 x 14336 -> 69,632 elements = 139,264 B; fp32 stats: 2 rstd + 32 lse = 136 B.
  EXPECT_EQ(e.activations_per_layer, N * 139'400);
  EXPECT_EQ(e.activations, 32 * N * 139'400 + N * (2 * 4096 * 2 + 4));
  EXPECT_EQ(e.logits, N * 128'256 * 4);
  EXPECT_EQ(e.logits_grad, e.logits);
  EXPECT_EQ(e.total(), e.weights + e.master_weights + e.gradients + e.optimizer_state + e.activations +
                           e.logits + e.logits_grad);
}

// optimizer_in_backward: gradients for the model-level weights and one layer. One Llama-3.1-8B layer by hand:
// q, o 2 x 4096^2; k, v 2 x 1024 x 4096; MLP 3 x 4096 x 14336; two norms 2 x 4096 = 218,112,000 parameters.
TEST(MemoryEstimate, OptimizerInBackwardHoldsOneLayersGradients) {
  MemoryEstimateSettings s;
  s.mode = TrainingMode::Full;
  const MemoryEstimate plain = estimate_training_memory(llama31(), s);
  s.optimizer_in_backward = true;
  const MemoryEstimate e = estimate_training_memory(llama31(), s);
  const int64_t P = 8'030'261'248, layer = 218'112'000;
  EXPECT_EQ(e.gradients, 4 * (P - 31 * layer));
  EXPECT_EQ(plain.total() - e.total(), 4 * 31 * layer);
  EXPECT_EQ(e.optimizer_state, plain.optimizer_state);
  s.mode = TrainingMode::Lora;
  expect_error_mentions([&] { estimate_training_memory(llama31(), s); }, {"optimizer in backward", "LoRA"});
}

TEST(MemoryEstimate, LoraLlama31) {
  MemoryEstimateSettings s;
  s.mode = TrainingMode::Lora;
  s.seq_len = 2048;
  s.lora_rank = 16;  // all seven projections by default
  MemoryEstimate e = estimate_training_memory(llama31(), s);
  const int64_t P = 8'030'261'248, A = 41'943'040, N = 2048;
  EXPECT_EQ(e.trainable_params, A);
  EXPECT_EQ(e.params, P + A);
  EXPECT_EQ(e.weights, 2 * (P + A));
  EXPECT_EQ(e.master_weights, 4 * A);
  EXPECT_EQ(e.gradients, 4 * A);
  EXPECT_EQ(e.optimizer_state, 8 * A);
  EXPECT_EQ(e.activations_per_layer, N * (139'400 + 7 * 16 * 2));  // + A x (N, r) per adapted module

  MemoryEstimateSettings full = s;
  full.mode = TrainingMode::Full;
  EXPECT_LT(e.total(), estimate_training_memory(llama31(), full).total());
}

TEST(MemoryEstimate, ActivationsAndLogitsScaleWithTokens) {
  MemoryEstimateSettings a;
  a.batch = 1;
  a.seq_len = 4096;
  MemoryEstimateSettings b = a;
  b.batch = 4;
  b.seq_len = 1024;
  MemoryEstimateSettings half = a;
  half.seq_len = 2048;
  ModelConfig cfg = load_model_config(test::model_fixture("Qwen2.5-1.5B"));
  MemoryEstimate ea = estimate_training_memory(cfg, a), eb = estimate_training_memory(cfg, b);
  MemoryEstimate eh = estimate_training_memory(cfg, half);
  EXPECT_EQ(ea.activations, eb.activations);
  EXPECT_EQ(ea.logits, eb.logits);
  EXPECT_EQ(ea.activations, 2 * eh.activations);
  EXPECT_EQ(ea.logits, 2 * eh.logits);
  EXPECT_EQ(ea.weights, eh.weights);  // parameters do not depend on the tokens
}

TEST(MemoryEstimate, Fp32ComputeHasNoSeparateMaster) {
  MemoryEstimateSettings s;
  s.compute_bytes = 4;
  s.seq_len = 128;
  ModelConfig cfg = load_model_config(test::model_fixture("Llama-3.2-1B"));
  MemoryEstimate e = estimate_training_memory(cfg, s);
  EXPECT_EQ(e.master_weights, 0);
  EXPECT_EQ(e.weights, int64_t{4} * 1'235'814'400);
}

TEST(MemoryEstimate, RowsSumToTotal) {
  MemoryEstimate e = estimate_training_memory(llama31(), MemoryEstimateSettings{});
  auto rows = e.rows();
  ASSERT_EQ(rows.back().first, "total");
  int64_t sum = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i) sum += rows[i].second;
  EXPECT_EQ(sum, e.total());
}

TEST(MemoryEstimate, Refusals) {
  ModelConfig cfg = llama31();
  MemoryEstimateSettings s;
  s.batch = 0;
  expect_error_mentions([&] { estimate_training_memory(cfg, s); }, {"batch 0", "positive"});
  s = {};
  s.compute_bytes = 3;
  expect_error_mentions([&] { estimate_training_memory(cfg, s); }, {"3 bytes", "2 (bf16/fp16) or 4"});
  s = {};
  s.mode = TrainingMode::Lora;
  s.lora_targets = {"lm_head"};
  expect_error_mentions([&] { estimate_training_memory(cfg, s); }, {"'lm_head'"});
}

}  // namespace
}  // namespace lt::model
