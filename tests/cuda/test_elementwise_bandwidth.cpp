// Not tests: the memory-bound kernels' achieved bandwidth against the H200's copy ceiling (4280 GB/s,
// GPU.md), at Llama-3.1-8B shapes for a step of 8192 tokens, bf16: RMSNorm forward/backward (D 4096, f32 dW
// as the mixed-precision policy keeps it; also at 16384 tokens), RoPE forward (32 heads of 128, in place),
// SwiGLU forward/backward (F 14336), the residual add. Bytes counted are the fewest each kernel must move:
// every input read once, every output written once (an in-place tensor read and written). Median of 20 runs
// after 3 warm-ups, CUDA events. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*ElementwiseBandwidth*' (tools/gpu_train_checks.sh does); grep BANDWIDTH.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/cuda/rmsnorm_select.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

constexpr double kCopyGBs = 4280.0;

void report_bandwidth(const char* what, double bytes, float ms) {
  const double gbs = bytes / ms / 1e6;
  std::printf("BANDWIDTH %-50s %8.3f ms  %6.0f GB/s  %3.0f%% of %.0f\n", what, ms, gbs, 100 * gbs / kCopyGBs,
              kCopyGBs);
  std::fflush(stdout);
}

// A device tensor of seeded values in [-1, 1] (generated on the device from a small host slab: drawing
// hundreds of millions of values on the host takes too long).
DeviceTensor filled(DType dt, std::initializer_list<int64_t> dims, uint64_t seed) {
  DeviceTensor t(dt, dims);
  const size_t slab_elems = size_t(1) << 20;
  const size_t n = size_t(t.t.numel()), elem = dtype_size(dt);
  std::vector<double> slab = random_values(std::min(n, slab_elems), seed, -1, 1);
  DeviceTensor s = upload(slab, dt, {int64_t(slab.size())});
  for (size_t at = 0; at < n; at += slab.size()) {
    const size_t count = std::min(slab.size(), n - at);
    EXPECT_EQ(cudaMemcpy(static_cast<char*>(t.t.data) + at * elem, s.t.data, count * elem,
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
  }
  return t;
}

TEST(CudaBench, DISABLED_ElementwiseBandwidth) {
  LT_REQUIRE_GPU();
  const DType dt = DType::BF16;
  const int64_t N = 8192, D = 4096, F = 14336, H = 32, HD = 128;
  const double e = double(dtype_size(dt));
  // The backward register kernel's grid against the blocks the GPU holds at once (a second wave would show
  // as a slower variant).
  {
    const ops::cuda::RmsNormBackwardOccupancy o = ops::cuda::rmsnorm_backward_occupancy(ctx, D);
    std::printf("BANDWIDTH rmsnorm_backward D %lld: %lld blocks resident, grid %lld%s\n",
                static_cast<long long>(D), static_cast<long long>(o.resident), static_cast<long long>(o.grid),
                o.resident >= o.grid ? "" : "  (MORE THAN ONE WAVE)");
    std::printf("BANDWIDTH rmsnorm_backward D %lld pair: %lld blocks resident, grid %lld: %s\n",
                static_cast<long long>(D), static_cast<long long>(o.pair_resident),
                static_cast<long long>(o.pair_grid),
                o.pair_resident >= o.pair_grid ? "runs paired" : "FALLS BACK TO single-pdl");
  }
  // RMSNorm at a step of 8192 tokens and at a 16K-token chunk (the fixed costs, such as the partial dw
  // rows' write and column sum, weigh less against twice the rows).
  for (const int64_t rows : {N, 2 * N}) {
    DeviceTensor x = filled(dt, {rows, D}, 1), w = filled(dt, {D}, 2), y(dt, {rows, D}),
                 rstd(DType::F32, {rows});
    DeviceTensor dy = filled(dt, {rows, D}, 3), dx(dt, {rows, D}), dw(DType::F32, {D});
    const ops::RmsNormParams p{rows, D, 1e-5};
    // "what rows x D variant" (snprintf: GCC 12's -Wrestrict misfires on chained std::string +).
    const auto label = [&](const char* what, const char* variant) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s %lldx%lld%s", what, static_cast<long long>(rows),
                    static_cast<long long>(D), variant);
      return std::string(buf);
    };
    // Every kernel variant (rmsnorm_select.h; the first, unnamed, is the default), then diagnostics of the
    // default backward: without dw (dx alone: what the partial rows and their column sum cost) and dx +=
    // (dx read too: 4 passes).
    for (const RmsNormVariant& v : kRmsNormVariants) {
      RmsNormChoice choice(v);
      report_bandwidth(label("rmsnorm_forward", v.name).c_str(), double(rows * D) * 2 * e + double(rows) * 4,
                       median_ms(20, [&] { ops::rmsnorm_forward(ctx, p, y.t, rstd.t, x.t, w.t); }));
      report_bandwidth(
          label("rmsnorm_backward (dw f32)", v.name).c_str(), double(rows * D) * 3 * e + double(rows) * 4,
          median_ms(20, [&] { ops::rmsnorm_backward(ctx, p, dx.t, dw.t, dy.t, x.t, w.t, rstd.t); }));
    }
    const Tensor no_dw;
    report_bandwidth(
        label("rmsnorm_backward (no dw)", "").c_str(), double(rows * D) * 3 * e + double(rows) * 4,
        median_ms(20, [&] { ops::rmsnorm_backward(ctx, p, dx.t, no_dw, dy.t, x.t, w.t, rstd.t); }));
    const ops::RmsNormParams pa{rows, D, 1e-5, true};
    report_bandwidth(
        label("rmsnorm_backward (dw f32, dx+=)", "").c_str(), double(rows * D) * 4 * e + double(rows) * 4,
        median_ms(20, [&] { ops::rmsnorm_backward(ctx, pa, dx.t, dw.t, dy.t, x.t, w.t, rstd.t); }));
  }
  {
    DeviceTensor x = filled(dt, {N, D}, 1), y = filled(dt, {N, D}, 2);
    report_bandwidth("add_inplace", double(N * D) * 3 * e,
                     median_ms(20, [&] { ops::add_inplace(ctx, y.t, x.t); }));
  }
  {
    DeviceTensor q = filled(dt, {N, H, HD}, 4);
    std::vector<int32_t> pos(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) pos[size_t(i)] = int32_t(i % 1024);
    DeviceTensor positions = upload_i32(pos, {N});
    ops::RopeParams p{N, H, HD, 500000.0};
    p.type = ops::RopeType::Llama3;
    p.factor = 8.0;
    report_bandwidth("rope_forward (in place)", double(N * H * HD) * 2 * e + double(N) * 4,
                     median_ms(20, [&] { ops::rope_forward(ctx, p, q.t, positions.t); }));
    report_bandwidth("rope_backward (in place)", double(N * H * HD) * 2 * e + double(N) * 4,
                     median_ms(20, [&] { ops::rope_backward(ctx, p, q.t, positions.t); }));
  }
  {
    DeviceTensor gate = filled(dt, {N, F}, 5), up = filled(dt, {N, F}, 6), h(dt, {N, F});
    DeviceTensor dh = filled(dt, {N, F}, 7), dgate(dt, {N, F}), dup(dt, {N, F});
    const ops::SwigluParams p{N, F};
    report_bandwidth("swiglu_forward", double(N * F) * 3 * e,
                     median_ms(20, [&] { ops::swiglu_forward(ctx, p, h.t, gate.t, up.t); }));
    report_bandwidth("swiglu_backward", double(N * F) * 5 * e, median_ms(20, [&] {
                       ops::swiglu_backward(ctx, p, dgate.t, dup.t, dh.t, gate.t, up.t);
                     }));
  }
}

}  // namespace
}  // namespace lt::test
