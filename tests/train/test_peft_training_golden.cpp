// LoRA training parity with PEFT + torch (tools/make_peft_training_golden.py): starting from the same
// initial adapter on the same base, leantune's trainer (init_adapter, no shuffle, micro-batches with
// accumulation, global-norm clipping, AdamW with weight decay on every adapter tensor, linear schedule with
// warmup) gives PEFT's per-step losses, gradient norms and final adapter weights: float64 to 1e-9
// relative, float32 to 1e-4. Cases: a Llama (GQA, all seven projections, rank and alpha patterns), a
// Qwen2 (q/k/v biases, tied embeddings, rsLoRA) and a BLOOM (4 steps, tools/make_bloom_golden.py: ALiBi, the
// fused query_key_value's adapter, float64 to 1e-10), and QLoRA: `bits: 4` over bitsandbytes' own 4-bit
// checkpoint of the Llama's base (tests/model/golden/qlora_llama/base4) against PEFT over bitsandbytes'
// dequantized projections, float64 to 1e-9. In float32 this trajectory is ill-conditioned (a step-3
// gradient of norm 3.7 after two clipped steps): PEFT's own float32 run of it is 1.6e-5 (loss), 2.0e-3 (grad
// norm) and 4.4e-5 (adapter) from the float64 golden, against 2e-7, 9e-6 and 2e-6 on the 16-bit Llama case;
// leantune's float32 run shows the same factor (1.0e-4, 1.5e-2, 2.3e-4): its bounds are 3e-4, 2e-2, 1e-3.
// QLoRA as people start it, from a fresh PEFT adapter (B = 0; tests/train/golden/peft_training/
// qlora_fresh_adapter), 4 steps at learning rate 1e-3, is a well-conditioned trajectory: float64 to 1e-9
// (qlora_fresh); leantune's float32 against that float64 truth, and against PEFT's own float32 run over
// transformers + bitsandbytes' Linear4bit with float32 compute (qlora_fresh_float32): losses, grad norms and
// the whole adapter to 1e-5. Per tensor, the most sensitive one (a lora_B, small since it starts at zero,
// whose entries' float32 cancellation AdamW turns into step directions) is 5e-6 from the truth in PEFT's
// float32 run and 5e-6 to 8e-6 in leantune's (by BLAS kernel), in opposite directions: bounds 1.5e-5 and
// 2e-5. QLoRA on the fused families, float64 to 1e-10: a BLOOM (qlora_bloom: the fused query_key_value
// quantized whole in its per-head interleaved row order, ALiBi) and a Phi-3 (qlora_phi3: fused qkv_proj and
// gate_up_proj), over bitsandbytes' own 4-bit checkpoints of peft_bloom's and peft_phi3's bases; leantune's
// float32 runs of them to 1e-4 against that float64 truth and against PEFT's own float32 run over
// bitsandbytes' Linear4bit (qlora_*_float32; worst seen: grad norms 3e-5, adapters 4e-6, as the 16-bit
// BLOOM's float32 case). The Phi-3 trajectory (learning rate 2e-2 after warmup, as qlora_llama's) is the
// least well conditioned of the two: PEFT's own float32 run is 6.2e-5 from the float64 truth in the last
// step's grad norm, and leantune's float32 run is 1e-4 from it with OpenBLAS's Haswell and Prescott kernels
// (below that with others): its grad norms against the truth are held to 3e-4, five times the reference's
// own float32 error, as qlora_llama's bounds are. qlora_*_gentle: the same at learning rate 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

struct Case {
  const char* name;
  const char* precision;
  double tolerance;              // step losses (and, unless given below, grad norms and adapters)
  double norm_tolerance = 0;     // gradient norms, when not `tolerance`
  double adapter_tolerance = 0;  // final adapters, when not `tolerance`
};

class PeftTrainingGolden : public ::testing::TestWithParam<Case> {};

TEST_P(PeftTrainingGolden, LossesAndFinalAdapterMatchPeft) {
  const Case& k = GetParam();
  const std::string golden_dir = test::source_path("tests/train/golden/peft_training");
  nlohmann::json g;
  std::ifstream(golden_dir + "/" + k.name + ".json") >> g;
  test::TempDir dir;

  TrainConfig c;
  c.base_model = test::source_path(g["base_model"].get<std::string>());
  c.init_adapter = test::source_path(g["init_adapter"].get<std::string>());
  c.data_path = golden_dir + "/data.jsonl";
  c.output_dir = dir.file("out");
  c.finetune = lt::model::Finetune::Lora;
  c.lora_dropout = 0;
  c.device = lt::Device::CPU;
  apply_overrides(c, {"--precision", k.precision});
  c.shuffle = false;
  c.val_set_size = 0;
  test::apply_golden_schedule(c, g);
  if (g.contains("bits")) c.bits = g["bits"];  // QLoRA: base_model is bitsandbytes' 4-bit checkpoint
  c.save_steps = 0;
  c.eval_steps = 0;
  c.logging_steps = 1;
  validate(c);

  std::vector<double> grad_norms, lrs;
  TrainerHooks hooks{.quiet = true};
  hooks.on_step = [&](const StepMetrics& m) {
    grad_norms.push_back(m.grad_norm);
    lrs.push_back(m.lr);
  };
  TrainResult r = run_training(c, hooks);

  const auto losses = g["losses"].get<std::vector<double>>();
  const auto norms = g["grad_norms"].get<std::vector<double>>();
  const auto peft_lrs = g["learning_rates"].get<std::vector<double>>();
  ASSERT_EQ(r.losses.size(), losses.size());
  double worst_loss = 0, worst_norm = 0, worst_tensor = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    const double dl = std::abs(r.losses[i] - losses[i]) / std::abs(losses[i]);
    const double dn = std::abs(grad_norms[i] - norms[i]) / std::abs(norms[i]);
    EXPECT_LE(dl, k.tolerance) << "step " << i + 1 << ": " << r.losses[i] << " vs PEFT " << losses[i];
    EXPECT_LE(dn, k.norm_tolerance > 0 ? k.norm_tolerance : k.tolerance)
        << "step " << i + 1 << " grad norm: " << grad_norms[i] << " vs " << norms[i];
    EXPECT_NEAR(lrs[i], peft_lrs[i], 1e-15) << "step " << i + 1;
    worst_loss = std::max(worst_loss, dl);
    worst_norm = std::max(worst_norm, dn);
  }
  auto expected = test::read_safetensors_f64(golden_dir + "/" + k.name + "_final.safetensors");
  auto got = test::read_adapter_f64(c.output_dir);
  auto initial = test::read_adapter_f64(c.init_adapter);
  ASSERT_EQ(got.size(), expected.size());
  double adapter_scale = 0, adapter_diff = 0;  // the adapter as one vector: max |got - PEFT| / max |PEFT|
  for (const auto& [name, v] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    for (double x : v) adapter_scale = std::max(adapter_scale, std::abs(x));
    adapter_diff = std::max(adapter_diff, test::max_abs_diff(got.at(name), v));
    const double d = test::max_rel_diff(got.at(name), v);
    EXPECT_LE(d, k.adapter_tolerance > 0 ? k.adapter_tolerance : k.tolerance) << name;
    EXPECT_GT(test::max_rel_diff(initial.at(name), v), 100 * k.tolerance) << name << " did not train";
    worst_tensor = std::max(worst_tensor, d);
  }
  EXPECT_LE(adapter_diff / adapter_scale, k.tolerance) << "the whole adapter";
  std::printf(
      "[peft-training %s %s] worst relative error: step loss %.3g, grad norm %.3g, adapter tensor %.3g, "
      "whole adapter %.3g\n",
      k.name, k.precision, worst_loss, worst_norm, worst_tensor, adapter_diff / adapter_scale);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PeftTrainingGolden,
    ::testing::Values(Case{"llama", "fp64", 1e-9}, Case{"llama", "fp32", 1e-4}, Case{"qwen2", "fp64", 1e-9},
                      Case{"qwen2", "fp32", 1e-4},
                      // Gemma 2 in float64 only: its float32 run drifts ~1% from torch's float64 by step 4
                      // (AdamW turns the float32 rounding of near-zero gradient entries, amplified by the
                      // post-norms, into whole steps), which no tolerance would honestly cover.
                      Case{"gemma2", "fp64", 1e-10}, Case{"gemma3", "fp64", 1e-10},
                      Case{"bloom", "fp64", 1e-10}, Case{"bloom", "fp32", 1e-4},
                      Case{"qlora_llama", "fp64", 1e-9}, Case{"qlora_llama", "fp32", 3e-4, 2e-2, 1e-3},
                      Case{"qlora_fresh", "fp64", 1e-9}, Case{"qlora_fresh", "fp32", 1e-5, 1e-5, 1.5e-5},
                      Case{"qlora_fresh_float32", "fp32", 1e-5, 1e-5, 2e-5},
                      // QLoRA on fused projections (tools/make_qlora_fused_golden.py): bitsandbytes' one
                      // 4-bit weight per fused module, one adapter on its output.
                      Case{"qlora_bloom", "fp64", 1e-10}, Case{"qlora_phi3", "fp64", 1e-10},
                      Case{"qlora_bloom", "fp32", 1e-4}, Case{"qlora_phi3", "fp32", 1e-4, 3e-4},
                      Case{"qlora_bloom_float32", "fp32", 1e-4}, Case{"qlora_phi3_float32", "fp32", 1e-4},
                      // The same at learning rate 1e-3, the trajectory the CUDA bf16 check follows.
                      Case{"qlora_bloom_gentle", "fp64", 1e-10}, Case{"qlora_phi3_gentle", "fp64", 1e-10}),
    [](const auto& info) { return std::string(info.param.name) + "_" + info.param.precision; });

}  // namespace
}  // namespace lt::train
