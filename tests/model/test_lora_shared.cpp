// LoRA adapters that share their input (q/k/v, gate/up) run stacked: one x [A_1; A_2; ...]^T GEMM in forward,
// one dA and one dx GEMM in backward (model/lora_layer.h). The stacked path gives what one adapter at a time
// gives (to rounding: f64 here), takes effect only when the A's are back to back (allocate_lora's layout) and
// there is no dropout, and falls back otherwise.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "core/arena.h"
#include "model/lora.h"
#include "model/lora_layer.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

using model::LoraModule;

constexpr int64_t N = 6;

// A config whose projections take 64 inputs: f64 A's of (r, 64) are whole multiples of the arena's
// alignment, so allocate_lora puts them back to back.
model::ModelConfig wide_config() {
  model::ModelConfig c = test::tiny_config(false);
  c.hidden_size = 64;
  return c;
}

struct Side {
  std::unique_ptr<Arena> arena;
  model::LoraWeights lora, grads;
  std::vector<Tensor> t, y, dy;  // per module: (N, r), (N, out), (N, out)
  Tensor x, dx, scratch_in, scratch_r;
};

Side make_side(const model::ModelConfig& c, const std::vector<model::LoraSpec>& specs,
               const std::vector<LoraModule>& modules) {
  Side s;
  s.arena = std::make_unique<Arena>("lora-shared", HostMemory::instance(), size_t(4) << 20);
  s.lora = model::allocate_lora(c, specs, DType::F64, *s.arena);
  s.grads = model::allocate_lora(c, specs, DType::F64, *s.arena);
  model::zero_lora(ctx, s.grads);
  for (size_t i = 0; i < specs.size(); ++i)
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      Tensor& m = s.lora.matrix(specs[i], which);
      std::vector<double> v =
          test::random_values(size_t(m.numel()), 10 * i + (which == model::LoraMatrix::B));
      ops::copy(ctx, m, Tensor(v.data(), DType::F64, {m.numel()}).reshaped({m.dim(0), m.dim(1)}));
    }
  auto fill = [&](const char* name, std::initializer_list<int64_t> dims, uint64_t seed) {
    Tensor t = s.arena->alloc(name, DType::F64, dims);
    std::vector<double> v = test::random_values(size_t(t.numel()), seed);
    std::copy(v.begin(), v.end(), static_cast<double*>(t.data));
    return t;
  };
  const int64_t in = 64;
  s.x = fill("x", {N, in}, 100);
  s.dx = fill("dx", {N, in}, 101);
  s.scratch_in = s.arena->alloc("scratch_in", DType::F64, {N, in});
  s.scratch_r = s.arena->alloc("scratch_r", DType::F64, {N, 8});
  for (size_t i = 0; i < modules.size(); ++i) {
    const model::LoraAdapter& a = s.lora.layers[0][modules[i]];
    const int64_t out = a.b.dim(0);
    s.t.push_back(s.arena->alloc("t", DType::F64, {N, a.rank}));
    s.y.push_back(fill("y", {N, out}, 200 + i));
    s.dy.push_back(fill("dy", {N, out}, 300 + i));
  }
  return s;
}

std::vector<double> values(const Tensor& t) {
  const double* p = static_cast<const double*>(t.data);
  return std::vector<double>(p, p + t.numel());
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-12 * (1 + std::abs(b[i]))) << what << " " << i;
}

void run_group(const std::vector<LoraModule>& modules, double dropout) {
  const model::ModelConfig c = wide_config();
  const std::vector<model::LoraSpec> specs =
      model::lora_specs(c, [](const std::string& path) -> std::optional<model::LoraModuleSetting> {
        const int64_t r = path.find("k_proj") != std::string::npos    ? 3
                          : path.find("up_proj") != std::string::npos ? 2
                                                                      : 4;
        return model::LoraModuleSetting{.rank = r, .alpha = 2.0 * double(r)};
      });
  Side stacked = make_side(c, specs, modules), single = make_side(c, specs, modules);
  model::ChunkInfo chunk;
  chunk.batch = 2;
  chunk.tokens = 3;
  auto pass = [&](Side& s) {
    return model::LoraPass{.weights = &s.lora.layers[0],
                           .grads = &s.grads.layers[0],
                           .dropout = {.p = dropout, .seed = 5, .step = 1, .micro_batch = 0},
                           .scratch_in = s.scratch_in,
                           .scratch_r = s.scratch_r};
  };
  const std::string what = fmt::format("{} modules, dropout {}", modules.size(), dropout);
  EXPECT_EQ(model::lora_stacks(pass(stacked), modules, true), dropout == 0) << what;
  model::lora_forward_shared(ctx, pass(stacked), 0, modules, chunk, stacked.x, stacked.t, stacked.y);
  model::lora_backward_shared(ctx, pass(stacked), 0, modules, chunk, stacked.x, stacked.t, stacked.dy,
                              stacked.dx);
  for (size_t i = 0; i < modules.size(); ++i)
    model::lora_forward(ctx, pass(single), 0, modules[i], chunk, single.x, single.t[i], single.y[i]);
  for (size_t i = 0; i < modules.size(); ++i)
    model::lora_backward(ctx, pass(single), 0, modules[i], chunk, single.x, single.t[i], single.dy[i],
                         single.dx);
  for (size_t i = 0; i < modules.size(); ++i) {
    expect_near(values(stacked.t[i]), values(single.t[i]), what + " t");
    expect_near(values(stacked.y[i]), values(single.y[i]), what + " y");
    expect_near(values(stacked.grads.layers[0][modules[i]].a), values(single.grads.layers[0][modules[i]].a),
                what + " dA");
    expect_near(values(stacked.grads.layers[0][modules[i]].b), values(single.grads.layers[0][modules[i]].b),
                what + " dB");
  }
  expect_near(values(stacked.dx), values(single.dx), what + " dx");
}

TEST(LoraShared, StackedQkvAndGateUpEqualOneAdapterAtATime) {
  run_group({LoraModule::Q, LoraModule::K, LoraModule::V}, 0.0);
  run_group({LoraModule::Gate, LoraModule::Up}, 0.0);
}

TEST(LoraShared, DropoutFallsBackToOneAdapterAtATime) {
  run_group({LoraModule::Q, LoraModule::K, LoraModule::V}, 0.25);
}

TEST(LoraShared, AllocateLoraPutsALayersAsBackToBack) {
  const model::ModelConfig c = wide_config();
  const std::vector<model::LoraSpec> specs =
      model::lora_specs(c, [](const std::string&) -> std::optional<model::LoraModuleSetting> {
        return model::LoraModuleSetting{.rank = 4, .alpha = 8};
      });
  Arena arena("lora", HostMemory::instance(), model::lora_bytes(specs, DType::F64));
  const model::LoraWeights w = model::allocate_lora(c, specs, DType::F64, arena);
  for (const model::LayerLora& layer : w.layers) {
    const char* q = static_cast<const char*>(layer[LoraModule::Q].a.data);
    EXPECT_EQ(static_cast<const char*>(layer[LoraModule::K].a.data), q + layer[LoraModule::Q].a.bytes());
    EXPECT_EQ(static_cast<const char*>(layer[LoraModule::V].a.data),
              q + layer[LoraModule::Q].a.bytes() + layer[LoraModule::K].a.bytes());
    EXPECT_EQ(static_cast<const char*>(layer[LoraModule::Up].a.data),
              static_cast<const char*>(layer[LoraModule::Gate].a.data) + layer[LoraModule::Gate].a.bytes());
  }
}

}  // namespace
}  // namespace lt
