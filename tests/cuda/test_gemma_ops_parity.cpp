// Gemma's ops on CUDA vs the CPU float64 reference (GPU.md), as test_ops_parity.cpp does for the others:
// GeGLU, RMSNorm with (1 + w) on every kernel variant, attention with soft-capping (with and without a
// window, the CUDA-core kernels: the tensor-core ones and cuDNN are not eligible), the final-logit soft-cap
// and the cross-entropy's and fused head's slope through it. One PARITY row per (op, dtype, shape).
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/cpu/cpu_attention.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

constexpr DType kDtypes[] = {DType::F32, DType::BF16};

TEST(CudaParity, Geglu) {
  LT_REQUIRE_GPU();
  for (DType dt : kDtypes)
    for (const auto& [N, F] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {300, 1000}}) {
      const uint64_t seed = 9100 + uint64_t(dt) * 101 + uint64_t(F);
      const ops::GegluParams p{N, F};
      std::vector<double> g = random_values(static_cast<size_t>(N * F), seed, -4, 4),
                          u = random_values(static_cast<size_t>(N * F), seed + 1);
      std::vector<double> dh = random_values(static_cast<size_t>(N * F), seed + 2);
      DeviceTensor g_g = upload(g, dt, {N, F}), g_u = upload(u, dt, {N, F}), g_dh = upload(dh, dt, {N, F});
      DeviceTensor g_h = poisoned(dt, {N, F}), g_dg = poisoned(dt, {N, F}), g_du = poisoned(dt, {N, F});
      ops::geglu_forward(ctx, p, g_h.t, g_g.t, g_u.t);
      ops::geglu_backward(ctx, p, g_dg.t, g_du.t, g_dh.t, g_g.t, g_u.t);
      std::vector<double> h(static_cast<size_t>(N * F)), dg(static_cast<size_t>(N * F)),
          du(static_cast<size_t>(N * F));
      ops::cpu::geglu_forward(p, host(h, {N, F}), host(g, {N, F}), host(u, {N, F}));
      ops::cpu::geglu_backward(p, host(dg, {N, F}), host(du, {N, F}), host(dh, {N, F}), host(g, {N, F}),
                               host(u, {N, F}));
      Worst fw, bw;
      fw.add("h", download(g_h), h);
      bw.add("dgate", download(g_dg), dg);
      bw.add("dup", download(g_du), du);
      const std::string shape = fmt::format("({}, {})", N, F);
      report("geglu_forward", dt, shape, fw, tolerance(dt));
      report("geglu_backward", dt, shape, bw, tolerance(dt));
    }
}

TEST(CudaParity, RmsNormOnePlus) {
  LT_REQUIRE_GPU();
  for (DType dt : kDtypes)
    for (const auto& [N, D] : {std::pair<int64_t, int64_t>{3, 257}, {64, 2304}, {1000, 896}})
      for (const RmsNormVariant& v : kRmsNormVariants) {
        RmsNormChoice choice(v);
        const uint64_t seed = 9200 + uint64_t(dt) * 101 + uint64_t(D);
        const ops::RmsNormParams p{.rows = N, .dim = D, .eps = 1e-6, .one_plus_weight = true};
        std::vector<double> x = random_values(static_cast<size_t>(N * D), seed, -2, 2),
                            w = random_values(static_cast<size_t>(D), seed + 1, -0.5, 0.5);
        std::vector<double> dy = random_values(static_cast<size_t>(N * D), seed + 2),
                            dw(static_cast<size_t>(D), 0.0);
        DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {D}), g_dy = upload(dy, dt, {N, D});
        DeviceTensor g_dw = upload(dw, dt, {D});
        DeviceTensor g_y = poisoned(dt, {N, D}), g_rstd = poisoned(DType::F32, {N}),
                     g_dx = poisoned(dt, {N, D});
        ops::rmsnorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t);
        ops::rmsnorm_backward(ctx, p, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
        std::vector<double> y(static_cast<size_t>(N * D)), rstd(static_cast<size_t>(N)),
            dx(static_cast<size_t>(N * D));
        ops::cpu::rmsnorm_forward(p, host(y, {N, D}), host(rstd, {N}), host(x, {N, D}), host(w, {D}));
        ops::cpu::rmsnorm_backward(p, host(dx, {N, D}), host(dw, {D}), host(dy, {N, D}), host(x, {N, D}),
                                   host(w, {D}), host(rstd, {N}));
        Worst fw, bw;
        fw.add("y", download(g_y), y);
        bw.add("dx", download(g_dx), dx);
        bw.add("dw", download(g_dw), dw);
        const std::string shape = fmt::format("({}, {}) {}", N, D, v.name);
        report("rmsnorm_one_plus_forward", dt, shape, fw, tolerance(dt));
        report("rmsnorm_one_plus_backward", dt, shape, bw, tolerance(dt));
      }
}

TEST(CudaParity, AttentionSoftcap) {
  LT_REQUIRE_GPU();
  struct Case {
    int64_t B, Tq, S, H, KVH, HD, q_offset, window;
  };
  // The last two: Gemma's head dim 256 with a sliding window (its local layers) and without (global ones).
  const Case cases[] = {{2, 37, 37, 4, 2, 64, 0, 0},
                        {1, 100, 130, 8, 2, 128, 30, 16},
                        {2, 150, 150, 4, 4, 128, 0, 40},
                        {2, 150, 150, 8, 4, 256, 0, 40},
                        {1, 100, 230, 4, 2, 256, 130, 0}};
  for (DType dt : kDtypes)
    for (size_t ci = 0; ci < std::size(cases); ++ci) {
      const auto [B, Tq, S, H, KVH, HD, q_offset, window] = cases[ci];
      const uint64_t seed = 9300 + uint64_t(dt) * 101 + ci * 10;
      // Scores reach |t| ~ 10 with these inputs: a cap of 5 bends them.
      ops::AttentionParams p{B, Tq, S, H, KVH, HD, q_offset, window, 1.0 / std::sqrt(double(HD)), 5.0};
      const size_t nq = static_cast<size_t>(B * Tq * H * HD), nk = static_cast<size_t>(B * S * KVH * HD);
      std::vector<double> q = random_values(nq, seed, -2, 2), k = random_values(nk, seed + 1, -2, 2);
      std::vector<double> v = random_values(nk, seed + 2), dout = random_values(nq, seed + 3);
      std::vector<double> dk(nk, 0.0), dv(nk, 0.0);
      DeviceTensor g_q = upload(q, dt, {B, Tq, H, HD}), g_k = upload(k, dt, {B, S, KVH, HD});
      DeviceTensor g_v = upload(v, dt, {B, S, KVH, HD}), g_dout = upload(dout, dt, {B, Tq, H, HD});
      DeviceTensor g_dk = upload(dk, dt, {B, S, KVH, HD}), g_dv = upload(dv, dt, {B, S, KVH, HD});
      DeviceTensor g_out = poisoned(dt, {B, Tq, H, HD}), g_dq = poisoned(dt, {B, Tq, H, HD});
      DeviceTensor g_lse = poisoned(DType::F32, {B, H, Tq});
      ops::attention_forward(ctx, p, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t, Tensor(), Tensor());
      ops::attention_backward(ctx, p, g_dq.t, g_dk.t, g_dv.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t,
                              Tensor(), Tensor());
      std::vector<double> out(nq), lse(static_cast<size_t>(B * H * Tq)), dq(nq);
      ops::cpu::attention_forward(p, host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}),
                                  host(q, {B, Tq, H, HD}), host(k, {B, S, KVH, HD}), host(v, {B, S, KVH, HD}),
                                  Tensor(), Tensor());
      ops::cpu::attention_backward(p, host(dq, {B, Tq, H, HD}), host(dk, {B, S, KVH, HD}),
                                   host(dv, {B, S, KVH, HD}), host(dout, {B, Tq, H, HD}),
                                   host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}), host(q, {B, Tq, H, HD}),
                                   host(k, {B, S, KVH, HD}), host(v, {B, S, KVH, HD}), Tensor(), Tensor());
      Worst fw, bw;
      fw.add("out", download(g_out), out);
      fw.add("lse", download(g_lse), lse);
      bw.add("dq", download(g_dq), dq);
      bw.add("dk", download(g_dk), dk);
      bw.add("dv", download(g_dv), dv);
      const std::string shape =
          fmt::format("B{} Tq{} S{} H{}/{} HD{} off{} w{} cap5", B, Tq, S, H, KVH, HD, q_offset, window);
      report("attention_softcap_forward", dt, shape, fw, tolerance(dt));
      report("attention_softcap_backward", dt, shape, bw, tolerance(dt));
    }
}

TEST(CudaParity, LogitSoftcapAndFusedHead) {
  LT_REQUIRE_GPU();
  const int64_t N = 67, D = 96, V = 1003;
  for (DType dt : kDtypes) {
    const uint64_t seed = 9400 + uint64_t(dt) * 101;
    std::vector<double> x = random_values(static_cast<size_t>(N * D), seed, -2, 2),
                        w = random_values(static_cast<size_t>(V * D), seed + 1, -0.3, 0.3);
    std::vector<int32_t> labels = random_ints(static_cast<size_t>(N), seed + 2, 0, int32_t(V));
    labels[3] = -100;
    std::vector<double> dx(static_cast<size_t>(N * D), 0.0), dw(static_cast<size_t>(V * D), 0.0);
    DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {V, D}), g_labels = upload_i32(labels, {N});
    DeviceTensor g_dx = poisoned(dt, {N, D}), g_dw = upload(dw, dt, {V, D});
    DeviceTensor g_losses = poisoned(DType::F32, {N}), g_lse = poisoned(DType::F32, {N});
    const ops::FusedLinearCrossEntropyParams p{.rows = N,
                                               .dim = D,
                                               .vocab = V,
                                               .grad_scale = 0.1,
                                               .token_block = 32,
                                               .vocab_block = 256,
                                               .softcap = 3.0};
    ops::fused_linear_cross_entropy_forward_backward(ctx, p, g_losses.t, g_lse.t, g_dx.t, g_dw.t, g_x.t,
                                                     g_w.t, g_labels.t);
    std::vector<double> losses(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
    Tensor h_labels(labels.data(), DType::I32, {N});
    ops::cpu::fused_linear_cross_entropy_forward(p, host(losses, {N}), host(lse, {N}), host(x, {N, D}),
                                                 host(w, {V, D}), h_labels);
    ops::cpu::fused_linear_cross_entropy_backward(p, host(dx, {N, D}), host(dw, {V, D}), host(x, {N, D}),
                                                  host(w, {V, D}), host(lse, {N}), h_labels);
    Worst fw, bw;
    fw.add("losses", download(g_losses), losses);
    fw.add("lse", download(g_lse), lse);
    bw.add("dx", download(g_dx), dx);
    bw.add("dw", download(g_dw), dw);
    const std::string shape = fmt::format("N{} D{} V{} cap3", N, D, V);
    report("fused_lce_softcap_forward", dt, shape, fw, tolerance(dt));
    report("fused_lce_softcap_backward", dt, shape, bw, tolerance(dt));

    // The plain head: logit_softcap_forward, then the cross-entropy with the slope.
    std::vector<double> z = random_values(static_cast<size_t>(N * V), seed + 3, -6, 6);
    DeviceTensor g_z = upload(z, dt, {N, V});
    ops::logit_softcap_forward(ctx, {.rows = N, .cols = V, .cap = 3.0}, g_z.t);
    ops::cpu::logit_softcap_forward({.rows = N, .cols = V, .cap = 3.0}, host(z, {N, V}));
    Worst cap;
    cap.add("logits", download(g_z), z);
    report("logit_softcap_forward", dt, fmt::format("({}, {})", N, V), cap, tolerance(dt));
  }
}

}  // namespace
}  // namespace lt::test
