// cuDNN's fused attention backend (ops/cuda/cudnn_attention.cpp) through ops::attention_forward/backward
// with LT_ATTENTION_KERNEL=cudnn: against the CPU float64 reference (dk, dv start from random values: the
// backend must add into them), on GQA and plain multi-head shapes, head dims 64 and 128, batches 1 and 2,
// Tq = S and chunks at an offset into a longer key range (also a K/V buffer longer than the keys the last
// query sees, as the chunked decoder passes), odd lengths, ALiBi (BLOOM: whole and chunked, power-of-two and
// other head counts); against our tensor-core kernels on larger shapes;
// the deterministic switch and ineligible calls keep to our kernels. Where no cuDNN 9.16+ can be loaded
// (make test-cuda looks for the PyTorch wheel's, tools/find_cudnn.sh), each test checks the fallback on its
// cases instead: attention under auto runs on leantune's kernels (the bits of LT_ATTENTION_KERNEL=tc, no
// cuDNN plan built), LT_ATTENTION_KERNEL=cudnn is refused naming why, and the run header's attention line
// says which kernels run and why. Disabled: a timing bench (cuDNN vs tensor cores, first call with the plan
// build) and a probe that logs every step of building the graphs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ops/cpu/cpu_attention.h"
#include "ops/cuda/attention_select.h"
#include "ops/cuda/cudnn_attention.h"
#include "ops/device.h"
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

struct Case {
  int64_t B, Tq, S, H, KVH, HD, q_offset;
  bool alibi = false;  // BLOOM's ALiBi biases (ops/alibi.h)
};

std::string describe(const Case& c) {
  return fmt::format("B{} Tq{} S{} H{}/{} HD{}{}{}", c.B, c.Tq, c.S, c.H, c.KVH, c.HD,
                     c.q_offset ? fmt::format(" off{}", c.q_offset) : "", c.alibi ? " alibi" : "");
}

ops::AttentionParams params(const Case& c) {
  ops::AttentionParams p{c.B, c.Tq, c.S, c.H, c.KVH, c.HD, c.q_offset, 0, 1.0 / std::sqrt(double(c.HD))};
  p.alibi = c.alibi;
  return p;
}

// `values` rounded to bf16 in place (what an upload to bf16 keeps).
void round_to_bf16(std::vector<double>& values) {
  std::vector<uint16_t> bits(values.size());
  convert_elements(bits.data(), DType::BF16, values.data(), DType::F64, values.size());
  convert_elements(values.data(), DType::F64, bits.data(), DType::BF16, values.size());
}

// Host values of one case (rounded to bf16 by the uploads); dk, dv start from random values (the backward
// adds into them).
struct HostInputs {
  std::vector<double> hq, hk, hv, hdout, dk_start, dv_start;
  HostInputs(const Case& c, uint64_t seed) {
    const size_t nq = size_t(c.B * c.Tq * c.H * c.HD), nk = size_t(c.B * c.S * c.KVH * c.HD);
    hq = random_values(nq, seed, -2, 2), hk = random_values(nk, seed + 1, -2, 2);
    hv = random_values(nk, seed + 2), hdout = random_values(nq, seed + 3);
    dk_start = random_values(nk, seed + 4), dv_start = random_values(nk, seed + 5);
    round_to_bf16(dk_start);
    round_to_bf16(dv_start);
  }
};

struct Inputs : HostInputs {
  DeviceTensor q, k, v, dout;
  Inputs(const Case& c, uint64_t seed)
      : HostInputs(c, seed),
        q(upload(hq, DType::BF16, {c.B, c.Tq, c.H, c.HD})),
        k(upload(hk, DType::BF16, {c.B, c.S, c.KVH, c.HD})),
        v(upload(hv, DType::BF16, {c.B, c.S, c.KVH, c.HD})),
        dout(upload(hdout, DType::BF16, {c.B, c.Tq, c.H, c.HD})) {}
};

// out, lse, dq, dk, dv of one implementation; dk, dv start from in.dk_start / in.dv_start, or from zeros.
struct Results {
  std::vector<double> dk_init, dv_init;
  DeviceTensor out, lse, dq, dk, dv;
  Results(const Case& c, const Inputs& in, bool zero_start)
      : dk_init(zero_start ? std::vector<double>(in.dk_start.size(), 0.0) : in.dk_start),
        dv_init(zero_start ? std::vector<double>(in.dv_start.size(), 0.0) : in.dv_start),
        out(poisoned(DType::BF16, {c.B, c.Tq, c.H, c.HD})),
        lse(poisoned(DType::F32, {c.B, c.H, c.Tq})),
        dq(poisoned(DType::BF16, {c.B, c.Tq, c.H, c.HD})),
        dk(upload(dk_init, DType::BF16, {c.B, c.S, c.KVH, c.HD})),
        dv(upload(dv_init, DType::BF16, {c.B, c.S, c.KVH, c.HD})) {}
};

// Forward then backward through ops:: with LT_ATTENTION_KERNEL = kernel.
Results run(const Case& c, Inputs& in, const char* kernel, bool zero_start = false) {
  const ops::AttentionParams p = params(c);
  Results r(c, in, zero_start);
  KernelChoice choice(kernel);
  ops::attention_forward(ctx, p, r.out.t, r.lse.t, in.q.t, in.k.t, in.v.t, Tensor(), Tensor());
  ops::attention_backward(ctx, p, r.dq.t, r.dk.t, r.dv.t, in.dout.t, r.out.t, r.lse.t, in.q.t, in.k.t, in.v.t,
                          Tensor(), Tensor());
  return r;
}

// Without cuDNN: the case under auto takes leantune's kernels (LT_ATTENTION_KERNEL=tc's bits, no cuDNN plan
// built), an explicit cudnn request is refused naming why, and the run header's line says so.
void check_fallback(const Case& c, uint64_t seed) {
  const ops::cuda::CudnnAttentionStatus& st = ops::cuda::cudnn_attention_status();
  ASSERT_FALSE(st.reason.empty()) << "an unavailable cuDNN must say why";
  Inputs in(c, seed);
  const int64_t plans_before = ops::cuda::cudnn_attention_plan_stats().plans_built;
  Results ours = run(c, in, "tc");
  Results fallback = run(c, in, "auto");
  EXPECT_EQ(test::download(fallback.out), test::download(ours.out)) << describe(c);
  EXPECT_EQ(test::download(fallback.lse), test::download(ours.lse)) << describe(c);
  EXPECT_EQ(test::download(fallback.dq), test::download(ours.dq)) << describe(c);
  EXPECT_EQ(test::download(fallback.dk), test::download(ours.dk)) << describe(c);
  EXPECT_EQ(test::download(fallback.dv), test::download(ours.dv)) << describe(c);
  EXPECT_EQ(ops::cuda::cudnn_attention_plan_stats().plans_built, plans_before) << describe(c);
  try {
    run(c, in, "cudnn");
    ADD_FAILURE() << describe(c) << ": LT_ATTENTION_KERNEL=cudnn without a usable cuDNN must be refused";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(st.reason), std::string::npos) << e.what();
  }
  KernelChoice automatic("auto");
  const std::string header = ops::attention_backend_summary(ctx);
  EXPECT_NE(header.find("leantune kernels (cuDNN unavailable: " + st.reason + ")"), std::string::npos)
      << header;
}

// True when cuDNN 9.16+ is loaded. Otherwise checks the fallback on `cases` (seeds from `seed`) and returns
// false: the caller's cuDNN checks do not apply.
bool cudnn_loaded_else_check_fallback(std::initializer_list<Case> cases, uint64_t seed) {
  std::printf("%s\n", ops::cuda::cudnn_attention_status_line().c_str());
  if (ops::cuda::cudnn_attention_status().available) return true;
  std::printf("no usable cuDNN: checking that attention falls back to leantune's kernels and says why\n");
  for (const Case& c : cases) check_fallback(c, seed++);
  return false;
}

// Prints which cuDNN was loaded (or why none could be), and what the run header says of it.
TEST(CudaParity, CudnnAttentionStatus) {
  LT_REQUIRE_GPU();
  if (!cudnn_loaded_else_check_fallback({{1, 128, 128, 32, 8, 128, 0}}, 7000)) return;
  const ops::cuda::CudnnAttentionStatus& st = ops::cuda::cudnn_attention_status();
  EXPECT_TRUE(st.reason.empty());
  KernelChoice automatic("auto");
  const std::string header = ops::attention_backend_summary(ctx);
  EXPECT_NE(header.find("cuDNN " + ops::cuda::cudnn_version_name(st.version) + " fused attention"),
            std::string::npos)
      << header;
}

// One case of CudnnAttentionForwardBackward: forward and backward through cuDNN vs the float64 reference.
// split_backward false: a chunk's backward as one call with the shifted mask (the kernel option
// cudnn_split_backward).
void check_against_reference(const Case& c, uint64_t seed, bool split_backward = true) {
  const auto [B, Tq, S, H, KVH, HD, off, alibi] = c;
  test::ScopedKernelOption split("cudnn_split_backward", split_backward ? nullptr : "false");
  const ops::AttentionParams p = params(c);
  const ops::cuda::AttentionCallShape call{DType::BF16, p, false, true, false};
  const char* reason = ops::cuda::cudnn_attention_ineligible_reason(call);
  ASSERT_EQ(reason, nullptr) << describe(c) << ": " << reason;
  Inputs in(c, seed);
  const int64_t plans_before = ops::cuda::cudnn_attention_plan_stats().plans_built;
  Results g = run(c, in, "cudnn");
  std::vector<double> out_d = test::download(g.out);  // synchronizes: any execution error shows here
  // A new shape builds one forward plan and one backward plan, two for a chunk's call (Tq > 1 queries after
  // earlier keys: the split backward): proof that cuDNN (not a fallback) ran, and how.
  const int64_t backward_plans = off > 0 && Tq > 1 && split_backward ? 2 : 1;
  EXPECT_EQ(ops::cuda::cudnn_attention_plan_stats().plans_built - plans_before, 1 + backward_plans)
      << describe(c);

  const size_t nq = size_t(B * Tq * H * HD);
  std::vector<double> out(nq), lse(size_t(B * H * Tq)), dq(nq), dk = in.dk_start, dv = in.dv_start;
  ops::cpu::attention_forward(p, host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}),
                              host(in.hq, {B, Tq, H, HD}), host(in.hk, {B, S, KVH, HD}),
                              host(in.hv, {B, S, KVH, HD}), Tensor(), Tensor());
  ops::cpu::attention_backward(p, host(dq, {B, Tq, H, HD}), host(dk, {B, S, KVH, HD}),
                               host(dv, {B, S, KVH, HD}), host(in.hdout, {B, Tq, H, HD}),
                               host(out, {B, Tq, H, HD}), host(lse, {B, H, Tq}), host(in.hq, {B, Tq, H, HD}),
                               host(in.hk, {B, S, KVH, HD}), host(in.hv, {B, S, KVH, HD}), Tensor(),
                               Tensor());
  Worst fw, bw, grads;
  fw.add("out", out_d, out);
  fw.add("lse", test::download(g.lse), lse);
  const std::vector<double> g_dk = test::download(g.dk), g_dv = test::download(g.dv);
  bw.add("dq", test::download(g.dq), dq);
  bw.add("dk", g_dk, dk);
  bw.add("dv", g_dv, dv);
  // The gradients alone, from zero accumulators: random start values cannot hide a small error there.
  Results z = run(c, in, "cudnn", true);
  std::vector<double> ref_dk(dk.size()), ref_dv(dv.size());
  for (size_t i = 0; i < dk.size(); ++i)
    ref_dk[i] = dk[i] - in.dk_start[i], ref_dv[i] = dv[i] - in.dv_start[i];
  grads.add("dq", test::download(z.dq), dq);
  grads.add("dk", test::download(z.dk), ref_dk);
  grads.add("dv", test::download(z.dv), ref_dv);
  report("attention_fwd_cudnn", DType::BF16, describe(c), fw, tolerance(DType::BF16));
  report("attention_bwd_cudnn", DType::BF16, describe(c), bw, tolerance(DType::BF16));
  report("attention_bwd_cudnn_from_zero", DType::BF16, describe(c), grads, tolerance(DType::BF16));
  // Keys past q_offset + Tq: no query sees them, their dk/dv must keep the start values exactly.
  int64_t changed = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = off + Tq; j < S; ++j)
      for (int64_t e = 0; e < KVH * HD; ++e) {
        const size_t i = size_t((b * S + j) * KVH * HD + e);
        changed += g_dk[i] != in.dk_start[i] || g_dv[i] != in.dv_start[i];
      }
  EXPECT_EQ(changed, 0) << describe(c) << ": dk/dv changed past the last visible key";
}

// check_against_reference on each case (seeds from `seed`). An exception (cuDNN refusing the shape) fails
// that case only: one run reports every case.
void check_each_against_reference(std::initializer_list<Case> cases, uint64_t seed,
                                  bool split_backward = true) {
  for (const Case& c : cases) {
    try {
      check_against_reference(c, seed, split_backward);
    } catch (const std::exception& e) {
      ADD_FAILURE() << describe(c) << (split_backward ? "" : " (unsplit backward)") << ": " << e.what();
    }
    seed += 10;
  }
}

// The last three: Gemma's head_dim 256 (whole sequences with GQA, and a chunk: the split backward).
TEST(CudaParity, CudnnAttentionForwardBackward) {
  LT_REQUIRE_GPU();
  const std::initializer_list<Case> cases = {
      {1, 128, 128, 32, 8, 128, 0},  {2, 256, 256, 32, 8, 64, 0},    {1, 200, 1000, 32, 8, 128, 800},
      {1, 200, 1000, 4, 4, 64, 800}, {2, 512, 1024, 4, 4, 128, 512}, {1, 1024, 1024, 4, 4, 64, 0},
      {2, 128, 640, 32, 8, 64, 512}, {2, 100, 1200, 8, 2, 128, 500}, {1, 1, 37, 8, 8, 128, 36},
      {2, 37, 37, 4, 1, 64, 0},      {1, 333, 333, 32, 8, 128, 0},   {1, 128, 128, 8, 4, 256, 0},
      {2, 37, 37, 4, 1, 256, 0},     {1, 200, 600, 8, 2, 256, 400},
  };
  if (!cudnn_loaded_else_check_fallback(cases, 7300)) return;
  check_each_against_reference(cases, 7300);
}

// ALiBi (BLOOM) on cuDNN, which adds our slopes times each key's absolute position: whole sequences and
// chunks at an offset (the split backward's second call starts its keys' positions at the chunk; the last
// case runs a chunk's backward unsplit, positions from key 0 under the shifted mask), power-of-two head
// counts (16: bloom-560m's) and others (6, 12, 24), GQA, one query, head_dim 64/128/256, against the
// float64 reference with transformers' float32 biases. The same plans-built proof as
// CudnnAttentionForwardBackward: cuDNN, not a fallback, ran each case.
TEST(CudaParity, CudnnAttentionAlibi) {
  LT_REQUIRE_GPU();
  const std::initializer_list<Case> cases = {
      {1, 128, 128, 16, 16, 64, 0, true},     {2, 256, 256, 12, 12, 128, 0, true},
      {1, 333, 333, 24, 24, 64, 0, true},     {1, 200, 1000, 16, 16, 64, 800, true},
      {2, 100, 1200, 12, 12, 128, 500, true}, {1, 128, 640, 6, 6, 64, 512, true},
      {1, 1, 37, 6, 6, 128, 36, true},        {2, 37, 37, 8, 2, 64, 0, true},
      {1, 200, 600, 8, 8, 256, 400, true},
  };
  if (!cudnn_loaded_else_check_fallback(cases, 7600)) return;
  check_each_against_reference(cases, 7600);
  check_each_against_reference({{2, 150, 450, 12, 12, 64, 300, true}}, 7700, false);
}

// cuDNN vs our tensor-core kernels on shapes too large for the float64 reference (the last, with ALiBi: a
// bloom-560m chunk, against the CUDA-core kernels that LT_ATTENTION_KERNEL=tc takes for ALiBi).
TEST(CudaParity, CudnnAttentionMatchesTensorCores) {
  LT_REQUIRE_GPU();
  const Case cases[] = {{1, 2048, 2048, 32, 8, 128, 0},
                        {1, 1024, 4096, 32, 8, 128, 3072},
                        {2, 1536, 1536, 32, 8, 64, 0},
                        {1, 1024, 4096, 16, 16, 64, 3072, true}};
  if (!cudnn_loaded_else_check_fallback({cases[0], cases[1], cases[2], cases[3]}, 8800)) return;
  for (size_t ci = 0; ci < std::size(cases); ++ci) {
    const Case& c = cases[ci];
    Inputs in(c, 8800 + ci * 10);
    std::optional<Results> cudnn;
    try {
      cudnn.emplace(run(c, in, "cudnn"));
    } catch (const std::exception& e) {
      ADD_FAILURE() << describe(c) << ": " << e.what();
      continue;
    }
    const Results& a = *cudnn;
    Results b = run(c, in, "tc");
    Worst fw, bw;
    fw.add("out", test::download(a.out), test::download(b.out));
    fw.add("lse", test::download(a.lse), test::download(b.lse));
    bw.add("dq", test::download(a.dq), test::download(b.dq));
    bw.add("dk", test::download(a.dk), test::download(b.dk));
    bw.add("dv", test::download(a.dv), test::download(b.dv));
    report("attention_fwd_cudnn_vs_tc", DType::BF16, describe(c), fw, tolerance(DType::BF16));
    report("attention_bwd_cudnn_vs_tc", DType::BF16, describe(c), bw, tolerance(DType::BF16));
  }
}

// The deterministic switch and calls cuDNN cannot take keep to our kernels: no cuDNN plan is built, and the
// results are our kernels' bits. Holds with and without a usable cuDNN (without one, the windowed call goes
// through auto: an explicit cudnn request is refused, as check_fallback shows).
TEST(CudaParity, CudnnAttentionFallsBackToOurKernels) {
  LT_REQUIRE_GPU();
  std::printf("%s\n", ops::cuda::cudnn_attention_status_line().c_str());
  const char* windowed_request = ops::cuda::cudnn_attention_status().available ? "cudnn" : "auto";
  const Case c{1, 300, 700, 8, 2, 128, 400};
  Inputs in(c, 9900);
  Results ours = run(c, in, "tc");
  const int64_t plans_before = ops::cuda::cudnn_attention_plan_stats().plans_built;
  Results det = [&] {
    test::ScopedKernelOption deterministic("deterministic", "true");
    return run(c, in, nullptr);
  }();
  EXPECT_EQ(test::download(det.out), test::download(ours.out));
  EXPECT_EQ(test::download(det.dq), test::download(ours.dq));
  EXPECT_EQ(test::download(det.dk), test::download(ours.dk));
  EXPECT_EQ(ops::cuda::cudnn_attention_plan_stats().plans_built, plans_before)
      << "a deterministic request must not build cuDNN plans";

  // A sliding window under LT_ATTENTION_KERNEL=cudnn: our kernels, correct against the reference.
  const auto [B, Tq, S, H, KVH, HD, off, alibi] = c;
  ops::AttentionParams p = params(c);
  p.window = 100;
  DeviceTensor out = poisoned(DType::BF16, {B, Tq, H, HD}), lse = poisoned(DType::F32, {B, H, Tq});
  {
    KernelChoice choice(windowed_request);
    ops::attention_forward(ctx, p, out.t, lse.t, in.q.t, in.k.t, in.v.t, Tensor(), Tensor());
  }
  std::vector<double> ref(size_t(B * Tq * H * HD)), ref_lse(size_t(B * H * Tq));
  ops::cpu::attention_forward(p, host(ref, {B, Tq, H, HD}), host(ref_lse, {B, H, Tq}),
                              host(in.hq, {B, Tq, H, HD}), host(in.hk, {B, S, KVH, HD}),
                              host(in.hv, {B, S, KVH, HD}), Tensor(), Tensor());
  Worst w;
  w.add("out", test::download(out), ref);
  w.add("lse", test::download(lse), ref_lse);
  report("attention_fwd_cudnn_window_fallback", DType::BF16, describe(c) + " w100", w,
         tolerance(DType::BF16));
  EXPECT_EQ(ops::cuda::cudnn_attention_plan_stats().plans_built, plans_before)
      << "a windowed call must not build cuDNN plans";
}

// Not asserted: cuDNN vs the tensor-core kernels, H=32/8, HD=128, causal, at the kernel peer's shapes
// (T = 2K, 8K, 32K with B = 16384 / T) and at two chunks of chunked training (the last 4K queries of 16K and
// of 32K keys; cuDNN with the split backward and, as "cudnn1", unsplit), and with ALiBi a bloom-560m chunk
// (H=16, HD=64, the last 4K queries of 16K keys; "tc" is then the CUDA-core kernels, which take ALiBi): the
// first call (plan build included) and the median of 3 later ones. Forward FLOPs = 2 * 2 * B * H * Tq *
// (q_offset + Tq / 2) * HD, backward 2.5x.
TEST(CudaBench, DISABLED_CudnnAttentionTiming) {
  LT_REQUIRE_GPU();
  ASSERT_TRUE(ops::cuda::cudnn_attention_status().available) << ops::cuda::cudnn_attention_status().reason;
  const Case cases[] = {{8, 2048, 2048, 32, 8, 128, 0},      {2, 8192, 8192, 32, 8, 128, 0},
                        {1, 32768, 32768, 32, 8, 128, 0},    {1, 4096, 16384, 32, 8, 128, 12288},
                        {1, 4096, 32768, 32, 8, 128, 28672}, {1, 4096, 16384, 16, 16, 64, 12288, true}};
  for (const Case& c : cases) {
    Inputs in(c, 11);
    const auto [B, Tq, S, H, KVH, HD, off, alibi] = c;
    const ops::AttentionParams p = params(c);
    DeviceTensor out = poisoned(DType::BF16, {B, Tq, H, HD}), dq = poisoned(DType::BF16, {B, Tq, H, HD});
    DeviceTensor lse = poisoned(DType::F32, {B, H, Tq});
    std::vector<double> zeros(size_t(B * S * KVH * HD), 0.0);
    DeviceTensor dk = upload(zeros, DType::BF16, {B, S, KVH, HD}),
                 dv = upload(zeros, DType::BF16, {B, S, KVH, HD});
    const double fwd_flops =
        2.0 * 2.0 * double(B * H) * double(Tq) * (double(off) + double(Tq) / 2.0) * double(HD);
    for (const char* kernel : {"cudnn", "cudnn1", "tc"}) {
      if (off == 0 && std::string(kernel) == "cudnn1") continue;
      KernelChoice choice(std::string(kernel) == "tc" ? "tc" : "cudnn");
      // cudnn1: a chunk's backward as one call with the shifted mask.
      test::ScopedKernelOption unsplit("cudnn_split_backward",
                                       std::string(kernel) == "cudnn1" ? "false" : nullptr);
      ops::cuda::cudnn_attention_clear_plans(ctx);
      const double build_before = ops::cuda::cudnn_attention_plan_stats().build_seconds;
      auto wall = [] { return std::chrono::steady_clock::now(); };
      const auto t0 = wall();
      ops::attention_forward(ctx, p, out.t, lse.t, in.q.t, in.k.t, in.v.t, Tensor(), Tensor());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto t1 = wall();
      ops::attention_backward(ctx, p, dq.t, dk.t, dv.t, in.dout.t, out.t, lse.t, in.q.t, in.k.t, in.v.t,
                              Tensor(), Tensor());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto t2 = wall();
      const double build_ms = (ops::cuda::cudnn_attention_plan_stats().build_seconds - build_before) * 1e3;
      cudaEvent_t e0, e1, e2;
      ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
      ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
      ASSERT_EQ(cudaEventCreate(&e2), cudaSuccess);
      std::vector<float> fw_ms, bw_ms;
      for (int it = 0; it < 3; ++it) {
        cudaEventRecord(e0);
        ops::attention_forward(ctx, p, out.t, lse.t, in.q.t, in.k.t, in.v.t, Tensor(), Tensor());
        cudaEventRecord(e1);
        ops::attention_backward(ctx, p, dq.t, dk.t, dv.t, in.dout.t, out.t, lse.t, in.q.t, in.k.t, in.v.t,
                                Tensor(), Tensor());
        cudaEventRecord(e2);
        ASSERT_EQ(cudaEventSynchronize(e2), cudaSuccess);
        float a = 0, b = 0;
        cudaEventElapsedTime(&a, e0, e1);
        cudaEventElapsedTime(&b, e1, e2);
        fw_ms.push_back(a), bw_ms.push_back(b);
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaEventDestroy(e2);
      std::sort(fw_ms.begin(), fw_ms.end());
      std::sort(bw_ms.begin(), bw_ms.end());
      const double fw = fw_ms[1], bw = bw_ms[1];
      std::printf(
          "ATTN_BENCH kernel=%-6s bf16 causal%s B=%lld Tq=%lld S=%lld off=%lld H=%lld/%lld HD=%lld  fwd %.3f "
          "ms "
          "%.1f TFLOP/s  bwd %.3f ms %.1f TFLOP/s  fwd+bwd %.1f TFLOP/s  first call fwd %.1f ms bwd %.1f ms "
          "(plan builds %.1f ms)\n",
          kernel, alibi ? "+alibi" : "", (long long)B, (long long)Tq, (long long)S, (long long)off,
          (long long)H, (long long)KVH, (long long)HD, fw, fwd_flops / fw * 1e-9, bw,
          2.5 * fwd_flops / bw * 1e-9, 3.5 * fwd_flops / (fw + bw) * 1e-9,
          std::chrono::duration<double, std::milli>(t1 - t0).count(),
          std::chrono::duration<double, std::milli>(t2 - t1).count(), build_ms);
      std::fflush(stdout);
    }
  }
}

// Not asserted on numbers: logs every step of building the forward and backward graphs (descriptors,
// operation graph, each engine configuration of the heuristics and whether its plan finalizes; the last
// case with ALiBi), so that one run shows where cuDNN refuses. Fails when no plan could be built.
TEST(CudaDiag, DISABLED_CudnnAttentionProbe) {
  LT_REQUIRE_GPU();
  const Case cases[] = {{1, 1024, 1024, 32, 8, 128, 0},
                        {2, 200, 1200, 32, 8, 64, 800},
                        {1, 256, 256, 4, 4, 128, 0},
                        {1, 200, 1000, 12, 12, 64, 800, true}};
  for (const Case& c : cases)
    for (const bool backward : {false, true}) {
      const std::string log = ops::cuda::cudnn_attention_probe(ctx, params(c), backward);
      std::printf("==== cuDNN attention probe: %s %s\n%s", backward ? "backward" : "forward",
                  describe(c).c_str(), log.c_str());
      std::fflush(stdout);
      EXPECT_NE(log.find("probe: a plan was built"), std::string::npos)
          << describe(c) << (backward ? " backward" : " forward") << ": no plan (see the log above)";
    }
}

}  // namespace
}  // namespace lt
