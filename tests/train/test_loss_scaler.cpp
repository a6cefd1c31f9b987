// fp16's dynamic loss scaler: skip and halve on non-finite gradients, double after a run of finite steps,
// refuse to fall below 1; unscaling divides the gradients and clips by the true norm exactly as
// clip_grad_norm does on unscaled gradients; the loss-scale keys exist only for fp16.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_context.h"
#include "support/test_support.h"
#include "train/grad_clip.h"
#include "train/loss_scaler.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {
namespace {

TEST(LossScaler, SkipsHalvesAndGrows) {
  LossScaler s(LossScalerOptions{.initial_scale = 1024, .growth_interval = 3});
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_TRUE(s.update(true, 1));
  EXPECT_TRUE(s.update(true, 2));
  EXPECT_EQ(s.scale(), 1024) << "not yet growth_interval finite steps";
  EXPECT_FALSE(s.update(false, 3)) << "a non-finite step is skipped";
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.good_steps(), 0) << "a skip restarts the count";
  EXPECT_TRUE(s.update(true, 4));
  EXPECT_TRUE(s.update(true, 5));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.update(true, 6));
  EXPECT_EQ(s.scale(), 1024) << "doubled after 3 finite steps in a row";
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(LossScaler, StopsAtTheMaximumAndRefusesToFallBelowOne) {
  LossScaler s(LossScalerOptions{.initial_scale = 4, .growth_interval = 1, .max_scale = 8});
  s.update(true, 1);
  s.update(true, 2);
  s.update(true, 3);
  EXPECT_EQ(s.scale(), 8);
  EXPECT_FALSE(s.update(false, 4));  // 4
  EXPECT_FALSE(s.update(false, 5));  // 2
  EXPECT_FALSE(s.update(false, 6));  // 1
  test::expect_error_mentions([&] { s.update(false, 7); }, {"step 7", "loss scale 1", "bf16"});
}

TEST(LossScaler, RestoresACheckpointedState) {
  LossScaler s(LossScalerOptions{.initial_scale = 65536, .growth_interval = 2});
  s.restore(256, 1);
  EXPECT_EQ(s.scale(), 256);
  s.update(true, 10);
  EXPECT_EQ(s.scale(), 512) << "the restored count continues";
  test::expect_error_mentions([&] { s.restore(0.5, 0); }, {"loss scaler", "0.5"});
}

TEST(LossScaler, UnscaleAndClipEqualsClippingTheUnscaledGradients) {
  const double scale = 4096;
  std::vector<float> a = {0.5f, -2.0f, 3.0f}, b = {1.0f, 0.25f};
  std::vector<float> sa, sb;
  for (float x : a) sa.push_back(x * float(scale));
  for (float x : b) sb.push_back(x * float(scale));
  for (double max_norm : {0.0, 100.0, 1.0}) {
    std::vector<float> ra = a, rb = b, ta = sa, tb = sb;
    const std::vector<Tensor> ref = {Tensor(ra.data(), DType::F32, {3}), Tensor(rb.data(), DType::F32, {2})};
    const std::vector<Tensor> got = {Tensor(ta.data(), DType::F32, {3}), Tensor(tb.data(), DType::F32, {2})};
    const double want = clip_grad_norm(ctx, ref, max_norm);
    EXPECT_DOUBLE_EQ(unscale_and_clip(ctx, got, scale, max_norm), want) << "max_norm " << max_norm;
    for (size_t i = 0; i < ta.size(); ++i) EXPECT_FLOAT_EQ(ta[i], ra[i]) << "max_norm " << max_norm;
    for (size_t i = 0; i < tb.size(); ++i) EXPECT_FLOAT_EQ(tb[i], rb[i]) << "max_norm " << max_norm;
  }
}

TEST(LossScaler, NonFiniteGradientsAreReportedAndLeftAlone) {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  const std::vector<Tensor> t = {Tensor(g.data(), DType::F32, {3})};
  EXPECT_FALSE(std::isfinite(unscale_and_clip(ctx, t, 1024, 1.0)));
  EXPECT_EQ(g[0], 1.0f) << "a skipped step's gradients are not touched";
  g[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(std::isfinite(unscale_and_clip(ctx, t, 1024, 0.0)));
}

TEST(LossScaler, KeysOnlyForFp16AndFp16KeepsMasters) {
  TrainConfig c;
  // std::string, not a literal: GCC 12's -Wrestrict misfires on the inlined char* assignment here.
  c.base_model = std::string("m");
  c.data_path = std::string("d");
  c.device = lt::Device::CUDA;
  c.precision = lt::train::Precision::Bf16;
  c.loss_scale_init = 1024;
  test::expect_error_mentions([&] { validate(c); }, {"loss_scale_init", "bf16", "fp16"});
  c.precision = lt::train::Precision::Fp16;
  validate(c);
  c.loss_scale_init = 0.5;
  test::expect_error_mentions([&] { validate(c); }, {"loss_scale_init", "0.5"});
  c.loss_scale_init = 1024;
  c.loss_scale_growth_interval = 0;
  test::expect_error_mentions([&] { validate(c); }, {"loss_scale_growth_interval"});
  c.loss_scale_growth_interval = 10;

  c.finetune = lt::model::Finetune::Full;
  c.lora_r = TrainConfig{}.lora_r;
  EXPECT_TRUE(keeps_master_weights(c)) << "fp16 full fine-tuning always keeps f32 masters";
  c.precision = lt::train::Precision::Bf16;
  c.loss_scale_init = TrainConfig{}.loss_scale_init;
  c.loss_scale_growth_interval = TrainConfig{}.loss_scale_growth_interval;
  EXPECT_FALSE(keeps_master_weights(c));
  c.master_weights = true;
  EXPECT_TRUE(keeps_master_weights(c));
  EXPECT_EQ(compute_dtype("fp16"), DType::F16);
  EXPECT_EQ(master_dtype(DType::F16), DType::F32);
  EXPECT_EQ(wide_master_dtype(DType::F16), DType::F32);
}

}  // namespace
}  // namespace lt::train
