// The stacked LoRA path (model/lora_layer.h: adapters sharing an input run one x A^T GEMM, one dA and one dx
// GEMM) on the GPU: the same values as one adapter at a time, in f32 and bf16
// (tests/model/test_lora_shared.cpp is the CPU twin).
#include <gtest/gtest.h>

#include <vector>

#include "core/arena.h"
#include "model/lora.h"
#include "model/lora_layer.h"
#include "model/tiny_model.h"
#include "ops/device.h"
#include "parity_support.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using model::LoraModule;

constexpr int64_t N = 64, kIn = 64;

struct Side {
  std::unique_ptr<Arena> arena;
  model::LoraWeights lora, grads;
  std::vector<Tensor> t, y, dy;
  Tensor x, dx, scratch_in, scratch_r;
};

Tensor upload_random(Arena& arena, DType dt, std::initializer_list<int64_t> dims /*(rows, cols)*/,
                     uint64_t seed) {
  Tensor t = arena.alloc("t", dt, dims);
  std::vector<double> v = test::random_values(size_t(t.numel()), seed, -1.0, 1.0);
  std::vector<char> bytes(v.size() * dtype_size(dt) + 1);
  convert_elements(bytes.data(), dt, v.data(), DType::F64, v.size());
  ops::copy(ctx, t, Tensor(bytes.data(), dt, {t.dim(0), t.dim(1)}));  // every buffer here is a matrix
  return t;
}

std::vector<double> download(const Tensor& t) {
  std::vector<char> bytes(t.bytes() + 1);
  ops::copy(ctx, Tensor(bytes.data(), t.dtype, {t.numel()}), t.reshaped({t.numel()}));
  ops::synchronize(ctx, Device::CUDA);
  std::vector<double> v(size_t(t.numel()));
  convert_elements(v.data(), DType::F64, bytes.data(), t.dtype, v.size());
  return v;
}

Side make_side(const model::ModelConfig& c, const std::vector<model::LoraSpec>& specs,
               const std::vector<LoraModule>& modules, DType dt) {
  Side s;
  s.arena = std::make_unique<Arena>("lora-shared", ops::memory_resource(Device::CUDA), size_t(8) << 20);
  s.lora = model::allocate_lora(c, specs, dt, *s.arena);
  s.grads = model::allocate_lora(c, specs, DType::F32, *s.arena);  // the trainer's f32 gradients
  model::zero_lora(ctx, s.grads);
  for (size_t i = 0; i < specs.size(); ++i)
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      Tensor& m = s.lora.matrix(specs[i], which);
      Tensor r = upload_random(*s.arena, dt, {m.dim(0), m.dim(1)}, 10 * i + (which == model::LoraMatrix::B));
      ops::copy(ctx, m, r);
    }
  s.x = upload_random(*s.arena, dt, {N, kIn}, 100);
  s.dx = upload_random(*s.arena, dt, {N, kIn}, 101);
  s.scratch_in = s.arena->alloc("scratch_in", dt, {N, kIn});
  s.scratch_r = s.arena->alloc("scratch_r", dt, {N, 8});
  for (size_t i = 0; i < modules.size(); ++i) {
    const model::LoraAdapter& a = s.lora.layers[0][modules[i]];
    s.t.push_back(s.arena->alloc("t", dt, {N, a.rank}));
    s.y.push_back(upload_random(*s.arena, dt, {N, a.b.dim(0)}, 200 + i));
    s.dy.push_back(upload_random(*s.arena, dt, {N, a.b.dim(0)}, 300 + i));
  }
  return s;
}

TEST(CudaLoraShared, StackedEqualsOneAdapterAtATime) {
  LT_REQUIRE_GPU();
  model::ModelConfig c = test::tiny_config(false);
  c.hidden_size = kIn;
  const std::vector<model::LoraSpec> specs =
      model::lora_specs(c, [](const std::string& path) -> std::optional<model::LoraModuleSetting> {
        const int64_t r = path.find("k_proj") != std::string::npos ? 8 : 4;  // A's of 4 x 64 bf16: 512 bytes
        return model::LoraModuleSetting{.rank = r, .alpha = 2.0 * double(r)};
      });
  model::ChunkInfo chunk;
  chunk.batch = 4;
  chunk.tokens = N / 4;
  for (DType dt : {DType::F32, DType::BF16})
    for (const std::vector<LoraModule>& modules :
         {std::vector<LoraModule>{LoraModule::Q, LoraModule::K, LoraModule::V},
          std::vector<LoraModule>{LoraModule::Gate, LoraModule::Up}}) {
      Side st = make_side(c, specs, modules, dt), one = make_side(c, specs, modules, dt);
      auto pass = [](Side& s) {
        return model::LoraPass{.weights = &s.lora.layers[0],
                               .grads = &s.grads.layers[0],
                               .dropout = {},
                               .scratch_in = s.scratch_in,
                               .scratch_r = s.scratch_r};
      };
      ASSERT_TRUE(model::lora_stacks(pass(st), modules, true)) << dtype_name(dt);
      model::lora_forward_shared(ctx, pass(st), 0, modules, chunk, st.x, st.t, st.y);
      model::lora_backward_shared(ctx, pass(st), 0, modules, chunk, st.x, st.t, st.dy, st.dx);
      for (size_t i = 0; i < modules.size(); ++i)
        model::lora_forward(ctx, pass(one), 0, modules[i], chunk, one.x, one.t[i], one.y[i]);
      for (size_t i = 0; i < modules.size(); ++i)
        model::lora_backward(ctx, pass(one), 0, modules[i], chunk, one.x, one.t[i], one.dy[i], one.dx);
      test::Worst w;
      for (size_t i = 0; i < modules.size(); ++i) {
        w.add("t", download(st.t[i]), download(one.t[i]));
        w.add("y", download(st.y[i]), download(one.y[i]));
        w.add("dA", download(st.grads.layers[0][modules[i]].a), download(one.grads.layers[0][modules[i]].a));
        w.add("dB", download(st.grads.layers[0][modules[i]].b), download(one.grads.layers[0][modules[i]].b));
      }
      w.add("dx", download(st.dx), download(one.dx));
      report("lora stacked vs one at a time", dt, modules.size() == 3 ? "q/k/v" : "gate/up", w,
             dt == DType::F32 ? 1e-5 : test::tolerance(DType::BF16));
    }
}

}  // namespace
}  // namespace lt
