// offload_optimizer on the GPU: AdamW's moments and f32 master weights in page-locked host memory, staged
// through the device window and a copy stream around each update, give the on-device optimizer's run bit for
// bit: bf16 full fine-tuning with masters and with stochastic rounding (moments only offloaded), the
// end-of-step optimizer (with accumulation and clipping) and the in-backward one, LoRA: every step's loss
// and grad_norm, the checkpoint (weights, masters, moments) and the final model, judged with deterministic:
// true. And AdamW alone with a window so small that a step runs in several batches through it (the copy
// stream's ordering is what keeps one batch's copies in from overwriting the last one's state).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "io/safetensors.h"
#include "ops/device.h"
#include "parity_support.h"
#include "support/test_context.h"
#include "train/adamw.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

struct OffloadVariant {
  std::string name;
  bool master_weights = true;
  bool in_backward = false;
  int64_t batch_size = 2;
  std::string finetune = "full";
};

struct OffloadRun {
  std::vector<double> losses, grad_norms;
  std::string output_dir;
};

OffloadRun run(const TempDir& dir, const OffloadVariant& v, bool offload) {
  std::string out = v.name;
  out.append(offload ? "_off" : "_on");
  train::TrainConfig c = tiny_train_config(dir.path(), out);
  c.base_model = dir.file("model");
  c.device = lt::Device::CUDA;
  c.precision = lt::train::Precision::Bf16;
  train::apply_overrides(c, {"--finetune", v.finetune});
  c.master_weights = v.master_weights && v.finetune != "lora";
  c.deterministic = true;
  c.micro_batch_size = 2;
  c.batch_size = v.batch_size;
  c.max_steps = 4;
  c.save_steps = 4;
  c.max_grad_norm = v.in_backward ? 0 : 1.0;
  c.warmup_steps = 0;
  c.learning_rate = 5e-3;
  c.weight_decay = 0.1;
  c.optimizer_in_backward = v.in_backward;
  c.offload_optimizer = offload;
  train::validate(c);
  OffloadRun r;
  train::TrainerHooks hooks = quiet_hooks();
  hooks.on_step = [&](const train::StepMetrics& m) { r.grad_norms.push_back(m.grad_norm); };
  r.losses = train::run_training(c, hooks).losses;
  r.output_dir = c.output_dir;
  return r;
}

TEST(CudaOffloadOptimizer, BitIdenticalToTheOnDeviceOptimizer) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 8);
  const std::vector<OffloadVariant> variants = {
      {.name = "masters_end_of_step"},
      {.name = "masters_accumulated", .batch_size = 4},
      {.name = "masters_in_backward", .in_backward = true},
      {.name = "stochastic_rounding", .master_weights = false},
      {.name = "lora", .finetune = "lora"},
  };
  for (const OffloadVariant& v : variants) {
    SCOPED_TRACE(v.name);
    const OffloadRun on = run(dir, v, false);
    const OffloadRun off = run(dir, v, true);
    ASSERT_EQ(on.losses.size(), 4u);
    ASSERT_EQ(off.losses.size(), 4u);
    const std::vector<std::string> checkpoint =
        differing_tensors(on.output_dir + "/checkpoint-4", off.output_dir + "/checkpoint-4");
    const std::vector<std::string> final_model = differing_tensors(on.output_dir, off.output_dir);
    std::printf("OFFLOAD %-22s losses %s, checkpoint tensors differing %zu, final model %zu\n",
                v.name.c_str(),
                on.losses == off.losses && on.grad_norms == off.grad_norms ? "same" : "DIFFER",
                checkpoint.size(), final_model.size());
    EXPECT_NE(on.losses.back(), on.losses.front()) << "the steps must change the weights";
    EXPECT_EQ(off.losses, on.losses);
    EXPECT_EQ(off.grad_norms, on.grad_norms);
    EXPECT_TRUE(checkpoint.empty()) << checkpoint.size() << " tensors differ, first " << checkpoint.front();
    EXPECT_TRUE(final_model.empty()) << final_model.size() << " tensors differ, first "
                                     << final_model.front();
  }
}

TEST(CudaOffloadOptimizer, SmallWindowBatchesEqualTheOnDeviceUpdate) {
  LT_REQUIRE_GPU();
  constexpr int kTensors = 6;
  const int64_t sizes[kTensors] = {37, 3000, 5, 1000, 64, 129};
  std::vector<DeviceTensor> p_on, g_on, copy_on, g_off, copy_off;
  std::vector<Tensor> masters;  // offloaded run: f32 masters in page-locked host memory
  Arena pinned("masters", ops::staging_memory(lt::Device::CUDA), 1 << 20);
  std::vector<train::ParamGroup> on_groups, off_groups;
  for (int i = 0; i < kTensors; ++i) {
    std::vector<double> p = random_values(size_t(sizes[i]), 10 + uint64_t(i));
    std::vector<double> zero(size_t(sizes[i]), 0.0);
    p_on.push_back(upload(p, DType::F32, {sizes[i]}));
    g_on.push_back(upload(zero, DType::F32, {sizes[i]}));
    copy_on.push_back(upload(zero, DType::BF16, {sizes[i]}));
    g_off.push_back(upload(zero, DType::F32, {sizes[i]}));
    copy_off.push_back(upload(zero, DType::BF16, {sizes[i]}));
    masters.push_back(pinned.alloc(fmt::format("m{}", i), DType::F32, {sizes[i]}));
    std::vector<float> p32(p.begin(), p.end());
    std::memcpy(masters.back().data, p32.data(), p32.size() * sizeof(float));
    const std::string name = i == 2 ? std::string("layer.norm") : fmt::format("w{}", i);
    on_groups.push_back({name, p_on.back().t, g_on.back().t, copy_on.back().t});
    off_groups.push_back({name, masters.back(), g_off.back().t, copy_off.back().t});
  }
  train::AdamWOptions o;
  o.weight_decay = 0.1;
  o.no_decay_substrings = train::bias_and_norm_no_decay();
  train::AdamWOptions off = o;
  off.offload = true;
  off.offload_window_bytes = 4096;  // the 3000-element tensor alone, the small ones a few per batch
  train::AdamW on_device(ctx, on_groups, o), offloaded(ctx, off_groups, off);
  for (int step = 1; step <= 3; ++step) {
    for (int i = 0; i < kTensors; ++i) {
      std::vector<double> g = random_values(size_t(sizes[i]), 1000 * uint64_t(step) + uint64_t(i));
      std::vector<float> g32(g.begin(), g.end());
      ASSERT_EQ(cudaMemcpy(g_on[size_t(i)].t.data, g32.data(), g32.size() * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(g_off[size_t(i)].t.data, g32.data(), g32.size() * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    on_device.step(1e-2 * step);
    offloaded.begin_step();
    for (const std::vector<size_t>& layer : {std::vector<size_t>{4, 5}, {3, 1}, {0, 2}})
      offloaded.step_params(1e-2 * step, layer);
    offloaded.wait_offloaded();
  }
  for (int i = 0; i < kTensors; ++i) {
    const std::vector<double> want = download(p_on[size_t(i)]);
    const float* got = static_cast<const float*>(masters[size_t(i)].data);
    size_t differ = 0;
    for (size_t j = 0; j < want.size(); ++j) differ += double(got[j]) != want[j];
    EXPECT_EQ(differ, 0u) << "master " << i;
    EXPECT_EQ(download(copy_off[size_t(i)]), download(copy_on[size_t(i)])) << "compute copy " << i;
  }
  const auto sa = on_device.state_tensors(), sb = offloaded.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 1; k < sa.size(); ++k) {  // [0] is the step count
    std::vector<char> a(sa[k].tensor.bytes());
    ASSERT_EQ(cudaMemcpy(a.data(), sa[k].tensor.data, a.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), sb[k].tensor.data, a.size()), 0) << sa[k].name;
  }
}

}  // namespace
}  // namespace lt::test
