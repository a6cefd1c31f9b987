// BLOOM's ops on the GPU vs the CPU float64 reference (GPU.md): LayerNorm with bias (forward, dx written
// and accumulated, dw/db), BLOOM's tanh GELU, and attention with ALiBi (the CUDA-core kernels, whatever the
// attention option asks: cuDNN and the tensor-core kernels decline ALiBi), with odd head counts, a query
// offset, windows and packed segments (the biases keyed on positions within a segment). One PARITY row per
// op, dtype and shape.
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

constexpr DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(CudaParity, LayerNorm) {
  LT_REQUIRE_GPU();
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {129, 1024}, {64, 4096}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const int64_t N = shapes[si][0], D = shapes[si][1];
      const uint64_t seed = 9100 + uint64_t(dt) * 101 + si;
      for (bool accumulate : {false, true}) {
        const ops::LayerNormParams p{N, D, 1e-5, accumulate};
        std::vector<double> x = random_values(size_t(N * D), seed, -2, 3),
                            w = random_values(size_t(D), seed + 1), b = random_values(size_t(D), seed + 2),
                            dy = random_values(size_t(N * D), seed + 3),
                            dx = random_values(size_t(N * D), seed + 4),
                            dw = random_values(size_t(D), seed + 5), db = random_values(size_t(D), seed + 6);
        DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {D}), g_b = upload(b, dt, {D}),
                     g_dy = upload(dy, dt, {N, D});
        DeviceTensor g_dx = accumulate ? upload(dx, dt, {N, D}) : poisoned(dt, {N, D});
        DeviceTensor g_dw = upload(dw, DType::F32, {D}), g_db = upload(db, DType::F32, {D});
        DeviceTensor g_y = poisoned(dt, {N, D}), g_rstd = poisoned(DType::F32, {N});
        ops::layernorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t, g_b.t);
        ops::layernorm_backward(ctx, p, g_dx.t, dt == DType::F32 ? g_dw.t : Tensor(),
                                dt == DType::F32 ? g_db.t : Tensor(), g_dy.t, g_x.t, g_w.t, g_rstd.t);
        std::vector<double> y(size_t(N * D)), rstd(static_cast<size_t>(N));
        ops::cpu::layernorm_forward(p, host(y, {N, D}), host(rstd, {N}), host(x, {N, D}), host(w, {D}),
                                    host(b, {D}));
        ops::cpu::layernorm_backward(p, host(dx, {N, D}), host(dw, {D}), host(db, {D}), host(dy, {N, D}),
                                     host(x, {N, D}), host(w, {D}), host(rstd, {N}));
        Worst fw, bw;
        fw.add("y", download(g_y), y);
        fw.add("rstd", download(g_rstd), rstd);
        bw.add("dx", download(g_dx), dx);
        if (dt == DType::F32) {  // f32 parameter gradients (GPU.md: dw may be f32 under 16-bit inputs)
          bw.add("dw", download(g_dw), dw);
          bw.add("db", download(g_db), db);
        }
        const std::string shape = fmt::format("({}, {}){}", N, D, accumulate ? " +=" : "");
        report("layernorm_forward", dt, shape, fw, tolerance(dt));
        report("layernorm_backward", dt, shape, bw, tolerance(dt));
      }
    }
}

TEST(CudaParity, BloomGelu) {
  LT_REQUIRE_GPU();
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {128, 4096}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const int64_t N = shapes[si][0], F = shapes[si][1];
      const uint64_t seed = 9200 + uint64_t(dt) * 101 + si;
      const ops::BloomGeluParams p{N, F};
      std::vector<double> x = random_values(size_t(N * F), seed, -5, 5),
                          dh = random_values(size_t(N * F), seed + 1);
      // A lone element is measured against itself: drawn in the negative tail, 1 + tanh cancels in f32
      // (relative error ~1e-4 in any f32 GELU, torch's too), which says nothing of the kernel. It is 1.5.
      if (N * F == 1) x[0] = 1.5;
      DeviceTensor g_x = upload(x, dt, {N, F}), g_dh = upload(dh, dt, {N, F});
      DeviceTensor g_h = poisoned(dt, {N, F}), g_dx = poisoned(dt, {N, F});
      ops::bloom_gelu_forward(ctx, p, g_h.t, g_x.t);
      ops::bloom_gelu_backward(ctx, p, g_dx.t, g_dh.t, g_x.t);
      std::vector<double> h(size_t(N * F)), dx(size_t(N * F));
      ops::cpu::bloom_gelu_forward(p, host(h, {N, F}), host(x, {N, F}));
      ops::cpu::bloom_gelu_backward(p, host(dx, {N, F}), host(dh, {N, F}), host(x, {N, F}));
      Worst fw, bw;
      fw.add("h", download(g_h), h);
      bw.add("dx", download(g_dx), dx);
      report("bloom_gelu_forward", dt, fmt::format("({}, {})", N, F), fw, tolerance(dt));
      report("bloom_gelu_backward", dt, fmt::format("({}, {})", N, F), bw, tolerance(dt));
    }
}

struct AlibiCase {
  int64_t B, Tq, S, H, HD, q_offset, window;
  bool segments;
};

TEST(CudaParity, AttentionAlibi) {
  LT_REQUIRE_GPU();
  const AlibiCase cases[] = {{2, 37, 37, 6, 64, 0, 0, false},
                             {1, 100, 130, 16, 64, 30, 0, false},
                             {2, 129, 200, 12, 64, 71, 0, true},
                             {1, 150, 150, 5, 128, 0, 40, true},
                             {1, 130, 200, 5, 256, 70, 50, true}};
  for (const char* kernel : {"auto", "tc", "simt"})
    for (DType dt : {DType::F32, DType::BF16})
      for (size_t ci = 0; ci < std::size(cases); ++ci) {
        AttentionKernelChoice choice(kernel);
        const auto [B, Tq, S, H, HD, q_offset, window, segmented] = cases[ci];
        const uint64_t seed = 9300 + uint64_t(dt) * 101 + ci * 10;
        ops::AttentionParams p{B, Tq, S, H, H, HD, q_offset, window, 1.0 / std::sqrt(double(HD))};
        p.alibi = true;
        const size_t nq = size_t(B * Tq * H * HD), nk = size_t(B * S * H * HD);
        std::vector<double> q = random_values(nq, seed, -2, 2), k = random_values(nk, seed + 1, -2, 2),
                            v = random_values(nk, seed + 2), dout = random_values(nq, seed + 3),
                            dk = random_values(nk, seed + 4), dv = random_values(nk, seed + 5);
        DeviceTensor g_q = upload(q, dt, {B, Tq, H, HD}), g_k = upload(k, dt, {B, S, H, HD}),
                     g_v = upload(v, dt, {B, S, H, HD}), g_dout = upload(dout, dt, {B, Tq, H, HD}),
                     g_dk = upload(dk, dt, {B, S, H, HD}), g_dv = upload(dv, dt, {B, S, H, HD});
        DeviceTensor g_out = poisoned(dt, {B, Tq, H, HD}), g_dq = poisoned(dt, {B, Tq, H, HD});
        DeviceTensor g_lse = poisoned(DType::F32, {B, H, Tq});
        std::vector<int32_t> kseg, qseg;
        Tensor h_qseg, h_kseg;
        if (segmented) {
          kseg.resize(size_t(B * S));
          for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < S; ++j) kseg[size_t(b * S + j)] = int32_t(1 + j / (23 + 7 * b));
          qseg.resize(size_t(B * Tq));
          for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < Tq; ++i) qseg[size_t(b * Tq + i)] = kseg[size_t(b * S + q_offset + i)];
          h_qseg = Tensor(qseg.data(), DType::I32, {B, Tq});
          h_kseg = Tensor(kseg.data(), DType::I32, {B, S});
        }
        DeviceTensor g_qseg = segmented ? upload_i32(qseg, {B, Tq}) : DeviceTensor();
        DeviceTensor g_kseg = segmented ? upload_i32(kseg, {B, S}) : DeviceTensor();
        ops::attention_forward(ctx, p, g_out.t, g_lse.t, g_q.t, g_k.t, g_v.t, g_qseg.t, g_kseg.t);
        ops::attention_backward(ctx, p, g_dq.t, g_dk.t, g_dv.t, g_dout.t, g_out.t, g_lse.t, g_q.t, g_k.t,
                                g_v.t, g_qseg.t, g_kseg.t);
        std::vector<double> out(nq), lse(size_t(B * H * Tq)), dq(nq);
        ops::cpu::attention_forward(p, host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}),
                                    host(q, {B, Tq, H, HD}), host(k, {B, S, H, HD}), host(v, {B, S, H, HD}),
                                    h_qseg, h_kseg);
        ops::cpu::attention_backward(
            p, host(dq, {B, Tq, H, HD}), host(dk, {B, S, H, HD}), host(dv, {B, S, H, HD}),
            host(dout, {B, Tq, H, HD}), host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}),
            host(q, {B, Tq, H, HD}), host(k, {B, S, H, HD}), host(v, {B, S, H, HD}), h_qseg, h_kseg);
        Worst fw, bw;
        fw.add("out", download(g_out), out);
        fw.add("lse", download(g_lse), lse);
        bw.add("dq", download(g_dq), dq);
        bw.add("dk", download(g_dk), dk);
        bw.add("dv", download(g_dv), dv);
        const std::string shape =
            fmt::format("B{} Tq{} S{} H{} HD{}{}{}{} [{}]", B, Tq, S, H, HD,
                        q_offset ? fmt::format(" off{}", q_offset) : "",
                        window ? fmt::format(" w{}", window) : "", segmented ? " seg" : "", kernel);
        report("attention_alibi_forward", dt, shape, fw, tolerance(dt));
        report("attention_alibi_backward", dt, shape, bw, tolerance(dt));
      }
}

}  // namespace
}  // namespace lt::test
