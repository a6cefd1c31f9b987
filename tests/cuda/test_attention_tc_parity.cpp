// The tensor-core bf16 flash-attention forward (attention_tc.cu) vs the CPU float64 reference and vs the
// CUDA-core kernels of attention.cu (forced with the kernel option attention simt) on the same inputs.
// Shapes: head dims 64 and 128, GQA groups 1 to 4, Tq = S and chunks at a query offset into a longer key
// range, odd lengths, sliding windows (down to 1 token). The tensor-core backward (attention_tc_bwd.cu)
// likewise: vs the reference, vs the SIMT backward on the same forward outputs (dk, dv start from random
// values: both add into them), and run-to-run bit equality. Prints PARITY rows like
// test_attention_parity.cpp, and ATTN_BENCH timing rows (printed, not asserted).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ops/cpu/cpu_attention.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt {
namespace {

using test::DeviceTensor;
using test::host;
using test::poisoned;
using test::random_values;
using test::report;
using test::tolerance;
using test::upload;
using test::Worst;

using KernelChoice = test::AttentionKernelChoice;
using test::ScopedKernelOption;

struct Case {
  int64_t B, Tq, S, H, KVH, HD, q_offset, window;
};

std::string describe(const Case& c) {
  return fmt::format("B{} Tq{} S{} H{}/{} HD{}{}{}", c.B, c.Tq, c.S, c.H, c.KVH, c.HD,
                     c.q_offset ? fmt::format(" off{}", c.q_offset) : "",
                     c.window ? fmt::format(" w{}", c.window) : "");
}

// Raw bytes of a device tensor (bit comparisons).
std::vector<uint8_t> bytes_of(const DeviceTensor& d) {
  std::vector<uint8_t> out(d.t.bytes());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.data(), d.t.data, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(CudaParity, AttentionTensorCoreForwardBackward) {
  LT_REQUIRE_GPU();
  const Case cases[] = {
      {1, 128, 128, 8, 2, 64, 0, 0},    {2, 256, 256, 8, 2, 128, 0, 0},  {1, 100, 1000, 8, 2, 128, 900, 0},
      {1, 100, 1000, 8, 2, 64, 900, 0}, {2, 200, 520, 8, 2, 64, 320, 0}, {1, 300, 300, 8, 2, 128, 0, 100},
      {1, 150, 700, 8, 2, 64, 550, 77}, {1, 1, 37, 8, 8, 128, 36, 0},    {2, 37, 37, 4, 1, 64, 0, 0},
      {1, 1000, 1000, 8, 2, 128, 0, 0}, {1, 130, 200, 4, 2, 128, 70, 1}, {1, 200, 200, 8, 2, 64, 0, 64},
  };
  for (const DType dt : {DType::BF16, DType::F16})
    for (size_t ci = 0; ci < std::size(cases); ++ci) {
      const Case& c = cases[ci];
      const auto [B, Tq, S, H, KVH, HD, q_offset, window] = c;
      const uint64_t seed = 9100 + ci * 10;
      ops::AttentionParams p{B, Tq, S, H, KVH, HD, q_offset, window, 1.0 / std::sqrt(double(HD))};
      const size_t nq = size_t(B * Tq * H * HD), nk = size_t(B * S * KVH * HD);
      std::vector<double> q = random_values(nq, seed, -2, 2), k = random_values(nk, seed + 1, -2, 2);
      std::vector<double> v = random_values(nk, seed + 2), dout = random_values(nq, seed + 3);
      std::vector<double> dk = random_values(nk, seed + 4), dv = random_values(nk, seed + 5);
      DeviceTensor g_q = upload(q, dt, {B, Tq, H, HD}), g_k = upload(k, dt, {B, S, KVH, HD});
      DeviceTensor g_v = upload(v, dt, {B, S, KVH, HD}), g_dout = upload(dout, dt, {B, Tq, H, HD});
      DeviceTensor g_dk = upload(dk, dt, {B, S, KVH, HD}), g_dv = upload(dv, dt, {B, S, KVH, HD});
      std::vector<double> dk_start = dk,
                          dv_start = dv;  // rounded by the uploads above: the same start values
      DeviceTensor g_dk2 = upload(dk_start, dt, {B, S, KVH, HD}),
                   g_dv2 = upload(dv_start, dt, {B, S, KVH, HD});
      DeviceTensor s_dk = upload(dk_start, dt, {B, S, KVH, HD}), s_dv = upload(dv_start, dt, {B, S, KVH, HD});
      DeviceTensor g_out = poisoned(dt, {B, Tq, H, HD}), g_dq = poisoned(dt, {B, Tq, H, HD});
      DeviceTensor g_lse = poisoned(DType::F32, {B, H, Tq}), g_dq2 = poisoned(dt, {B, Tq, H, HD});
      DeviceTensor g_out2 = poisoned(dt, {B, Tq, H, HD}), g_lse2 = poisoned(DType::F32, {B, H, Tq});
      DeviceTensor s_out = poisoned(dt, {B, Tq, H, HD}), s_lse = poisoned(DType::F32, {B, H, Tq});
      DeviceTensor s_dq = poisoned(dt, {B, Tq, H, HD});
      {
        KernelChoice tc("tc");
        ops::attention_forward(ctx, p, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
        ops::attention_forward(ctx, p, g_out2.t, g_lse2.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
        ops::attention_backward(ctx, p, g_dq.t, g_dk.t, g_dv.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t,
                                g_v.t, Tensor(), Tensor());
        ops::attention_backward(ctx, p, g_dq2.t, g_dk2.t, g_dv2.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t,
                                g_v.t, Tensor(), Tensor());
      }
      {
        KernelChoice simt("simt");
        ops::attention_forward(ctx, p, s_out.t, s_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
        // On the tensor-core forward's out and lse, so that only the backward kernels differ.
        ops::attention_backward(ctx, p, s_dq.t, s_dk.t, s_dv.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t,
                                g_v.t, Tensor(), Tensor());
      }

      std::vector<double> out(nq), lse(size_t(B * H * Tq)), dq(nq);
      ops::cpu::attention_forward(p, host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}),
                                  host(q, {B, Tq, H, HD}), host(k, {B, S, KVH, HD}), host(v, {B, S, KVH, HD}),
                                  Tensor(), Tensor());
      ops::cpu::attention_backward(p, host(dq, {B, Tq, H, HD}), host(dk, {B, S, KVH, HD}),
                                   host(dv, {B, S, KVH, HD}), host(dout, {B, Tq, H, HD}),
                                   host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}), host(q, {B, Tq, H, HD}),
                                   host(k, {B, S, KVH, HD}), host(v, {B, S, KVH, HD}), Tensor(), Tensor());
      const std::vector<double> tc_out = test::download(g_out), tc_lse = test::download(g_lse);
      const std::vector<double> tc_dq = test::download(g_dq), tc_dk = test::download(g_dk);
      const std::vector<double> tc_dv = test::download(g_dv);
      Worst fw, bw, ab_fw, ab_bw;
      fw.add("out", tc_out, out);
      fw.add("lse", tc_lse, lse);
      bw.add("dq", tc_dq, dq);
      bw.add("dk", tc_dk, dk);
      bw.add("dv", tc_dv, dv);
      ab_fw.add("out", tc_out, test::download(s_out));
      ab_fw.add("lse", tc_lse, test::download(s_lse));
      // With a one-token window dS = dP - delta is zero up to rounding: both kernels' dq are noise around 0
      // (each checked against the float64 reference, itself ~0 there), not comparable with each other.
      if (window != 1) ab_bw.add("dq", tc_dq, test::download(s_dq));
      ab_bw.add("dk", tc_dk, test::download(s_dk));
      ab_bw.add("dv", tc_dv, test::download(s_dv));
      report("attention_fwd_tc", dt, describe(c), fw, tolerance(dt));
      // Every CTA shape of the forward (warps x 16-row blocks per warp), whichever is the default (bf16: f16
      // has the default shape only).
      for (const char* shape : {"4x1", "8x1", "4x2"}) {
        if (dt != DType::BF16) break;
        ScopedKernelOption tc_shape("attention_tc_shape", shape);
        KernelChoice tc("tc");
        DeviceTensor r_out = poisoned(dt, {B, Tq, H, HD}), r_lse = poisoned(DType::F32, {B, H, Tq});
        ops::attention_forward(ctx, p, r_out.t, r_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
        Worst w;
        w.add("out", test::download(r_out), out);
        w.add("lse", test::download(r_lse), lse);
        report(std::string("attention_fwd_tc_") + shape, dt, describe(c), w, tolerance(dt));
      }
      report("attention_bwd_tc", dt, describe(c), bw, tolerance(dt));
      report("attention_fwd_tc_vs_simt", dt, describe(c), ab_fw, tolerance(dt));
      report("attention_bwd_tc_vs_simt", dt, describe(c), ab_bw, tolerance(dt));

      // Same inputs, same bits; and the variable really switched kernels (P is rounded to bf16 on the tensor
      // cores only, so some output bits differ once a row sees more than one key).
      EXPECT_EQ(bytes_of(g_out), bytes_of(g_out2)) << describe(c) << ": two forward runs differ";
      EXPECT_EQ(bytes_of(g_lse), bytes_of(g_lse2)) << describe(c) << ": two forward runs differ (lse)";
      EXPECT_EQ(bytes_of(g_dq), bytes_of(g_dq2)) << describe(c) << ": two backward runs differ (dq)";
      EXPECT_EQ(bytes_of(g_dk), bytes_of(g_dk2)) << describe(c) << ": two backward runs differ (dk)";
      EXPECT_EQ(bytes_of(g_dv), bytes_of(g_dv2)) << describe(c) << ": two backward runs differ (dv)";
      if (Tq * S >= 100 * 100 && window != 1) {
        EXPECT_NE(bytes_of(g_out), bytes_of(s_out))
            << describe(c) << ": LT_ATTENTION_KERNEL=simt gave the same bits: did the same kernel run twice?";
      }
    }
}

// Rows that see one key only (window 1) must return that key's value exactly (p = 1 after rounding).
TEST(CudaParity, AttentionTensorCoreWindowOneIsIdentity) {
  LT_REQUIRE_GPU();
  const int64_t B = 1, T = 150, H = 4, KVH = 2, HD = 64;
  ops::AttentionParams p{B, T, T, H, KVH, HD, 0, 1, 1.0 / std::sqrt(double(HD))};
  std::vector<double> q = random_values(size_t(B * T * H * HD), 31, -2, 2);
  std::vector<double> k = random_values(size_t(B * T * KVH * HD), 32, -2, 2);
  std::vector<double> v = random_values(size_t(B * T * KVH * HD), 33);
  DeviceTensor g_q = upload(q, DType::BF16, {B, T, H, HD}), g_k = upload(k, DType::BF16, {B, T, KVH, HD});
  DeviceTensor g_v = upload(v, DType::BF16, {B, T, KVH, HD}), g_out = poisoned(DType::BF16, {B, T, H, HD});
  DeviceTensor g_lse = poisoned(DType::F32, {B, H, T});
  KernelChoice tc("tc");
  ops::attention_forward(ctx, p, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
  const std::vector<double> out = test::download(g_out);
  int64_t wrong = 0;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < HD; ++d) {
        const double want = v[size_t((i * KVH + h / (H / KVH)) * HD + d)];
        if (out[size_t((i * H + h) * HD + d)] != want) ++wrong;
      }
  EXPECT_EQ(wrong, 0) << "rows with a one-token window must copy their own value row";
}

// Not asserted: TFLOP/s of both forward kernels (and of the backward, the same kernels either way) at
// B=1, H=32/8, HD=128, T=8192, causal. Forward FLOPs = 2 * 2 * B * H * T * T * HD / 2, backward 2.5x.
TEST(CudaBench, DISABLED_AttentionTensorCoreTiming) {
  LT_REQUIRE_GPU();
  const int64_t B = 1, T = 8192, H = 32, KVH = 8, HD = 128;
  ops::AttentionParams p{B, T, T, H, KVH, HD, 0, 0, 1.0 / std::sqrt(double(HD))};
  const size_t nq = size_t(B * T * H * HD), nk = size_t(B * T * KVH * HD);
  std::vector<double> q = random_values(nq, 1), k = random_values(nk, 2), v = random_values(nk, 3);
  std::vector<double> dout = random_values(nq, 4), zeros(nk, 0.0);
  DeviceTensor g_q = upload(q, DType::BF16, {B, T, H, HD}), g_k = upload(k, DType::BF16, {B, T, KVH, HD});
  DeviceTensor g_v = upload(v, DType::BF16, {B, T, KVH, HD}),
               g_dout = upload(dout, DType::BF16, {B, T, H, HD});
  DeviceTensor g_dk = upload(zeros, DType::BF16, {B, T, KVH, HD}),
               g_dv = upload(zeros, DType::BF16, {B, T, KVH, HD});
  DeviceTensor g_out = poisoned(DType::BF16, {B, T, H, HD}), g_dq = poisoned(DType::BF16, {B, T, H, HD});
  DeviceTensor g_lse = poisoned(DType::F32, {B, H, T});
  const double fwd_flops = 2.0 * 2.0 * double(B * H) * double(T) * double(T) * double(HD) / 2.0;
  cudaEvent_t e0, e1, e2;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e2), cudaSuccess);
  // tc4x1 / tc8x1 / tc4x2: the tensor-core forward's CTA shapes, warps x 16-row blocks per warp
  // (the kernel option attention_tc_shape); the backward is the same in all three.
  for (const char* kernel : {"tc4x1", "tc8x1", "tc4x2", "simt"}) {
    const bool simt = std::strcmp(kernel, "simt") == 0;
    KernelChoice choice(simt ? "simt" : "tc");
    ScopedKernelOption shape("attention_tc_shape", simt ? nullptr : kernel + 2);
    std::vector<float> fw_ms, bw_ms;
    for (int it = 0; it < 4; ++it) {
      cudaEventRecord(e0);
      ops::attention_forward(ctx, p, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
      cudaEventRecord(e1);
      ops::attention_backward(ctx, p, g_dq.t, g_dk.t, g_dv.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t,
                              Tensor(), Tensor());
      cudaEventRecord(e2);
      ASSERT_EQ(cudaEventSynchronize(e2), cudaSuccess);
      float a = 0, b = 0;
      cudaEventElapsedTime(&a, e0, e1);
      cudaEventElapsedTime(&b, e1, e2);
      if (it > 0) fw_ms.push_back(a), bw_ms.push_back(b);  // the first run warms up
    }
    std::sort(fw_ms.begin(), fw_ms.end());
    std::sort(bw_ms.begin(), bw_ms.end());
    const double fw = fw_ms[fw_ms.size() / 2], bw = bw_ms[bw_ms.size() / 2];
    std::printf(
        "ATTN_BENCH kernel=%-5s bf16 causal B=%lld T=%lld H=%lld/%lld HD=%lld  fwd %.3f ms %.1f TFLOP/s  "
        "bwd %.3f ms %.1f TFLOP/s\n",
        kernel, (long long)B, (long long)T, (long long)H, (long long)KVH, (long long)HD, fw,
        fwd_flops / fw * 1e-9, bw, 2.5 * fwd_flops / bw * 1e-9);
    std::fflush(stdout);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
}

}  // namespace
}  // namespace lt
