// Mixed precision on the GPU (precision: bf16): activations and weights bf16, parameter gradients f32. The
// ops that produce parameter gradients take an f32 gradient with bf16 inputs: linear's dw and dbias,
// rmsnorm's dw, embedding's dtable. The f32 gradients (accumulated into nonzero values) are held to f32's
// tolerance against the CPU float64 reference on the same bf16-rounded inputs: a gradient rounded through
// bf16 anywhere on the way (~1e-3) would fail it. Outputs of the compute dtype (dx) keep bf16's tolerance.
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

constexpr DType kIn = DType::BF16, kGrad = DType::F32;

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + ")";
}

TEST(CudaMixedPrecision, LinearBackwardF32Gradients) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 33, 65}, {129, 257, 31}, {300, 1000, 77}, {1, 4096, 3}};
  struct Variant {
    bool bias;
    double scale;
    bool acc_dx;
    const char* name;
  };
  const Variant variants[] = {
      {false, 1.0, false, ""}, {true, 1.0, false, " bias"}, {true, 0.5, true, " bias*0.5 dx+="}};
  for (size_t si = 0; si < std::size(shapes); ++si)
    for (size_t vi = 0; vi < std::size(variants); ++vi) {
      const auto [M, K, N] = shapes[si];
      const Variant& var = variants[vi];
      const uint64_t seed = 9100 + si * 16 + vi * 8;
      const ops::LinearParams p{M, K, N, var.scale, false, var.acc_dx};
      std::vector<double> x = random_values(static_cast<size_t>(M * K), seed),
                          w = random_values(static_cast<size_t>(N * K), seed + 1);
      std::vector<double> dy = random_values(static_cast<size_t>(M * N), seed + 2),
                          dx = random_values(static_cast<size_t>(M * K), seed + 3);
      std::vector<double> dw = random_values(static_cast<size_t>(N * K), seed + 4),
                          db = random_values(static_cast<size_t>(N), seed + 5);
      DeviceTensor g_x = upload(x, kIn, {M, K}), g_w = upload(w, kIn, {N, K}), g_dy = upload(dy, kIn, {M, N});
      DeviceTensor g_dx = var.acc_dx ? upload(dx, kIn, {M, K}) : poisoned(kIn, {M, K});
      DeviceTensor g_dw = upload(dw, kGrad, {N, K}), g_db = upload(db, kGrad, {N});  // nonzero: += is tested
      ops::linear_backward(ctx, p, g_dx.t, g_dw.t, var.bias ? g_db.t : Tensor(), g_dy.t, g_x.t, g_w.t);

      ops::cpu::linear_backward(p, host(dx, {M, K}), host(dw, {N, K}), var.bias ? host(db, {N}) : Tensor(),
                                host(dy, {M, N}), host(x, {M, K}), host(w, {N, K}));
      Worst in, grad;
      in.add("dx", test::download(g_dx), dx);
      grad.add("dw", test::download(g_dw), dw);
      if (var.bias) grad.add("dbias", test::download(g_db), db);
      const std::string shape = dims({M, K, N}) + var.name;
      report("linear_backward dx", kIn, shape, in, tolerance(kIn));
      report("linear_backward f32 grads", kIn, shape, grad, tolerance(kGrad));
    }
}

TEST(CudaMixedPrecision, RmsNormBackwardF32Weight) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, d;
  };
  // 4096, 896, 1024 and 8192: the register kernels (rmsnorm.cu); 2, 257, 13 and 8200: the general ones.
  // 7 x 4096: fewer rows than the backward has blocks.
  // Every kernel variant (rmsnorm_select.h) runs on the same inputs.
  const Shape shapes[] = {{1, 2},       {3, 257},   {64, 4096}, {1000, 896}, {600, 13},
                          {1500, 1024}, {40, 8192}, {24, 8200}, {7, 4096}};
  for (size_t si = 0; si < std::size(shapes); ++si) {
    const auto [N, D] = shapes[si];
    const uint64_t seed = 9200 + si * 8;
    const ops::RmsNormParams p{N, D, 1e-5, false};
    std::vector<double> x = random_values(static_cast<size_t>(N * D), seed, -2, 2);
    std::vector<double> w = random_values(static_cast<size_t>(D), seed + 1, 0.5, 1.5);
    std::vector<double> dy = random_values(static_cast<size_t>(N * D), seed + 2);
    std::vector<double> dw = random_values(static_cast<size_t>(D), seed + 3);
    DeviceTensor g_x = upload(x, kIn, {N, D}), g_w = upload(w, kIn, {D}), g_dy = upload(dy, kIn, {N, D});
    std::vector<double> dw_start = dw;
    DeviceTensor g_dw_start = upload(dw_start, kGrad, {D});  // rounds dw_start to the gradient dtype
    std::vector<double> y(static_cast<size_t>(N * D)), rstd(static_cast<size_t>(N)),
        dx(static_cast<size_t>(N * D));
    dw = dw_start;
    ops::cpu::rmsnorm_forward(p, host(y, {N, D}), host(rstd, {N}), host(x, {N, D}), host(w, {D}));
    ops::cpu::rmsnorm_backward(p, host(dx, {N, D}), host(dw, {D}), host(dy, {N, D}), host(x, {N, D}),
                               host(w, {D}), host(rstd, {N}));
    for (const test::RmsNormVariant& v : test::kRmsNormVariants) {
      test::RmsNormChoice choice(v);
      std::vector<double> dw_in = dw_start;
      DeviceTensor g_dw = upload(dw_in, kGrad, {D});
      DeviceTensor g_y = poisoned(kIn, {N, D}), g_dx = poisoned(kIn, {N, D}),
                   g_rstd = poisoned(DType::F32, {N});
      ops::rmsnorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t);
      ops::rmsnorm_backward(ctx, p, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
      Worst in, grad;
      in.add("dx", test::download(g_dx), dx);
      grad.add("dw", test::download(g_dw), dw);
      report("rmsnorm_backward dx", kIn, dims({N, D}) + v.name, in, tolerance(kIn));
      report("rmsnorm_backward f32 dw", kIn, dims({N, D}) + v.name, grad, tolerance(kGrad));
    }
  }
}

TEST(CudaMixedPrecision, EmbeddingBackwardF32Table) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, d, v;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 33, 5}, {2049, 1000, 3001}, {4096, 130, 7}};
  for (size_t si = 0; si < std::size(shapes); ++si) {
    const auto [N, D, V] = shapes[si];
    const uint64_t seed = 9300 + si * 8;
    const ops::EmbeddingParams p{N, D, V};
    std::vector<double> dtable = random_values(static_cast<size_t>(V * D), seed),
                        dout = random_values(static_cast<size_t>(N * D), seed + 1);
    std::vector<int32_t> ids = random_ints(static_cast<size_t>(N), seed + 2, 0, int32_t(V));
    DeviceTensor g_dtable = upload(dtable, kGrad, {V, D}), g_dout = upload(dout, kIn, {N, D});
    DeviceTensor g_ids = upload_i32(ids, {N});
    ops::embedding_backward(ctx, p, g_dtable.t, g_dout.t, g_ids.t);
    Tensor h_ids(ids.data(), DType::I32, {N});
    ops::cpu::embedding_backward(p, host(dtable, {V, D}), host(dout, {N, D}), h_ids);
    Worst grad;
    grad.add("dtable", test::download(g_dtable), dtable);
    report("embedding_backward f32 dtable", kIn, dims({N, D, V}), grad, tolerance(kGrad));
  }
}

// A device tensor of `d` filled with seeded random values.
DeviceTensor filled(DType dt, std::initializer_list<int64_t> d, uint64_t seed) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  std::vector<double> v = random_values(static_cast<size_t>(n), seed);
  return upload(v, dt, d);
}

template <class Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Only "bf16/f16 inputs, f32 gradient" is mixed: other pairings are refused with the dtypes named.
TEST(CudaMixedPrecision, OtherPairingsAreRefused) {
  LT_REQUIRE_GPU();
  const int64_t M = 3, K = 4, N = 2;
  DeviceTensor x32 = filled(DType::F32, {M, K}, 1), dy32 = filled(DType::F32, {M, N}, 2);
  DeviceTensor w32 = filled(DType::F32, {N, K}, 3), dx32 = poisoned(DType::F32, {M, K});
  DeviceTensor dw16 = filled(DType::BF16, {N, K}, 4);
  // An f32 computation cannot put its gradient in bf16.
  expect_error(
      [&] {
        ops::linear_backward(ctx, {M, K, N}, dx32.t, dw16.t, Tensor(), dy32.t, x32.t, w32.t);
      },
      "linear_backward dw on CUDA: dtype bf16 with f32 inputs; expected f32");
  // dx stays in the compute dtype.
  DeviceTensor x16 = filled(DType::BF16, {M, K}, 5), dy16 = filled(DType::BF16, {M, N}, 6);
  DeviceTensor w16 = filled(DType::BF16, {N, K}, 7);
  expect_error(
      [&] {
        ops::linear_backward(ctx, {M, K, N}, dx32.t, Tensor(), Tensor(), dy16.t, x16.t, w16.t);
      },
      "tensors of dtypes f32 and bf16 are mixed");
  DeviceTensor dw_f16 = filled(DType::F16, {K}, 8), xr = filled(DType::BF16, {M, K}, 9);
  DeviceTensor wr = filled(DType::BF16, {K}, 10), rstd = filled(DType::F32, {M}, 11);
  DeviceTensor dxr = poisoned(DType::BF16, {M, K}), dyr = filled(DType::BF16, {M, K}, 12);
  expect_error(
      [&] {
        ops::rmsnorm_backward(ctx, {M, K, 1e-5}, dxr.t, dw_f16.t, dyr.t, xr.t, wr.t, rstd.t);
      },
      "rmsnorm_backward dw on CUDA: dtype f16 with bf16 inputs; expected bf16 or f32");
  std::vector<int32_t> ids = {0, 1, 0};
  DeviceTensor g_ids = upload_i32(ids, {3}), dout32 = filled(DType::F32, {3, K}, 13);
  DeviceTensor table16 = filled(DType::BF16, {2, K}, 14);
  expect_error(
      [&] {
        ops::embedding_backward(ctx, {3, K, 2}, table16.t, dout32.t, g_ids.t);
      },
      "embedding_backward dtable on CUDA: dtype bf16 with f32 inputs; expected f32");
}

}  // namespace
}  // namespace lt::test
