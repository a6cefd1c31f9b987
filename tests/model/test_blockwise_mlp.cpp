// The blockwise MLP equals the unblocked one (the op sequence of layer_forward / layer_backward over all rows
// at once) in float64 to 1e-12: output, input gradient and parameter gradients, for blocks of 1, a size that
// does not divide N, N and more than N, with MLP biases and with a frozen gate projection.
#include <gtest/gtest.h>

#include "core/arena.h"
#include "model/blockwise_mlp.h"
#include "model_test_util.h"
#include "ops/ops.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

using test::values;
void set(Tensor t, const std::vector<double>& v) {
  std::copy(v.begin(), v.end(), t.ptr<double>());
}

model::MlpBlockScratch block_scratch(Arena& arena, int64_t rows, int64_t F) {
  return {arena.alloc("gate", DType::F64, {rows, F}),   arena.alloc("up", DType::F64, {rows, F}),
          arena.alloc("h", DType::F64, {rows, F}),      arena.alloc("d_h", DType::F64, {rows, F}),
          arena.alloc("d_gate", DType::F64, {rows, F}), arena.alloc("d_up", DType::F64, {rows, F})};
}

void check_blocks(bool freeze_gate) {
  const model::ModelConfig c = test::tiny_config(false);
  const int64_t N = 13, D = c.hidden_size, F = c.intermediate_size;
  Arena arena("mlp", HostMemory::instance(), size_t(16) << 20);
  model::ModelWeights w = model::allocate_weights(c, DType::F64, arena);
  test::fill_random(c, w, 17);
  const model::TrainableFn trainable = [&](const model::WeightSpec& s) {
    return !(freeze_gate && s.kind == model::WeightKind::FfnGate);
  };
  const model::LayerWeights& lw = w.layers[0];
  const std::vector<double> x = test::random_values(size_t(N * D), 1),
                            resid = test::random_values(size_t(N * D), 2),
                            d_out = test::random_values(size_t(N * D), 3),
                            d_x0 = test::random_values(size_t(N * D), 4);
  Tensor xt = arena.alloc("x", DType::F64, {N, D}), dyt = arena.alloc("dy", DType::F64, {N, D});
  set(xt, x);
  set(dyt, d_out);

  // Unblocked reference.
  model::ModelWeights g_ref = model::allocate_grads(c, DType::F64, arena, trainable);
  model::MlpBlockScratch full = block_scratch(arena, N, F);
  Tensor out_ref = arena.alloc("out_ref", DType::F64, {N, D}),
         dx_ref = arena.alloc("dx_ref", DType::F64, {N, D});
  set(out_ref, resid);
  set(dx_ref, d_x0);
  ops::linear_forward({.rows = N, .in = D, .out = F}, full.gate, xt, lw.ffn_gate, lw.ffn_gate_bias);
  ops::linear_forward({.rows = N, .in = D, .out = F}, full.up, xt, lw.ffn_up, lw.ffn_up_bias);
  ops::swiglu_forward({.rows = N, .dim = F}, full.h, full.gate, full.up);
  ops::linear_forward({.rows = N, .in = F, .out = D, .accumulate_y = true}, out_ref, full.h, lw.ffn_down,
                      lw.ffn_down_bias);
  model::LayerWeights& gr = g_ref.layers[0];
  ops::linear_backward({.rows = N, .in = F, .out = D}, full.d_h, gr.ffn_down, gr.ffn_down_bias, dyt, full.h,
                       lw.ffn_down);
  ops::swiglu_backward({.rows = N, .dim = F}, full.d_gate, full.d_up, full.d_h, full.gate, full.up);
  ops::linear_backward({.rows = N, .in = D, .out = F, .accumulate_dx = true}, dx_ref, gr.ffn_gate,
                       gr.ffn_gate_bias, full.d_gate, xt, lw.ffn_gate);
  ops::linear_backward({.rows = N, .in = D, .out = F, .accumulate_dx = true}, dx_ref, gr.ffn_up,
                       gr.ffn_up_bias, full.d_up, xt, lw.ffn_up);

  for (int64_t block : {int64_t(1), int64_t(4), N, N + 2}) {
    Arena::Mark mark = arena.mark();
    model::ModelWeights g = model::allocate_grads(c, DType::F64, arena, trainable);
    model::MlpBlockScratch s = block_scratch(arena, std::min(block, N), F);
    Tensor out = arena.alloc("out", DType::F64, {N, D}), dx = arena.alloc("dx", DType::F64, {N, D});
    set(out, resid);
    set(dx, d_x0);
    model::mlp_forward_blockwise(c, lw, xt, out, block, s);
    model::mlp_backward_blockwise(c, lw, g.layers[0], xt, dyt, dx, /*accumulate_dx=*/true, block, s);
    EXPECT_LE(test::max_rel_diff(values(out), values(out_ref)), 1e-12) << "block " << block;
    EXPECT_LE(test::max_rel_diff(values(dx), values(dx_ref)), 1e-12) << "block " << block;
    for (const model::WeightSpec& spec : model::weight_specs(c)) {
      if (spec.layer != 0) continue;
      const Tensor& a = model::weight_of(g, spec);
      if (a.empty()) continue;
      EXPECT_LE(test::max_rel_diff(values(a), values(model::weight_of(g_ref, spec))), 1e-12)
          << spec.hf_name << " block " << block;
    }
    arena.release(mark);
  }
}

TEST(BlockwiseMlp, EqualsUnblocked) {
  check_blocks(false);
}
TEST(BlockwiseMlp, FrozenGateEqualsUnblocked) {
  check_blocks(true);
}

TEST(BlockwiseMlp, RefusesAScratchSmallerThanABlock) {
  const model::ModelConfig c = test::tiny_config(false);
  Arena arena("mlp", HostMemory::instance(), size_t(4) << 20);
  model::ModelWeights w = model::allocate_weights(c, DType::F64, arena);
  Tensor x = arena.alloc("x", DType::F64, {6, c.hidden_size}),
         out = arena.alloc("out", DType::F64, {6, c.hidden_size});
  model::MlpBlockScratch s = block_scratch(arena, 2, c.intermediate_size);
  test::expect_error_mentions([&] { model::mlp_forward_blockwise(c, w.layers[0], x, out, 4, s); },
                              {"cannot hold a block of 4 rows"});
}

}  // namespace
}  // namespace lt
