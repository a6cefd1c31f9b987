#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 5, H = 3, HD = 10;

ops::RopeParams llama3_params(int64_t tokens, int64_t heads, int64_t head_dim) {
  ops::RopeParams p{tokens, heads, head_dim, 500000.0};
  p.type = ops::RopeType::Llama3;
  p.factor = 8.0;
  // Smaller than Llama 3.1's 8192 so that a 10-wide head has a frequency in each of the three bands
  // (wavelengths 6.3, 87, 1197, ... against the band edges 64 and 256).
  p.original_max_position = 256;
  return p;
}

const std::vector<int32_t> kPositions{0, 7, 3, 4096, 131071};

TEST(Rope, InvFreqMatchesTransformers) {
  std::ifstream in(test::source_path("tests/ops/golden/rope_inv_freq.json"));
  ASSERT_TRUE(in) << "missing tests/ops/golden/rope_inv_freq.json (tools/make_rope_golden.py writes it)";
  nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_GE(doc["cases"].size(), 3u);
  for (const auto& c : doc["cases"]) {
    if (c.contains("inv_freq_short")) continue;  // longrope: test_rope_longrope.cpp
    ops::RopeParams p{1, 1, c["head_dim"].get<int64_t>(), c["theta"].get<double>()};
    if (!c["rope_scaling"].is_null()) {
      const auto& s = c["rope_scaling"];
      p.factor = s["factor"].get<double>();
      if (s["rope_type"] == "linear") {
        p.type = ops::RopeType::Linear;
      } else {
        ASSERT_EQ(s["rope_type"], "llama3");
        p.type = ops::RopeType::Llama3;
      }
      p.low_freq_factor = s.value("low_freq_factor", 1.0);
      p.high_freq_factor = s.value("high_freq_factor", 4.0);
      p.original_max_position = s.value("original_max_position_embeddings", int64_t(8192));
    }
    std::vector<double> want = c["inv_freq"].get<std::vector<double>>();
    std::vector<double> got = ops::rope_inv_freq(p);
    ASSERT_EQ(got.size(), want.size()) << c["name"];
    // transformers computes in float32: agreement to float32 precision, element by element.
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << c["name"] << " index " << i;
  }
}

TEST(Rope, ForwardMatchesTheRotateHalfFormula) {
  ops::RopeParams p = llama3_params(N, H, HD);
  std::vector<double> x0 = test::random_values(N * H * HD, 701);
  HostTensor x = HostTensor::of(DType::F64, {N, H, HD}, x0), pos = HostTensor::ints({N}, kPositions);
  ops::rope_forward(ctx, p, x, pos);
  std::vector<double> got = x.values(), inv = ops::rope_inv_freq(p);
  const int64_t half = HD / 2;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < half; ++j) {
        size_t i1 = size_t((n * H + h) * HD + j), i2 = i1 + size_t(half);
        long double a = (long double)kPositions[size_t(n)] * inv[size_t(j)];
        long double c = std::cos(a), s = std::sin(a);
        EXPECT_NEAR(got[i1], double(x0[i1] * c - x0[i2] * s), 1e-12);
        EXPECT_NEAR(got[i2], double(x0[i2] * c + x0[i1] * s), 1e-12);
      }
}

// Partial rotary (Phi-3's partial_rotary_factor): the leading R dims of each head are rotated exactly as a
// head of R dims would be (frequencies from R), the rest pass through untouched; backward is still its
// inverse and its gradient.
TEST(Rope, PartialRotaryRotatesOnlyTheLeadingDims) {
  constexpr int64_t R = 6;
  for (ops::RopeType type : {ops::RopeType::Default, ops::RopeType::Llama3}) {
    ops::RopeParams p = llama3_params(N, H, HD), whole = llama3_params(N * H, 1, R);
    p.type = whole.type = type;
    p.rotary_dim = R;
    EXPECT_EQ(ops::rope_inv_freq(p), ops::rope_inv_freq(whole));
    std::vector<double> x0 = test::random_values(N * H * HD, 705);
    HostTensor x = HostTensor::of(DType::F64, {N, H, HD}, x0), pos = HostTensor::ints({N}, kPositions);
    ops::rope_forward(ctx, p, x, pos);
    // The reference: the leading R dims of every (token, head) as rows of a full rotary of R dims.
    std::vector<double> lead(size_t(N * H * R));
    std::vector<int32_t> row_pos(size_t(N * H));
    for (int64_t r = 0; r < N * H; ++r) {
      row_pos[size_t(r)] = kPositions[size_t(r / H)];
      for (int64_t j = 0; j < R; ++j) lead[size_t(r * R + j)] = x0[size_t(r * HD + j)];
    }
    HostTensor ref = HostTensor::of(DType::F64, {N * H, 1, R}, lead),
               ref_pos = HostTensor::ints({N * H}, row_pos);
    ops::rope_forward(ctx, whole, ref, ref_pos);
    const std::vector<double> got = x.values(), want = ref.values();
    for (int64_t r = 0; r < N * H; ++r)
      for (int64_t j = 0; j < HD; ++j) {
        const size_t i = size_t(r * HD + j);
        if (j < R)
          EXPECT_EQ(got[i], want[size_t(r * R + j)]) << r << "," << j;
        else
          EXPECT_EQ(got[i], x0[i]) << "pass-through dim " << j;
      }
    EXPECT_GT(test::max_abs_diff(got, x0), 0.1);
    ops::rope_backward(ctx, p, x, pos);
    EXPECT_LE(test::max_rel_diff(x.values(), x0), 1e-14);
  }
  ops::RopeParams bad = llama3_params(N, H, HD);
  bad.rotary_dim = 7;
  HostTensor x(DType::F64, {N, H, HD}), pos = HostTensor::ints({N}, kPositions);
  test::expect_error_mentions([&] { ops::rope_forward(ctx, bad, x, pos); }, {"rotary_dim", "7"});
}

TEST(Rope, BackwardInvertsForward) {
  ops::RopeParams p = llama3_params(N, H, HD);
  std::vector<double> x0 = test::random_values(N * H * HD, 702);
  for (DType t : {DType::F64, DType::F32}) {
    HostTensor x = HostTensor::of(t, {N, H, HD}, x0), pos = HostTensor::ints({N}, kPositions);
    std::vector<double> start = x.values();
    ops::rope_forward(ctx, p, x, pos);
    EXPECT_GT(test::max_abs_diff(x.values(), start), 0.1);  // it did rotate
    ops::rope_backward(ctx, p, x, pos);
    EXPECT_LE(test::max_rel_diff(x.values(), start), t == DType::F64 ? 1e-14 : 1e-6) << dtype_name(t);
  }
}

TEST(Rope, GradientMatchesFiniteDifferences) {
  for (ops::RopeType type : {ops::RopeType::Default, ops::RopeType::Llama3}) {
    ops::RopeParams p = llama3_params(N, H, HD);
    p.type = type;
    std::vector<double> x0 = test::random_values(N * H * HD, 703), r = test::random_values(N * H * HD, 704);
    HostTensor x(DType::F64, {N, H, HD}), pos = HostTensor::ints({N}, kPositions);
    std::vector<double> xv = x0;
    auto fd = test::finite_difference_gradient(xv, [&] {
      x.set(xv);
      ops::rope_forward(ctx, p, x, pos);
      return test::dot(x.values(), r);
    });
    HostTensor dx = HostTensor::of(DType::F64, {N, H, HD}, r);
    ops::rope_backward(ctx, p, dx, pos);
    EXPECT_LE(test::max_rel_diff(dx.values(), fd), 1e-6);
  }
}

TEST(Rope, DotProductDependsOnlyOnThePositionDifference) {
  ops::RopeParams p = llama3_params(2, 1, HD);
  std::vector<double> q0 = test::random_values(HD, 705), k0 = test::random_values(HD, 706);
  auto score = [&](int32_t qpos, int32_t kpos) {
    // Two tokens, one head: row 0 is q at qpos, row 1 is k at kpos.
    std::vector<double> both = q0;
    both.insert(both.end(), k0.begin(), k0.end());
    HostTensor x = HostTensor::of(DType::F64, {2, 1, HD}, both), pos = HostTensor::ints({2}, {qpos, kpos});
    ops::rope_forward(ctx, p, x, pos);
    std::vector<double> v = x.values();
    return test::dot(std::vector<double>(v.begin(), v.begin() + HD),
                     std::vector<double>(v.begin() + HD, v.end()));
  };
  const double base = score(9, 4);
  EXPECT_NEAR(score(1005, 1000), base, 1e-12);
  EXPECT_NEAR(score(5, 0), base, 1e-12);
  EXPECT_GT(std::abs(score(10, 4) - base), 1e-6);  // a different distance scores differently
}

TEST(Rope, FloatAgreesWithDouble) {
  ops::RopeParams p = llama3_params(N, H, HD);
  std::vector<double> x0 = test::rounded_to_float(test::random_values(N * H * HD, 707));
  std::vector<double> out[2][2];
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int i = 0; i < 2; ++i) {
    HostTensor x = HostTensor::of(dtypes[i], {N, H, HD}, x0), g = HostTensor::of(dtypes[i], {N, H, HD}, x0);
    HostTensor pos = HostTensor::ints({N}, kPositions);
    ops::rope_forward(ctx, p, x, pos);
    ops::rope_backward(ctx, p, g, pos);
    out[i][0] = x.values(), out[i][1] = g.values();
  }
  for (int k = 0; k < 2; ++k) EXPECT_LE(test::max_rel_diff(out[1][k], out[0][k]), 1e-6) << "output " << k;
}

TEST(Rope, BadArgumentsAreNamed) {
  ops::RopeParams p = llama3_params(N, H, HD);
  HostTensor x = HostTensor::of(DType::F64, {N, H, HD}, test::random_values(N * H * HD, 708));
  HostTensor pos = HostTensor::ints({N}, {0, 1, -2, 3, 4});
  test::expect_error([&] { ops::rope_forward(ctx, p, x, pos); },
                     "rope_forward: position -2 at row 2 is negative");
  HostTensor pos_ok = HostTensor::ints({N}, kPositions);
  ops::RopeParams odd = p;
  odd.head_dim = 9;
  test::expect_error([&] { ops::rope_forward(ctx, odd, x, pos_ok); },
                     "rope_forward: params.head_dim is 9, expected a positive even");
  ops::RopeParams wrong_heads = p;
  wrong_heads.heads = 4;
  test::expect_error([&] { ops::rope_backward(ctx, wrong_heads, x, pos_ok); },
                     "rope_backward dx: shape (5, 3, 10) expected (5, 4, 10)");
  HostTensor pos64(DType::I64, {N});
  test::expect_error([&] { ops::rope_forward(ctx, p, x, pos64); },
                     "rope_forward positions: dtype i64 expected i32");
  ops::RopeParams flat = p;
  flat.high_freq_factor = flat.low_freq_factor;
  test::expect_error([&] { ops::rope_inv_freq(flat); }, "expected 0 < low < high");
  ops::RopeParams no_theta = p;
  no_theta.theta = 0;
  test::expect_error([&] { ops::rope_inv_freq(no_theta); }, "theta (rope_theta) is 0");
}

TEST(Rope, SameBitsWithAnyThreadCount) {
  const int64_t n = 70, h = 4, hd = 128;
  ops::RopeParams p = llama3_params(n, h, hd);
  std::vector<double> x0 = test::random_values(n * h * hd, 709);
  std::vector<double> posd = test::random_values(size_t(n), 710, 0.0, 100000.0);
  std::vector<int32_t> positions(posd.begin(), posd.end());
  std::vector<double> out[2][2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor x = HostTensor::of(DType::F32, {n, h, hd}, x0),
                 g = HostTensor::of(DType::F32, {n, h, hd}, x0);
      HostTensor pos = HostTensor::ints({n}, positions);
      ops::rope_forward(ctx, p, x, pos);
      ops::rope_backward(ctx, p, g, pos);
      out[i][0] = x.values(), out[i][1] = g.values();
    });
  for (int c = 0; c < 2; ++c) EXPECT_EQ(out[0][c], out[1][c]) << "output " << c;
  for (double v : out[1][0]) ASSERT_TRUE(std::isfinite(v));
}

TEST(Rope, MatchesTransformersApplyRotaryPosEmb) {
  // transformers computes angles and cos/sin in float32; positions stay small so that this costs < 1e-6.
  nlohmann::json g = test::transformers_golden("rope");
  const int64_t n = g["tokens"], h = g["heads"], hd = g["head_dim"];
  const nlohmann::json& s = g["rope_scaling"];
  ops::RopeParams p{n, h, hd, g["theta"].get<double>()};
  p.type = ops::RopeType::Llama3;
  p.factor = s["factor"];
  p.low_freq_factor = s["low_freq_factor"];
  p.high_freq_factor = s["high_freq_factor"];
  p.original_max_position = s["original_max_position_embeddings"];
  HostTensor x = HostTensor::of(DType::F64, {n, h, hd}, test::doubles(g["x"]));
  HostTensor pos = HostTensor::ints({n}, g["positions"].get<std::vector<int32_t>>());
  ops::rope_forward(ctx, p, x, pos);
  EXPECT_LE(test::max_rel_diff(x.values(), test::doubles(g["out"])), 2e-6);
}

}  // namespace
}  // namespace lt
