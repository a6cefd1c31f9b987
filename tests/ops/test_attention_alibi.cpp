// ALiBi in the attention op (BLOOM): the slopes bit for bit against transformers' _get_alibi_slopes for every
// head count 1..127 (tools/make_bloom_golden.py), the op against the naive long double reference with
// transformers' float32 biases (float64 to 1e-12, float32 to 1e-5), float64 finite-difference gradients, and
// chunked == whole with the biases keyed on absolute key positions (and on positions within packed
// segments).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "ops/alibi.h"
#include "ops/attention_chunked.h"
#include "ops/attention_reference.h"
#include "ops/cuda/attention_select.h"

namespace lt::test {
namespace {

// Our slopes are the correctly rounded float32 powers (powf). torch.pow on the CPU (Sleef's vectorized powf,
// 1-ULP accurate; its result depends on the CPU's vector width) returned them for all but one of the 8128
// slopes of 1..127 heads when the golden was made (AVX-512): base float32(2^-0.25) to the 15th power (head 14
// of 32..63 heads), where torch is 1 ULP below the correctly rounded value. Every other slope is equal bit
// for bit, among them all of 16 heads (bloom-560m, 1b1, 1b7) and 112 heads (bloom).
TEST(AttentionAlibi, SlopesAreTransformers) {
  std::ifstream in(source_path("tests/ops/golden/alibi_slopes.json"));
  ASSERT_TRUE(in) << "missing tests/ops/golden/alibi_slopes.json (tools/make_bloom_golden.py writes it)";
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["slopes"].size(), 127u);
  int64_t one_ulp = 0;
  for (const auto& [key, slopes] : doc["slopes"].items()) {
    const int64_t n = std::stoll(key);
    ASSERT_EQ(int64_t(slopes.size()), n);
    for (int64_t h = 0; h < n; ++h) {
      const float want = float(slopes[size_t(h)].get<double>());
      const float got = ops::alibi_slope(h, n);
      EXPECT_EQ(naive_alibi_slope(h, n), got) << n << " heads, head " << h;
      if (got == want) continue;
      ++one_ulp;
      EXPECT_TRUE(h == 14 && n >= 32 && n < 64) << n << " heads, head " << h << ": " << got << " vs " << want;
      EXPECT_EQ(std::nextafter(got, 0.0f), want) << n << " heads, head " << h;
    }
  }
  EXPECT_LE(one_ulp, 32);
}

std::vector<AttnCase> alibi_cases() {
  std::vector<AttnCase> cases = {
      {2, 71, 130, 6, 6, 16, 50, 0, true, 601, true},    // 6 heads: not a power of two, packed, two blocks
      {2, 150, 150, 12, 4, 16, 0, 0, false, 602, true},  // 12 heads (8 + 4 extra), GQA, multithreaded
      {1, 40, 60, 5, 5, 8, 11, 7, true, 603, true},      // 5 heads, window and packing too
  };
  std::mt19937_64 rng(20261127);
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); };
  for (uint64_t n = 0; n < 20; ++n) {
    AttnCase c{};
    c.B = pick({1, 2});
    c.H = pick({1, 3, 4, 6, 7, 16});
    c.KVH = c.H;
    c.HD = pick({8, 16});
    c.Tq = pick({1, 5, 13, 67});
    c.q_offset = pick({0, 0, 9, 40});
    c.S = c.q_offset + c.Tq + pick({0, 3});
    c.window = pick({0, 0, 4});
    c.packed = rng() % 2;
    c.seed = 610 + n;
    c.alibi = true;
    cases.push_back(c);
  }
  return cases;
}

template <class T>
void check_forward(double tol) {
  for (const AttnCase& c : alibi_cases()) {
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    AttnOut want = naive_attention(c, d);
    AttnOut got = run_forward<T>(c, d);
    EXPECT_LE(max_rel_diff(got.out, want.out), tol);
    EXPECT_LE(max_rel_diff(got.lse, want.lse), tol);
  }
}

TEST(AttentionAlibi, ForwardFloat64MatchesNaive) {
  check_forward<double>(1e-12);
}
TEST(AttentionAlibi, ForwardFloat32MatchesNaive) {
  check_forward<float>(1e-5);
}

// The biases change the result (a test of ALiBi that passes without it would prove nothing).
TEST(AttentionAlibi, BiasesChangeTheOutput) {
  AttnCase c{1, 20, 20, 6, 6, 8, 0, 0, false, 620, true};
  AttnData d = make_attn_data(c);
  AttnOut with = run_forward<double>(c, d);
  c.alibi = false;
  AttnOut without = run_forward<double>(c, d);
  EXPECT_GT(max_rel_diff(with.out, without.out), 1e-3);
}

void check_gradients(const AttnCase& c) {
  SCOPED_TRACE(c.str());
  AttnData d = make_attn_data(c);
  const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), c.seed * 10 + 7);
  const std::vector<double> zeros(d.k.size(), 0.0);
  AttnGrads g = run_backward<double>(c, d, r, zeros, zeros);
  auto loss = [&] {
    AttnOut o = run_forward<double>(c, d);
    double s = 0;
    for (size_t i = 0; i < r.size(); ++i) s += o.out[i] * r[i];
    return s;
  };
  EXPECT_LE(max_rel_diff(g.dq, finite_difference_gradient(d.q, loss)), 1e-6);
  EXPECT_LE(max_rel_diff(g.dk, finite_difference_gradient(d.k, loss)), 1e-6);
  EXPECT_LE(max_rel_diff(g.dv, finite_difference_gradient(d.v, loss)), 1e-6);
}

TEST(AttentionAlibi, GradientsMatchFiniteDifferences) {
  check_gradients({1, 6, 6, 6, 6, 8, 0, 0, false, 631, true});
  check_gradients({2, 5, 13, 6, 3, 8, 4, 0, false, 632, true});  // GQA, offset, keys past the last query
  check_gradients({1, 9, 15, 5, 5, 8, 5, 4, true, 633, true});   // offset + window + segments
}

TEST(AttentionAlibi, ChunkedEqualsWholeSequence) {
  check_chunked({1, 37, 37, 6, 6, 8, 0, 0, false, 641, true}, 8, false);
  check_chunked({2, 37, 37, 6, 3, 16, 0, 5, true, 642, true}, 10, true);
  check_chunked({2, 150, 150, 12, 12, 16, 0, 0, true, 643, true}, 50, false);  // multithreaded
}

// cuDNN's graph takes ALiBi (our slopes times each key's absolute position, cudnn_attention_graph.cpp): a
// bf16 ALiBi call, whole or a chunk at an offset, with power-of-two and other head counts, goes to cuDNN
// under auto and cudnn; what cuDNN's graph does not cover keeps to our kernels, ALiBi or not (f32, packed
// segments, whose positions restart per sequence, head_dim 80 as bloom-3b's). tests/cuda's
// CudaParity.CudnnAttentionAlibi checks the numbers against the float64 reference.
TEST(AttentionAlibi, CudnnTakesAlibi) {
  using ops::cuda::AttentionKernel;
  for (const AttnCase& c : {AttnCase{1, 128, 128, 16, 16, 64, 0, 0, false, 1, true},
                            AttnCase{2, 100, 600, 12, 12, 128, 500, 0, false, 1, true},
                            AttnCase{1, 1, 37, 6, 6, 64, 36, 0, false, 1, true}}) {
    ops::cuda::AttentionCallShape call;
    call.dtype = DType::BF16;
    call.p = c.params();
    EXPECT_EQ(ops::cuda::cudnn_attention_ineligible_reason(call), nullptr) << c.str();
    for (auto request : {ops::AttentionKernelRequest::Auto, ops::AttentionKernelRequest::Cudnn})
      EXPECT_EQ(ops::cuda::choose_attention_kernel(request, call, true, "", false), AttentionKernel::Cudnn)
          << c.str();
    EXPECT_EQ(
        ops::cuda::choose_attention_kernel(ops::AttentionKernelRequest::TensorCore, call, true, "", false),
        AttentionKernel::Simt)
        << c.str();

    ops::cuda::AttentionCallShape f32 = call;
    f32.dtype = DType::F32;
    EXPECT_STREQ(ops::cuda::cudnn_attention_ineligible_reason(f32), "dtype is not bf16");
    ops::cuda::AttentionCallShape packed = call;
    packed.segmented = true;
    EXPECT_STREQ(ops::cuda::cudnn_attention_ineligible_reason(packed), "packed segments");
    ops::cuda::AttentionCallShape hd80 = call;
    hd80.p.head_dim = 80;
    EXPECT_STREQ(ops::cuda::cudnn_attention_ineligible_reason(hd80), "head_dim is not 64, 128 or 256");
    for (const auto& refused : {f32, packed, hd80})
      EXPECT_EQ(
          ops::cuda::choose_attention_kernel(ops::AttentionKernelRequest::Cudnn, refused, true, "", false),
          AttentionKernel::Simt);
  }
}

}  // namespace
}  // namespace lt::test
