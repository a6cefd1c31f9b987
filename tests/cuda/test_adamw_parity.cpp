// The CUDA AdamW step and gradient sum of squares against the CPU: over several steps, f32 params against
// the CPU float64 reference (1e-6 relative) and bit for bit against the CPU f32 op (the kernel performs
// the same rounded operations in the same order); bf16 params (bf16 or f32 grads) with and without
// stochastic rounding within bf16 tolerance of the float64 reference and bit for bit against the CPU bf16
// op (same Philox bits); stochastic rounding unbiased on average; the sum of squares against the CPU
// double sum (1e-6) and identical across runs. Also prints the achieved bandwidth (grep BANDWIDTH).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ops/adamw_many.h"
#include "ops/device.h"
#include "ops/grad_norms_into.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt {
namespace {

using test::DeviceTensor;
using test::median_ms;
using test::report;

constexpr int kSteps = 5;

// Host storage of `dtype` for `values` (which are rounded to it in place).
std::vector<char> to_bytes(std::vector<double>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtype_size(dtype) + 1);
  convert_elements(bytes.data(), dtype, values.data(), DType::F64, values.size());
  convert_elements(values.data(), DType::F64, bytes.data(), dtype, values.size());
  return bytes;
}

std::vector<double> from_bytes(const void* bytes, DType dtype, size_t count) {
  std::vector<double> out(count);
  convert_elements(out.data(), DType::F64, bytes, dtype, count);
  return out;
}

// One tensor set on the GPU: a view `offset` elements into its allocation (offset 1 takes the kernel's
// unvectorized path).
struct GpuTensor {
  DeviceTensor owner;
  Tensor t;
  GpuTensor(DType dt, int64_t n, int64_t offset) : owner(dt, {n + offset}) {
    t = owner.t;
    t.shape[0] = n;
    t.data = static_cast<char*>(owner.t.data) + offset * int64_t(dtype_size(dt));
  }
  void set(std::vector<double>& values) {
    std::vector<char> b = to_bytes(values, t.dtype);
    ASSERT_EQ(cudaMemcpy(t.data, b.data(), t.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<double> get() const {
    std::vector<char> b(t.bytes() + 1);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(b.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return from_bytes(b.data(), t.dtype, size_t(t.numel()));
  }
};

struct HostSet {
  std::vector<char> p, g, m, v;
  Tensor tp, tg, tm, tv;
  HostSet(DType pdt, DType gdt, DType sdt, std::vector<double> p0, int64_t n) {
    p = to_bytes(p0, pdt);
    std::vector<double> zeros(size_t(n), 0.0);
    m = to_bytes(zeros, sdt);
    v = to_bytes(zeros, sdt);
    g.resize(size_t(n) * dtype_size(gdt) + 1);
    tp = Tensor(p.data(), pdt, {n});
    tg = Tensor(g.data(), gdt, {n});
    tm = Tensor(m.data(), sdt, {n});
    tv = Tensor(v.data(), sdt, {n});
  }
  void set_grad(std::vector<double> g0) {
    convert_elements(g.data(), tg.dtype, g0.data(), DType::F64, g0.size());
  }
};

ops::AdamWParams params_at(int64_t n, int64_t step, bool sr) {
  ops::AdamWParams a{};
  a.count = n;
  a.lr = 3e-3;
  a.beta1 = 0.9;
  a.beta2 = 0.999;
  a.eps = 1e-8;
  a.weight_decay = 0.05;
  a.step = step;
  a.stochastic_rounding = sr;
  a.seed = 0x5eed + uint64_t(n);
  return a;
}

struct Result {
  std::vector<double> p, m, v;
};

// kSteps steps on the GPU and on the CPU (same dtypes), and the CPU float64 reference.
void run_case(int64_t n, DType pdt, DType gdt, bool sr, int64_t offset, Result& gpu, Result& cpu,
              Result& ref) {
  std::vector<double> p0 = test::random_values(size_t(n), 900 + uint64_t(n), -1.0, 1.0);
  to_bytes(p0, pdt);  // the starting point every run shares
  GpuTensor gp(pdt, n, offset), gg(gdt, n, offset), gm(DType::F32, n, offset), gv(DType::F32, n, offset);
  std::vector<double> zeros(size_t(n), 0.0), pcopy = p0;
  gp.set(pcopy);
  gm.set(zeros);
  gv.set(zeros);
  HostSet same(pdt, gdt, DType::F32, p0, n), f64(DType::F64, DType::F64, DType::F64, p0, n);
  for (int64_t t = 1; t <= kSteps; ++t) {
    std::vector<double> g = test::random_values(size_t(n), 1000 * uint64_t(t) + uint64_t(n), -0.1, 0.1);
    to_bytes(g, gdt);
    std::vector<double> gc = g;
    gg.set(gc);
    same.set_grad(g);
    f64.set_grad(g);
    const ops::AdamWParams a = params_at(n, t, sr);
    ops::adamw_step(ctx, a, gp.t, gg.t, gm.t, gv.t);
    ops::adamw_step(ctx, a, same.tp, same.tg, same.tm, same.tv);
    ops::AdamWParams a64 = a;
    a64.stochastic_rounding = false;
    ops::adamw_step(ctx, a64, f64.tp, f64.tg, f64.tm, f64.tv);
  }
  gpu = {gp.get(), gm.get(), gv.get()};
  auto host = [&](const HostSet& h) {
    return Result{from_bytes(h.tp.data, h.tp.dtype, size_t(n)), from_bytes(h.tm.data, h.tm.dtype, size_t(n)),
                  from_bytes(h.tv.data, h.tv.dtype, size_t(n))};
  };
  cpu = host(same);
  ref = host(f64);
}

// "(n)"; built with += because GCC 12 warns (-Wrestrict, falsely) on "(" + std::to_string(n).
std::string shape_of(int64_t n) {
  std::string s = "(";
  s += std::to_string(n);
  s += ")";
  return s;
}

size_t count_different(const std::vector<double>& a, const std::vector<double>& b) {
  size_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += !(a[i] == b[i]);
  return d;
}

TEST(CudaAdamW, MatchesCpuOverSeveralSteps) {
  LT_REQUIRE_GPU();
  struct Case {
    DType pdt, gdt;
    bool sr;
  };
  const Case cases[] = {{DType::F32, DType::F32, false},
                        {DType::BF16, DType::BF16, false},
                        {DType::BF16, DType::F32, false},
                        {DType::BF16, DType::BF16, true},
                        {DType::BF16, DType::F32, true}};
  for (const Case& c : cases)
    for (int64_t n : {int64_t(1), int64_t(1001), int64_t(1 << 20) + 3})
      for (int64_t offset : {int64_t(0), int64_t(1)}) {
        Result gpu, cpu, ref;
        run_case(n, c.pdt, c.gdt, c.sr, offset, gpu, cpu, ref);
        test::Worst w;
        w.add("param", gpu.p, ref.p);
        w.add("exp_avg", gpu.m, ref.m);
        w.add("exp_avg_sq", gpu.v, ref.v);
        const std::string name =
            std::string("adamw_step") + (c.sr ? "+sr" : "") + " grad " + std::string(dtype_name(c.gdt));
        const std::string shape = shape_of(n) + (offset ? " unaligned" : "");
        // fp32: 1e-6 after 5 steps (f32 rounding of each op); bf16: GPU.md's bf16 tolerance.
        report(name, c.pdt, shape, w, c.pdt == DType::F32 ? 1e-6 : test::tolerance(DType::BF16));
        // The kernel does the CPU f32 op's rounded operations in the same order, and draws the same Philox
        // bits for stochastic rounding: identical results.
        EXPECT_EQ(count_different(gpu.p, cpu.p), 0u) << name << " " << shape << " param";
        EXPECT_EQ(count_different(gpu.m, cpu.m), 0u) << name << " " << shape << " exp_avg";
        EXPECT_EQ(count_different(gpu.v, cpu.v), 0u) << name << " " << shape << " exp_avg_sq";
      }
}

// param_copy: the updated f32 parameter rounded to nearest into a bf16 / f16 compute copy in the same pass;
// the parameter and moments are those of a step without a copy, the copy the parameter's rounding (what
// ops::copy would write), on the vectorized and the unaligned path.
TEST(CudaAdamW, ComputeCopyIsTheUpdatedParameterRounded) {
  LT_REQUIRE_GPU();
  for (DType cdt : {DType::BF16, DType::F16})
    for (int64_t n : {int64_t(1), int64_t(1001), int64_t(1 << 20) + 3})
      for (int64_t offset : {int64_t(0), int64_t(1)}) {
        std::vector<double> p0 = test::random_values(size_t(n), 40 + uint64_t(n), -1.0, 1.0);
        std::vector<double> g0 = test::random_values(size_t(n), 41 + uint64_t(n), -0.1, 0.1);
        GpuTensor p1(DType::F32, n, offset), p2(DType::F32, n, offset), g(DType::F32, n, offset);
        GpuTensor m1(DType::F32, n, offset), v1(DType::F32, n, offset), m2(DType::F32, n, offset),
            v2(DType::F32, n, offset), copy(cdt, n, offset);
        std::vector<double> zeros(size_t(n), 0.0), a = p0, b = p0, gg = g0, z1 = zeros, z2 = zeros,
                                                   z3 = zeros, z4 = zeros;
        p1.set(a);
        p2.set(b);
        g.set(gg);
        m1.set(z1);
        v1.set(z2);
        m2.set(z3);
        v2.set(z4);
        for (int64_t t = 1; t <= 2; ++t) {
          const ops::AdamWParams prm = params_at(n, t, false);
          ops::adamw_step(ctx, prm, p1.t, g.t, m1.t, v1.t, copy.t);
          ops::adamw_step(ctx, prm, p2.t, g.t, m2.t, v2.t);
        }
        const std::string what =
            std::string(dtype_name(cdt)) + " " + shape_of(n) + (offset ? " unaligned" : "");
        EXPECT_EQ(count_different(p1.get(), p2.get()), 0u) << what << " param";
        EXPECT_EQ(count_different(m1.get(), m2.get()), 0u) << what << " exp_avg";
        std::vector<double> rounded = p1.get();
        to_bytes(rounded, cdt);  // rounded to nearest in place
        EXPECT_EQ(count_different(copy.get(), rounded), 0u) << what << " copy";
      }
}

// adamw_step_many: the small tensors batched into shared launches, the large ones alone; every tensor the
// bits of its own adamw_step, over mixed dtypes, sizes, alignments, weight decays, seeds and copies.
TEST(CudaAdamW, ManyTensorsGiveEachTensorsOwnBits) {
  LT_REQUIRE_GPU();
  struct Case {
    DType pdt, gdt;
    int64_t n, offset;
    bool sr, copy;
  };
  const Case cases[] = {{DType::F32, DType::F32, 65536, 0, false, true},
                        {DType::F32, DType::F32, 1001, 1, false, false},
                        {DType::BF16, DType::F32, 4096, 0, true, false},
                        {DType::BF16, DType::BF16, 3, 0, false, false},
                        {DType::F32, DType::F32, (1 << 20) + 5, 0, false, true},
                        {DType::BF16, DType::F32, 777, 1, true, false},
                        {DType::F32, DType::F32, 16, 0, false, true}};
  struct Set {
    GpuTensor p, g, m, v, copy;
  };
  std::vector<std::unique_ptr<Set>> a, b;  // a: adamw_step_many, b: one adamw_step each
  for (int side = 0; side < 2; ++side)
    for (size_t i = 0; i < std::size(cases); ++i) {
      const Case& c = cases[i];
      auto set = std::make_unique<Set>(Set{GpuTensor(c.pdt, c.n, c.offset), GpuTensor(c.gdt, c.n, c.offset),
                                           GpuTensor(DType::F32, c.n, c.offset),
                                           GpuTensor(DType::F32, c.n, c.offset),
                                           GpuTensor(DType::BF16, c.n, c.offset)});
      std::vector<double> p0 = test::random_values(size_t(c.n), 60 + i),
                          g0 = test::random_values(size_t(c.n), 70 + i), zeros(size_t(c.n), 0.0), z2 = zeros;
      set->p.set(p0);
      set->g.set(g0);
      set->m.set(zeros);
      set->v.set(z2);
      (side == 0 ? a : b).push_back(std::move(set));
    }
  for (int64_t t = 1; t <= 2; ++t) {
    std::vector<ops::AdamWTensor> many;
    for (size_t i = 0; i < std::size(cases); ++i) {
      const Case& c = cases[i];
      ops::AdamWParams prm = params_at(c.n, t, c.sr);
      prm.weight_decay = i % 2 ? 0.0 : 0.05;
      prm.seed = 1000 + i;
      many.push_back({prm, a[i]->p.t, a[i]->g.t, a[i]->m.t, a[i]->v.t, c.copy ? a[i]->copy.t : Tensor()});
      ops::adamw_step(ctx, prm, b[i]->p.t, b[i]->g.t, b[i]->m.t, b[i]->v.t, c.copy ? b[i]->copy.t : Tensor());
    }
    ops::adamw_step_many(ctx, many);
  }
  for (size_t i = 0; i < std::size(cases); ++i) {
    const std::string what = "tensor " + std::to_string(i) + " " + shape_of(cases[i].n);
    EXPECT_EQ(count_different(a[i]->p.get(), b[i]->p.get()), 0u) << what << " param";
    EXPECT_EQ(count_different(a[i]->m.get(), b[i]->m.get()), 0u) << what << " exp_avg";
    EXPECT_EQ(count_different(a[i]->v.get(), b[i]->v.get()), 0u) << what << " exp_avg_sq";
    if (cases[i].copy) {
      EXPECT_EQ(count_different(a[i]->copy.get(), b[i]->copy.get()), 0u) << what << " copy";
    }
  }
}

TEST(CudaAdamW, StochasticRoundingIsUnbiasedOnAverage) {
  LT_REQUIRE_GPU();
  // Every element starts at 1 with gradient 0.25, so every f32 result is the same x between two bf16
  // values lo < hi; with SR the mean of the n results must be x (standard deviation <= ulp / (2 sqrt(n))).
  const int64_t n = 1 << 20;
  std::vector<double> ones(size_t(n), 1.0), g(size_t(n), 0.25), zeros(size_t(n), 0.0);
  GpuTensor p(DType::BF16, n, 0), gg(DType::F32, n, 0), m(DType::F32, n, 0), v(DType::F32, n, 0);
  GpuTensor p32(DType::F32, 1, 0), g32(DType::F32, 1, 0), m32(DType::F32, 1, 0), v32(DType::F32, 1, 0);
  p.set(ones);
  gg.set(g);
  m.set(zeros);
  v.set(zeros);
  std::vector<double> one{1.0}, quarter{0.25}, zero{0.0}, zero2{0.0};
  p32.set(one);
  g32.set(quarter);
  m32.set(zero);
  v32.set(zero2);
  ops::AdamWParams a = params_at(n, 1, true);
  a.lr = 0.01;
  ops::adamw_step(ctx, a, p.t, gg.t, m.t, v.t);
  ops::AdamWParams a32 = a;
  a32.count = 1;
  a32.stochastic_rounding = false;
  ops::adamw_step(ctx, a32, p32.t, g32.t, m32.t, v32.t);
  const double x = p32.get()[0];
  const std::vector<double> out = p.get();
  const float xf = float(x);
  const double lo = double(to_float(bf16::from_bits(uint16_t(float_bits(xf) >> 16))));
  const double hi = double(to_float(bf16::from_bits(uint16_t((float_bits(xf) >> 16) + 1))));
  ASSERT_LT(lo, x);
  ASSERT_GT(hi, x);
  double mean = 0;
  size_t others = 0;
  for (double y : out) {
    others += !(y == lo || y == hi);
    mean += y;
  }
  mean /= double(n);
  EXPECT_EQ(others, 0u);
  const double bias_in_ulps = (mean - x) / (hi - lo);
  std::printf(
      "SR      x %.9f in (%.9f, %.9f): mean of %ld stochastic roundings is off by %.2e ulp "
      "(round-to-nearest: %.3f ulp)\n",
      x, lo, hi, long(n), bias_in_ulps, (double(to_float(to_bf16(xf))) - x) / (hi - lo));
  EXPECT_LT(std::abs(bias_in_ulps), 5e-3);  // 10 standard deviations
}

TEST(CudaGradNorm, MatchesCpuDoubleAndIsDeterministic) {
  LT_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(65537), int64_t(1 << 22) + 5}) {
      std::vector<double> x = test::random_values(size_t(n), 77 + uint64_t(n), -2.0, 2.0);
      DeviceTensor d = test::upload(x, dt, {n});  // x now holds the rounded values
      const Tensor host(x.data(), DType::F64, {n});
      const double ref = ops::grad_norm_squared(ctx, host);
      const double got = ops::grad_norm_squared(ctx, d.t), again = ops::grad_norm_squared(ctx, d.t);
      test::Worst w;
      w.add("sum_sq", {got}, {ref});
      report("grad_norm_squared", dt, shape_of(n), w, 1e-6);
      EXPECT_EQ(std::memcmp(&got, &again, sizeof(double)), 0) << "two runs differ";
    }
}

// The many-tensor op: each sum the same bits as the tensor's own call (so the global norm is unchanged),
// mixed dtypes, empty tensors in between, sizes around the block boundaries.
TEST(CudaGradNorm, ManyTensorsGiveEachTensorsOwnBits) {
  LT_REQUIRE_GPU();
  std::vector<DeviceTensor> owned;
  std::vector<Tensor> grads;
  const int64_t sizes[] = {1, 512, 513, 1000, 0, 65537, int64_t(1 << 22) + 5, 3, int64_t(1 << 19)};
  int i = 0;
  for (int64_t n : sizes) {
    const DType dt = i++ % 2 ? DType::BF16 : DType::F32;
    if (n == 0) {
      grads.push_back(Tensor(nullptr, dt, {0}, Device::CUDA));
      continue;
    }
    std::vector<double> x = test::random_values(size_t(n), 300 + uint64_t(n), -2.0, 2.0);
    owned.push_back(test::upload(x, dt, {n}));
    grads.push_back(owned.back().t);
  }
  const std::vector<double> sums = ops::grad_norms_squared(ctx, grads);
  ASSERT_EQ(sums.size(), grads.size());
  int mismatches = 0;
  for (size_t j = 0; j < grads.size(); ++j) {
    const double own = grads[j].numel() ? ops::grad_norm_squared(ctx, grads[j]) : 0.0;
    if (std::memcmp(&own, &sums[j], sizeof(double)) != 0) {
      ++mismatches;
      std::printf("grad_norms_squared tensor %zu (%ld elements): %.17g, its own call %.17g\n", j,
                  long(grads[j].numel()), sums[j], own);
    }
  }
  EXPECT_EQ(mismatches, 0);
  // The same sums into a device tensor without a synchronization (empty tensors among them): the same bits.
  DeviceTensor totals = test::poisoned(DType::F64, {int64_t(grads.size())});
  ops::grad_norms_squared_into(ctx, grads, totals.t);
  ops::synchronize(ctx, Device::CUDA);
  const std::vector<double> into = test::download(totals);
  for (size_t j = 0; j < grads.size(); ++j)
    EXPECT_EQ(std::memcmp(&into[j], &sums[j], sizeof(double)), 0)
        << j << ": " << into[j] << " vs " << sums[j];
}

TEST(CudaAdamW, Bandwidth) {
  LT_REQUIRE_GPU();
  const int64_t n = int64_t(1) << 26;  // 64 M elements: far beyond the L2
  std::vector<double> init = test::random_values(size_t(n), 5, -0.5, 0.5);
  for (DType pdt : {DType::F32, DType::BF16}) {
    GpuTensor p(pdt, n, 0), g(pdt, n, 0), m(DType::F32, n, 0), v(DType::F32, n, 0);
    std::vector<double> a0 = init, a1 = init, a2 = init, a3 = init;
    p.set(a0);
    g.set(a1);
    m.set(a2);
    std::transform(a3.begin(), a3.end(), a3.begin(), [](double y) { return y * y; });
    v.set(a3);
    int64_t step = 1;
    const float ms = median_ms(20, [&] {
      ops::AdamWParams a = params_at(n, step++, pdt == DType::BF16);
      ops::adamw_step(ctx, a, p.t, g.t, m.t, v.t);
    });
    // Reads param, grad, m, v; writes param, m, v.
    const double bytes = double(n) * double(2 * dtype_size(pdt) + dtype_size(pdt) + 16);
    std::printf("BANDWIDTH adamw_step %-4s params%s: %.3f ms, %.0f GB/s (%.0f%% of 4280)\n",
                std::string(dtype_name(pdt)).c_str(), pdt == DType::BF16 ? "+sr" : "", ms, bytes / ms / 1e6,
                100 * bytes / ms / 1e6 / 4280);
    const float nms = median_ms(20, [&] { ops::grad_norm_squared(ctx, g.t); });
    const double nbytes = double(n) * double(dtype_size(pdt));
    std::printf("BANDWIDTH grad_norm_squared %-4s: %.3f ms incl. sync, %.0f GB/s\n",
                std::string(dtype_name(pdt)).c_str(), nms, nbytes / nms / 1e6);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace lt
