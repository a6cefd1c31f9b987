// The CUDA fused linear cross-entropy vs the CPU float64 reference (GPU.md), plus what the parity table
// does not show: that the op stays within its declared workspace (the (N, V) logits never exist), that it
// is bitwise deterministic, and that bad labels and dtypes are refused with a clear message.
// Small tile budgets force many token blocks, the last one partial, on shapes a test can afford.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

// Sets the GPU tile budget for a scope (process-wide) and restores the default after.
class TileBudget {
 public:
  explicit TileBudget(size_t bytes) : previous_(ops::cuda::fused_linear_cross_entropy_tile_bytes()) {
    ops::cuda::set_fused_linear_cross_entropy_tile_bytes(bytes);
  }
  ~TileBudget() { ops::cuda::set_fused_linear_cross_entropy_tile_bytes(previous_); }
  TileBudget(const TileBudget&) = delete;
  TileBudget& operator=(const TileBudget&) = delete;

 private:
  size_t previous_;
};

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// Labels in [0, V) with every 4th row ignored and, when given, the rows [ignored_begin, ignored_end) too
// (a whole token block without a label).
std::vector<int32_t> make_labels(int64_t N, int64_t V, uint64_t seed, int64_t ignored_begin = 0,
                                 int64_t ignored_end = 0) {
  std::vector<int32_t> labels = random_ints(static_cast<size_t>(N), seed, 0, int32_t(V));
  for (size_t i = 3; i < labels.size(); i += 4) labels[i] = -100;
  for (int64_t i = ignored_begin; i < ignored_end && i < N; ++i) labels[size_t(i)] = -100;
  return labels;
}

struct Shape {
  int64_t n, d, v, token_block;
  int64_t ignored_begin = 0, ignored_end = 0;  // a token block whose labels are all ignored
};

enum class DwKind { Same, None, F32 };

struct Variant {
  bool accumulate_dx;
  DwKind dw;
  const char* name;
};

// One case: forward and backward on the GPU against the CPU float64 op on the same (rounded) inputs.
void run_case(DType dt, const Shape& s, const Variant& var, uint64_t seed) {
  const int64_t N = s.n, D = s.d, V = s.v;
  // f16 runs under loss scaling: at 1/N alone, softmax gradients of a 128K vocabulary (~1e-5 / N) fall
  // below f16's smallest subnormal (6e-8) and flush to zero, which is what the fp16 loss scaler prevents.
  const double grad_scale = (dt == DType::F16 ? 65536.0 : 1.0) / double(N);
  ops::FusedLinearCrossEntropyParams p{N, D, V, -100, grad_scale, s.token_block, 4096, var.accumulate_dx};
  std::vector<double> x = random_values(static_cast<size_t>(N * D), seed, -0.5, 0.5);
  std::vector<double> w = random_values(static_cast<size_t>(V * D), seed + 1, -0.5, 0.5);
  std::vector<int32_t> labels = make_labels(N, V, seed + 2, s.ignored_begin, s.ignored_end);
  DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {V, D}), g_labels = upload_i32(labels, {N});
  Tensor h_labels(labels.data(), DType::I32, {N});

  // The reference: losses, lse and total, then the gradients' own scale (for starting values that do not
  // swamp what is accumulated onto them).
  std::vector<double> losses(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
  const double ref_total = ops::cpu::fused_linear_cross_entropy_forward(
      p, host(losses, {N}), host(lse, {N}), host(x, {N, D}), host(w, {V, D}), h_labels);
  std::vector<double> dx0(static_cast<size_t>(N * D)), dw0(static_cast<size_t>(V * D));
  ops::FusedLinearCrossEntropyParams p_write = p;
  p_write.accumulate_dx = false;
  ops::cpu::fused_linear_cross_entropy_backward(p_write, host(dx0, {N, D}), host(dw0, {V, D}),
                                                host(x, {N, D}), host(w, {V, D}), host(lse, {N}), h_labels);
  std::vector<double> dx = random_values(static_cast<size_t>(N * D), seed + 3, -1, 1);
  std::vector<double> dw = random_values(static_cast<size_t>(V * D), seed + 4, -1, 1);
  const double dx_scale = rms(dx0), dw_scale = rms(dw0);
  for (double& e : dx) e *= dx_scale;
  for (double& e : dw) e *= dw_scale;

  const DType dw_dt = var.dw == DwKind::F32 ? DType::F32 : dt;
  DeviceTensor g_dx = var.accumulate_dx ? upload(dx, dt, {N, D}) : poisoned(dt, {N, D});
  DeviceTensor g_dw = upload(dw, dw_dt, {V, D});
  DeviceTensor g_losses = poisoned(DType::F32, {N}), g_lse = poisoned(DType::F32, {N});
  const double total =
      ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_x.t, g_w.t, g_labels.t);
  const Tensor g_dw_view = var.dw == DwKind::None ? Tensor() : g_dw.t;
  ops::fused_linear_cross_entropy_backward(ctx, p, g_dx.t, g_dw_view, g_x.t, g_w.t, g_lse.t, g_labels.t);
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));

  // The reference backward from its own float64 lse, onto the same starting values.
  ops::cpu::fused_linear_cross_entropy_backward(p, host(dx, {N, D}),
                                                var.dw == DwKind::None ? Tensor() : host(dw, {V, D}),
                                                host(x, {N, D}), host(w, {V, D}), host(lse, {N}), h_labels);
  const std::vector<double> out_losses = test::download(g_losses);
  for (int64_t n = 0; n < N; ++n) {
    if (labels[size_t(n)] == -100) {
      EXPECT_EQ(out_losses[size_t(n)], 0.0) << "ignored row " << n << " has a loss";
    }
  }
  Worst fw, bw;
  fw.add("losses", out_losses, losses);
  fw.add("lse", test::download(g_lse), lse);
  fw.add("total", {total}, {ref_total});
  bw.add("dx", test::download(g_dx), dx);
  if (var.dw != DwKind::None) bw.add("dw", test::download(g_dw), dw);
  const int64_t rows = ops::cuda::fused_linear_cross_entropy_token_block(p, dt);
  const std::string shape = "(" + std::to_string(N) + ", " + std::to_string(D) + ", " + std::to_string(V) +
                            ") tb " + std::to_string(rows) + var.name;
  // losses and lse are f32 on the GPU, but computed from logits in the compute dtype: bf16 rounds them.
  report("fused_lce_forward", dt, shape, fw, tolerance(dt));
  report("fused_lce_backward", dt, shape, bw, tolerance(dt));
}

TEST(CudaParity, FusedLinearCrossEntropy) {
  LT_REQUIRE_GPU();
  TileBudget budget(1);  // the token block is params.token_block exactly
  const Shape shapes[] = {{1, 64, 7, 256},        {100, 64, 1000, 37},  {300, 128, 1003, 64, 64, 128},
                          {257, 128, 32000, 100}, {33, 64, 32000, 256}, {29, 64, 1001, 1}};
  const Variant variants[] = {
      {false, DwKind::Same, ""}, {true, DwKind::None, " dx+= no-dw"}, {true, DwKind::Same, " dx+="}};
  uint64_t seed = 900000;
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& s : shapes)
      for (const Variant& var : variants) {
        if (s.token_block == 1 && var.accumulate_dx) continue;  // one row per block: slow, once is enough
        run_case(dt, s, var, seed += 10);
      }
}

// bf16 inputs with an f32 dW (the mixed-precision policy's parameter gradients): cuda::linear_backward must
// take an f32 dw with bf16 dy and x.
TEST(CudaParity, FusedLinearCrossEntropyF32Grad) {
  LT_REQUIRE_GPU();
  TileBudget budget(1);
  const Shape shapes[] = {{100, 64, 1000, 37}, {257, 128, 32000, 100}};
  uint64_t seed = 905000;
  for (const Shape& s : shapes) {
    run_case(DType::BF16, s, {false, DwKind::F32, " dw-f32"}, seed += 10);
    run_case(DType::BF16, s, {true, DwKind::F32, " dx+= dw-f32"}, seed += 10);
    run_case(DType::F16, s, {true, DwKind::F32, " dx+= dw-f32"}, seed += 10);
  }
}

// The default budget on a realistic vocabulary: the token block comes from the 256 MiB budget.
TEST(CudaParity, FusedLinearCrossEntropyDefaultBudget) {
  LT_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    run_case(dt, {1500, 64, 128256, 256}, {false, DwKind::Same, " default budget"}, 910000 + uint64_t(dt));
}

// forward_backward computes from the forward's tile what backward computes from its recomputed one: the same
// losses, lse, total, dx and dw, bit for bit (bf16 with f32 dW and bf16 dW, f32; several token blocks).
// Its one-kernel cross-entropy (fused_linear_cross_entropy.cu) meets every path of the two plain kernels:
// V 1003 (not a multiple of the pack: element by element), V 1000 and 32000 (16-byte packs), every 4th
// row ignored, and (V 1000) a whole token block of ignored rows.
TEST(CudaParity, FusedLinearCrossEntropyForwardBackwardIsBitIdentical) {
  LT_REQUIRE_GPU();
  TileBudget budget(1);
  const Shape shapes[] = {{300, 128, 1003, 64}, {257, 128, 32000, 100}, {200, 64, 1000, 64, 64, 128}};
  for (const DType dt : {DType::F32, DType::BF16})
    for (const DType dw_dt : {dt, DType::F32})
      for (const Shape& sh : shapes) {
        const int64_t N = sh.n, D = sh.d, V = sh.v;
        const ops::FusedLinearCrossEntropyParams p{N, D, V, -100, 1.0 / double(N), sh.token_block};
        std::vector<double> x = random_values(size_t(N * D), 990001, -0.5, 0.5);
        std::vector<double> w = random_values(size_t(V * D), 990002, -0.5, 0.5);
        DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {V, D});
        DeviceTensor g_labels = upload_i32(make_labels(N, V, 990003, sh.ignored_begin, sh.ignored_end), {N});
        std::vector<double> zeros(size_t(V * D), 0.0);
        DeviceTensor l1(DType::F32, {N}), s1(DType::F32, {N}), dx1 = poisoned(dt, {N, D}),
                                                               dw1 = upload(zeros, dw_dt, {V, D});
        DeviceTensor l2(DType::F32, {N}), s2(DType::F32, {N}), dx2 = poisoned(dt, {N, D}),
                                                               dw2 = upload(zeros, dw_dt, {V, D});
        const double t1 =
            ops::fused_linear_cross_entropy_forward(ctx, p, l1.t, s1.t, g_x.t, g_w.t, g_labels.t);
        ops::fused_linear_cross_entropy_backward(ctx, p, dx1.t, dw1.t, g_x.t, g_w.t, s1.t, g_labels.t);
        const double t2 = ops::fused_linear_cross_entropy_forward_backward(ctx, p, l2.t, s2.t, dx2.t, dw2.t,
                                                                           g_x.t, g_w.t, g_labels.t);
        const std::string what =
            std::string(dtype_name(dt)) + " dw " + std::string(dtype_name(dw_dt)) + " V " + std::to_string(V);
        EXPECT_EQ(t1, t2) << what;
        EXPECT_EQ(test::download(l1), test::download(l2)) << what << " losses";
        EXPECT_EQ(test::download(s1), test::download(s2)) << what << " lse";
        EXPECT_EQ(test::download(dx1), test::download(dx2)) << what << " dx";
        EXPECT_EQ(test::download(dw1), test::download(dw2)) << what << " dw";
        std::printf("FLCE    forward_backward == forward + backward, %s: %s\n", what.c_str(),
                    test::download(dw1) == test::download(dw2) && test::download(dx1) == test::download(dx2)
                        ? "bit-identical"
                        : "DIFFERENT");
      }
}

TEST(CudaBehavior, FusedLinearCrossEntropyTokenBlock) {
  const int64_t V = 128256;
  ops::FusedLinearCrossEntropyParams p{16384, 4096, V};
  for (DType dt : {DType::F32, DType::BF16}) {
    const int64_t rows = ops::cuda::fused_linear_cross_entropy_token_block(p, dt);
    const size_t tile = size_t(rows) * size_t(V) * dtype_size(dt);
    EXPECT_GE(rows, p.token_block);
    EXPECT_EQ(rows % 128, 0) << rows;
    EXPECT_LE(tile, ops::cuda::fused_linear_cross_entropy_tile_bytes());
    EXPECT_GT(tile + 128 * size_t(V) * dtype_size(dt), ops::cuda::fused_linear_cross_entropy_tile_bytes())
        << "the block could take 128 more rows within the budget";
    EXPECT_GE(ops::cuda::fused_linear_cross_entropy_workspace_bytes(p, dt), tile);
    EXPECT_LT(ops::cuda::fused_linear_cross_entropy_workspace_bytes(p, dt), tile + (size_t(1) << 20));
  }
  ops::FusedLinearCrossEntropyParams small{10, 64, 1000, 256};
  EXPECT_EQ(ops::cuda::fused_linear_cross_entropy_token_block(small, DType::F32), 10) << "at most N rows";
  small.token_block = 1 << 20;
  small.rows = 3 << 20;
  EXPECT_EQ(ops::cuda::fused_linear_cross_entropy_token_block(small, DType::F32), 1 << 20)
      << "params.token_block is a lower bound";
  small.rows = 0;
  EXPECT_EQ(ops::cuda::fused_linear_cross_entropy_workspace_bytes(small, DType::F32), 0u);
}

// The op's device memory: pool memory at its peak within fused_linear_cross_entropy_workspace_bytes (far
// below the (N, V) logits), all of it given back, nothing else allocated; and two runs give the same bits.
TEST(CudaBehavior, FusedLinearCrossEntropyMemoryAndDeterminism) {
  LT_REQUIRE_GPU();
  TileBudget budget(size_t(4) << 20);
  const int64_t N = 1024, D = 128, V = 32000;
  for (DType dt : {DType::F32, DType::BF16}) {
    const ops::FusedLinearCrossEntropyParams p{N, D, V, -100, 1.0 / double(N), 16};
    std::vector<double> x = random_values(static_cast<size_t>(N * D), 920001, -0.5, 0.5);
    std::vector<double> w = random_values(static_cast<size_t>(V * D), 920002, -0.5, 0.5);
    std::vector<int32_t> labels = make_labels(N, V, 920003);
    DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {V, D}), g_labels = upload_i32(labels, {N});
    DeviceTensor g_losses = poisoned(DType::F32, {N}), g_lse = poisoned(DType::F32, {N});
    DeviceTensor g_dx = poisoned(dt, {N, D}), g_dw = poisoned(dt, {V, D});
    auto run = [&] {
      EXPECT_EQ(cudaMemset(g_dw.t.data, 0, g_dw.t.bytes()), cudaSuccess);
      const double total =
          ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_x.t, g_w.t, g_labels.t);
      ops::fused_linear_cross_entropy_backward(ctx, p, g_dx.t, g_dw.t, g_x.t, g_w.t, g_lse.t, g_labels.t);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(std::isfinite(total));
      std::vector<double> out = test::download(g_dx), dw = test::download(g_dw);
      out.insert(out.end(), dw.begin(), dw.end());
      out.push_back(total);
      return out;
    };
    const std::vector<double> first = run();  // also warms cuBLASLt's context (its own workspace)

    int device = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    cudaMemPool_t pool;
    ASSERT_EQ(cudaDeviceGetMemPool(&pool, device), cudaSuccess);
    uint64_t used_before = 0, zero = 0, used_high = 0, used_after = 0;
    ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used_before), cudaSuccess);
    ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    size_t free_before = 0, free_after = 0, total_mem = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_before, &total_mem), cudaSuccess);
    const std::vector<double> second = run();
    ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high), cudaSuccess);
    ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used_after), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free_after, &total_mem), cudaSuccess);

    const size_t workspace = ops::cuda::fused_linear_cross_entropy_workspace_bytes(p, dt);
    const size_t logits = size_t(N * V) * dtype_size(dt);
    std::printf("FLCE memory %s: workspace %zu B, pool peak %llu B over %llu, full logits %zu B\n",
                std::string(dtype_name(dt)).c_str(), workspace, (unsigned long long)(used_high - used_before),
                (unsigned long long)used_before, logits);
    EXPECT_LT(workspace * 8, logits) << "the test's tile budget must be well below the full logits";
    EXPECT_GT(used_high, used_before) << "the op took its tile from the pool";
    EXPECT_LE(used_high - used_before, workspace + (size_t(2) << 20)) << "pool granularity: 2 MiB at most";
    EXPECT_EQ(used_after, used_before) << "the workspace is given back";
    EXPECT_GE(free_after + (size_t(2) << 20), free_before) << "no device memory outside the pool was kept";
    EXPECT_TRUE(first == second) << dtype_name(dt) << ": dx, dw or the total differ between two runs";
  }
}

TEST(CudaBehavior, FusedLinearCrossEntropyBadInput) {
  LT_REQUIRE_GPU();
  TileBudget budget(1);
  const int64_t N = 10, D = 16, V = 50;
  const ops::FusedLinearCrossEntropyParams p{N, D, V, -100, 0.1, 4};
  std::vector<double> x = random_values(static_cast<size_t>(N * D), 930001);
  std::vector<double> w = random_values(static_cast<size_t>(V * D), 930002);
  DeviceTensor g_x = upload(x, DType::F32, {N, D}), g_w = upload(w, DType::F32, {V, D});
  DeviceTensor g_losses = poisoned(DType::F32, {N}), g_lse = poisoned(DType::F32, {N});
  // Row 9 sits in the third token block: the message names its row in the whole input.
  DeviceTensor g_labels = upload_i32({1, 2, 3, -100, 4, 5, 6, 7, 8, 50}, {N});
  try {
    ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_x.t, g_w.t, g_labels.t);
    ADD_FAILURE() << "a label equal to the vocabulary size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 50 at row 9"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));
  // The same from forward_backward's one-kernel cross-entropy.
  DeviceTensor g_dx = poisoned(DType::F32, {N, D}), g_dw = poisoned(DType::F32, {V, D});
  try {
    ops::fused_linear_cross_entropy_forward_backward(ctx, p, g_losses.t, g_lse.t, g_dx.t, g_dw.t, g_x.t,
                                                     g_w.t, g_labels.t);
    ADD_FAILURE() << "forward_backward accepted a label equal to the vocabulary size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 50 at row 9"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));

  // Dtypes the GPU op refuses: mixed x / w, lse not f32, dx not the compute dtype.
  DeviceTensor g_w16 = upload(w, DType::BF16, {V, D}), g_lse64 = poisoned(DType::F64, {N});
  DeviceTensor g_ok_labels = upload_i32({1, 2, 3, -100, 4, 5, 6, 7, 8, 9}, {N});
  DeviceTensor g_dx16 = poisoned(DType::BF16, {N, D});
  EXPECT_THROW(
      ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_x.t, g_w16.t, g_ok_labels.t),
      Error);
  EXPECT_THROW(
      ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse64.t, g_x.t, g_w.t, g_ok_labels.t),
      Error);
  EXPECT_THROW(ops::fused_linear_cross_entropy_backward(ctx, p, g_dx16.t, Tensor(), g_x.t, g_w.t, g_lse.t,
                                                        g_ok_labels.t),
               Error);
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));
}

// Not a test: times forward + backward at a Llama-3 8B head (N 16384, D 4096, V 128256, bf16, f32 dW as
// the mixed-precision policy keeps it, and bf16) with CUDA events, at tile budgets of 256 MiB (the default),
// 1 GiB and 4 GiB, and prints the pool memory the op took at its peak.
// FLOPs: 2 N D V per GEMM; forward 1 GEMM, backward 3 (recompute, dx, dW). Run with
// --gtest_also_run_disabled_tests --gtest_filter='*FusedLinearCrossEntropyTiming*'.
TEST(CudaBench, DISABLED_FusedLinearCrossEntropyTiming) {
  LT_REQUIRE_GPU();
  const int64_t N = 16384, D = 4096, V = 128256;
  const DType dt = DType::BF16;
  const ops::FusedLinearCrossEntropyParams p{N, D, V, -100, 1.0 / double(N)};
  // Random values are drawn for one slab and repeated: drawing 525M of them on the host takes too long.
  const int64_t slab_rows = 512;
  std::vector<double> slab = random_values(static_cast<size_t>(slab_rows * D), 940001, -0.05, 0.05);
  DeviceTensor g_slab = upload(slab, dt, {slab_rows, D});
  DeviceTensor g_x(dt, {N, D}), g_w(dt, {V, D}), g_dx(dt, {N, D});
  for (DeviceTensor* t : {&g_x, &g_w})
    for (int64_t r = 0; r < t->t.shape[0]; r += slab_rows) {
      const int64_t rows = std::min(slab_rows, t->t.shape[0] - r);
      ASSERT_EQ(cudaMemcpy(static_cast<char*>(t->t.data) + size_t(r * D) * dtype_size(dt), g_slab.t.data,
                           size_t(rows * D) * dtype_size(dt), cudaMemcpyDeviceToDevice),
                cudaSuccess);
    }
  DeviceTensor g_labels = upload_i32(make_labels(N, V, 940002), {N});
  DeviceTensor g_losses(DType::F32, {N}), g_lse(DType::F32, {N});
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetMemPool(&pool, 0), cudaSuccess);
  cudaEvent_t e0, e1, e2, e3;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventCreate(&e2);
  cudaEventCreate(&e3);
  // The default tile budget, then larger ones: fewer blocks re-read and re-write dW fewer times.
  for (size_t budget_mib : {256, 1024, 4096})
    for (DType dw_dt : {DType::F32, DType::BF16}) {
      TileBudget budget(budget_mib << 20);
      DeviceTensor g_dw(dw_dt, {V, D});
      ASSERT_EQ(cudaMemset(g_dw.t.data, 0, g_dw.t.bytes()), cudaSuccess);
      std::vector<float> fw_ms, bw_ms, both_ms;
      uint64_t used_before = 0, used_high = 0, zero = 0;
      try {
        for (int it = 0; it < 4; ++it) {
          cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used_before);
          cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
          cudaEventRecord(e0);
          ops::fused_linear_cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_x.t, g_w.t, g_labels.t);
          cudaEventRecord(e1);
          ops::fused_linear_cross_entropy_backward(ctx, p, g_dx.t, g_dw.t, g_x.t, g_w.t, g_lse.t, g_labels.t);
          cudaEventRecord(e2);
          ops::fused_linear_cross_entropy_forward_backward(ctx, p, g_losses.t, g_lse.t, g_dx.t, g_dw.t, g_x.t,
                                                           g_w.t, g_labels.t);
          cudaEventRecord(e3);
          ASSERT_EQ(cudaEventSynchronize(e3), cudaSuccess);
          cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high);
          float a = 0, b = 0, c = 0;
          cudaEventElapsedTime(&a, e0, e1);
          cudaEventElapsedTime(&b, e1, e2);
          cudaEventElapsedTime(&c, e2, e3);
          if (it > 0) fw_ms.push_back(a), bw_ms.push_back(b), both_ms.push_back(c);  // the first run warms up
        }
      } catch (const Error& e) {
        std::printf("TIMING  fused_lce bf16 dw %s: not run: %s\n", std::string(dtype_name(dw_dt)).c_str(),
                    e.what());
        continue;
      }
      std::sort(fw_ms.begin(), fw_ms.end());
      std::sort(bw_ms.begin(), bw_ms.end());
      std::sort(both_ms.begin(), both_ms.end());
      const double fw = fw_ms[fw_ms.size() / 2], bw = bw_ms[bw_ms.size() / 2],
                   both = both_ms[both_ms.size() / 2];
      const double gemm = 2.0 * double(N) * double(D) * double(V);
      std::printf(
          "TIMING  fused_lce bf16 dw %s N=%lld D=%lld V=%lld tb=%lld  fwd %.2f ms %.1f TFLOP/s  bwd %.2f ms "
          "%.1f TFLOP/s  fwd+bwd %.2f ms  forward_backward %.2f ms %.1f TFLOP/s  pool peak %.1f MiB "
          "(workspace "
          "%.1f MiB; full logits %.1f MiB)\n",
          std::string(dtype_name(dw_dt)).c_str(), (long long)N, (long long)D, (long long)V,
          (long long)ops::cuda::fused_linear_cross_entropy_token_block(p, dt), fw, gemm / fw * 1e-9, bw,
          3 * gemm / bw * 1e-9, fw + bw, both, 3 * gemm / both * 1e-9,
          double(used_high - used_before) / 1048576.0,
          double(ops::cuda::fused_linear_cross_entropy_workspace_bytes(p, dt)) / 1048576.0,
          double(N) * double(V) * 2.0 / 1048576.0);
      std::fflush(stdout);
    }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e3);
  cudaEventDestroy(e2);
}

}  // namespace
}  // namespace lt::test
