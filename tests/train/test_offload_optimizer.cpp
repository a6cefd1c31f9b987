// offload_optimizer: AdamW's moments (and master weights) in host memory, staged through a device window
// around each update, give the on-device optimizer's run bit for bit: the same update kernel on the same
// values. On the CPU the window and the host are both host memory, so these tests prove the staging's
// bookkeeping (batches that fit the window, every tensor staged and copied back, state read after the copies)
// and the trainer's wiring; CudaOffloadOptimizer (tests/cuda) proves the device path.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/memory_plan.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/adamw.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

TEST(AdamWOffload, WindowBatchesGiveTheOnDeviceBitsAndState) {
  constexpr int kTensors = 6;
  const int64_t sizes[kTensors] = {37, 300, 5, 1000, 64, 129};
  struct State {
    std::vector<std::vector<float>> p, g;
    std::vector<ParamGroup> groups;
  };
  auto make = [&] {
    auto s = std::make_unique<State>();
    for (int i = 0; i < kTensors; ++i) {
      const std::vector<double> v = test::random_values(sizes[i], 10 + uint64_t(i));
      s->p.emplace_back(v.begin(), v.end());
      s->g.emplace_back(size_t(sizes[i]), 0.0f);
    }
    for (int i = 0; i < kTensors; ++i)
      s->groups.push_back({i == 2 ? std::string("layer.norm") : fmt::format("w{}", i),
                           Tensor(s->p[size_t(i)].data(), DType::F32, {sizes[i]}),
                           Tensor(s->g[size_t(i)].data(), DType::F32, {sizes[i]})});
    return s;
  };
  AdamWOptions o;
  o.weight_decay = 0.1;
  o.no_decay_substrings = bias_and_norm_no_decay();
  AdamWOptions off = o;
  off.offload = true;
  off.offload_window_bytes = 3000;  // a few small tensors per batch; the 1000-element one alone
  auto a = make(), b = make(), c = make();
  AdamW on_device(ctx, a->groups, o), offloaded(ctx, b->groups, off), in_parts(ctx, c->groups, off);
  for (int step = 1; step <= 3; ++step) {
    for (int i = 0; i < kTensors; ++i) {
      const std::vector<double> g = test::random_values(sizes[i], 1000 * uint64_t(step) + uint64_t(i));
      for (int64_t j = 0; j < sizes[i]; ++j)
        a->g[size_t(i)][size_t(j)] = b->g[size_t(i)][size_t(j)] = c->g[size_t(i)][size_t(j)] =
            float(g[size_t(j)]);
    }
    on_device.step(1e-2 * step);
    offloaded.step(1e-2 * step);
    in_parts.begin_step();
    for (const std::vector<size_t>& layer : {std::vector<size_t>{4, 5}, {3}, {0, 1, 2}})
      in_parts.step_params(1e-2 * step, layer);
    in_parts.wait_offloaded();
  }
  for (int i = 0; i < kTensors; ++i) {
    EXPECT_EQ(test::bytes_of(b->groups[size_t(i)].param), test::bytes_of(a->groups[size_t(i)].param)) << i;
    EXPECT_EQ(test::bytes_of(c->groups[size_t(i)].param), test::bytes_of(a->groups[size_t(i)].param)) << i;
  }
  EXPECT_NE(test::bytes_of(a->groups[3].param), test::bytes_of(make()->groups[3].param)) << "nothing moved";
  const auto sa = on_device.state_tensors(), sb = offloaded.state_tensors(), sc = in_parts.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k) {
    EXPECT_EQ(test::bytes_of(sb[k].tensor), test::bytes_of(sa[k].tensor)) << sa[k].name;
    EXPECT_EQ(test::bytes_of(sc[k].tensor), test::bytes_of(sa[k].tensor)) << sa[k].name;
  }
}

TEST(AdamWOffload, RefusesEightBitState) {
  float p[4] = {}, g[4] = {};
  AdamWOptions o;
  o.offload = true;
  o.eight_bit = true;
  test::expect_error_mentions(
      [&] {
        AdamW(ctx, {{"w", Tensor(p, DType::F32, {4}), Tensor(g, DType::F32, {4})}}, o);
      },
      {"offload", "8-bit"});
}

TEST(OptimizerOffloadWindow, HoldsTheLargestTensorOrTheLimit) {
  EXPECT_EQ(model::optimizer_offload_window_bytes({100, 5000, 300}, 1000), 5000u + 256u);
  EXPECT_EQ(model::optimizer_offload_window_bytes({100, 200, 300}, 1000), 600u + 256u);
  EXPECT_EQ(model::optimizer_offload_window_bytes({800, 700, 600}, 1000), 1000u + 256u);
}

struct Variant {
  const char* name;
  const char* precision;
  const char* finetune = "full";
  bool master_weights = false;
  bool in_backward = false;
  int64_t batch_size = 2;  // > micro_batch_size 2: accumulation (end-of-step optimizer only)
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

class OffloadOptimizer : public ::testing::TestWithParam<Variant> {};

TEST_P(OffloadOptimizer, BitIdenticalToTheOnDeviceOptimizer) {
  const Variant& v = GetParam();
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"), false);
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  auto run = [&](bool offload) {
    std::string out = v.name;
    out.append(offload ? "_off" : "_on");
    TrainConfig c = test::tiny_train_config(dir.path(), out);
    apply_overrides(c, {"--precision", v.precision, "--finetune", v.finetune});
    c.master_weights = v.master_weights;
    c.micro_batch_size = 2;
    c.batch_size = v.batch_size;
    c.max_grad_norm = v.in_backward ? 0 : 1.0;
    c.max_steps = 3;
    c.save_steps = 3;
    c.weight_decay = 0.1;
    c.learning_rate = 2e-2;
    c.warmup_steps = 0;
    c.optimizer_in_backward = v.in_backward;
    c.offload_optimizer = offload;
    validate(c);
    std::vector<double> norms;
    TrainerHooks hooks = test::quiet_hooks();
    hooks.on_step = [&](const StepMetrics& m) { norms.push_back(m.grad_norm); };
    std::vector<double> losses = run_training(c, hooks).losses;
    return std::tuple(losses, norms, c.output_dir);
  };
  const auto [on_losses, on_norms, on_dir] = run(false);
  const auto [off_losses, off_norms, off_dir] = run(true);
  ASSERT_EQ(on_losses.size(), 3u);
  EXPECT_NE(on_losses.back(), on_losses.front()) << "the steps must change the weights";
  EXPECT_EQ(off_losses, on_losses);
  EXPECT_EQ(off_norms, on_norms);
  for (const std::string sub : {"/checkpoint-3", ""}) {
    const std::vector<std::string> differ = test::differing_tensors(on_dir + sub, off_dir + sub);
    EXPECT_TRUE(differ.empty()) << sub << ": " << differ.size() << " tensors differ, first "
                                << differ.front();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runs, OffloadOptimizer,
    ::testing::Values(Variant{.name = "f64_full", .precision = "fp64"},
                      Variant{.name = "f32_full_accumulated", .precision = "fp32", .batch_size = 4},
                      Variant{.name = "f32_masters", .precision = "fp32", .master_weights = true},
                      Variant{.name = "f32_masters_in_backward",
                              .precision = "fp32",
                              .master_weights = true,
                              .in_backward = true},
                      Variant{.name = "f64_in_backward", .precision = "fp64", .in_backward = true},
                      Variant{.name = "f32_lora", .precision = "fp32", .finetune = "lora"}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST(OffloadOptimizerConfig, RefusedCombinationsNameTheirKey) {
  test::TempDir dir;
  TrainConfig c = test::tiny_train_config(dir.path(), "refused");
  c.offload_optimizer = true;
  apply_overrides(c, {"--optim", "adamw_8bit"});
  test::expect_error_mentions([&] { validate(c); }, {"offload_optimizer", "adamw_8bit"});
  TrainConfig d = test::tiny_train_config(dir.path(), "refused2");
  d.offload_optimizer = true;
  apply_overrides(d, {"--sharding", "zero2"});
  test::expect_error_mentions([&] { validate(d); }, {"offload_optimizer", "zero2"});
}

TEST(OffloadOptimizerPlan, MomentsAndMastersMoveToHostAndTheWindowStays) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  const model::ModelConfig mc = model::load_model_config(dir.file("model"));
  model::MemoryPlanSettings s;
  s.dtype = DType::BF16;
  s.device = Device::CUDA;
  s.batch = 1;
  s.seq_len = 16;
  s.master_weights = DType::F32;
  const model::MemoryPlan on = model::plan_memory(mc, s);
  s.offload_optimizer = true;
  const model::MemoryPlan off = model::plan_memory(mc, s);
  auto device_bytes = [](const model::MemoryPlan& p, model::MemoryCategory c) {
    size_t b = 0;
    for (const model::MemoryPlanRow& r : p.rows) b += r.category == c ? r.bytes : 0;
    return b;
  };
  using C = model::MemoryCategory;
  EXPECT_GT(device_bytes(on, C::OptimizerState), 0u);
  EXPECT_EQ(off.host_by_category[size_t(C::OptimizerState)], device_bytes(on, C::OptimizerState));
  EXPECT_EQ(off.host_by_category[size_t(C::TrainableWeights)], device_bytes(on, C::TrainableWeights));
  EXPECT_EQ(device_bytes(off, C::TrainableWeights), 0u);
  // The device keeps only the window: here the whole state fits under the default 1 GiB limit (plus each
  // staged tensor's alignment to 256 bytes, 3 per tensor at most).
  const size_t state = device_bytes(on, C::OptimizerState) + device_bytes(on, C::TrainableWeights);
  EXPECT_GE(device_bytes(off, C::OptimizerState), state);
  EXPECT_LE(device_bytes(off, C::OptimizerState), state + 256 * (3 * 64 + 1));
}

}  // namespace
}  // namespace lt::train
