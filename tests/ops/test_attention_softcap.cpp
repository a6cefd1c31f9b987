// Attention-logit soft-capping (AttentionParams::softcap, Gemma 2): the op against the naive long double
// reference, float64 finite-difference gradients, and chunked == whole with a sliding window (positions are
// absolute, so the capped scores of a chunk are the whole sequence's).
#include <gtest/gtest.h>

#include "ops/attention_reference.h"

namespace lt::test {
namespace {

// A small cap (the scores reach |t| ~ 3) so that tanh bends them: a missing cap shows.
constexpr double kCap = 1.5;

AttnCase capped(AttnCase c) {
  c.softcap = kCap;
  return c;
}

std::vector<AttnCase> cases() {
  return {capped({1, 6, 6, 4, 4, 8, 0, 0, false, 601}),        // plain causal
          capped({2, 5, 13, 4, 2, 8, 4, 0, false, 602}),       // GQA, offset, keys past the last query
          capped({1, 7, 15, 6, 1, 8, 5, 4, true, 603}),        // window + segments
          capped({2, 71, 130, 4, 2, 16, 50, 17, true, 604})};  // two row blocks
}

TEST(AttentionSoftcap, ForwardMatchesNaive) {
  for (const AttnCase& c : cases()) {
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    const AttnOut want = naive_attention(c, d);
    AttnOut got = run_forward<double>(c, d);
    EXPECT_LE(max_rel_diff(got.out, want.out), 1e-12);
    EXPECT_LE(max_rel_diff(got.lse, want.lse), 1e-12);
    AttnOut got32 = run_forward<float>(c, d);
    EXPECT_LE(max_rel_diff(got32.out, want.out), 1e-5);
    EXPECT_LE(max_rel_diff(got32.lse, want.lse), 1e-5);
    // The cap changes the result (else this test could not fail).
    AttnCase plain = c;
    plain.softcap = 0;
    EXPECT_GT(max_rel_diff(run_forward<double>(plain, d).lse, want.lse), 1e-3);
  }
}

TEST(AttentionSoftcap, GradientsMatchFiniteDifferences) {
  for (const AttnCase& c : cases()) {
    if (c.Tq > 20) continue;  // finite differences on the small cases
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
    AttnGrads g32 = run_backward<float>(c, d, r, zeros, zeros);
    EXPECT_LE(max_rel_diff(g32.dq, g.dq), 1e-5);
    EXPECT_LE(max_rel_diff(g32.dk, g.dk), 1e-5);
  }
}

// Both a cap and ALiBi (no family has both today, but the op takes them together): transformers caps the
// scaled scores first and adds the biases after, so the cap's slope in backward is taken without the bias.
TEST(AttentionSoftcap, WithAlibiCapsBeforeTheBiases) {
  for (AttnCase c :
       {capped({1, 6, 6, 4, 4, 8, 0, 0, false, 621}), capped({1, 9, 15, 5, 5, 8, 5, 4, true, 622})}) {
    c.alibi = true;
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    const AttnOut want = naive_attention(c, d);
    const AttnOut got = run_forward<double>(c, d);
    EXPECT_LE(max_rel_diff(got.out, want.out), 1e-12);
    EXPECT_LE(max_rel_diff(got.lse, want.lse), 1e-12);
    const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), c.seed * 10 + 7);
    const std::vector<double> zeros(d.k.size(), 0.0);
    const AttnGrads g = run_backward<double>(c, d, r, zeros, zeros);
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
}

// Rows [c0, c1) of each sequence of x (B, T, W) as (B, c1 - c0, W).
std::vector<double> rows_of(const std::vector<double>& x, int64_t B, int64_t T, int64_t W, int64_t c0,
                            int64_t c1) {
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), x.begin() + (b * T + c0) * W, x.begin() + (b * T + c1) * W);
  return out;
}

TEST(AttentionSoftcap, ChunkedEqualsWholeWithAWindow) {
  const int64_t B = 2, T = 37, H = 4, KVH = 2, HD = 8, chunk = 8;
  const AttnCase whole = capped({B, T, T, H, KVH, HD, 0, 5, false, 611});
  AttnData d = make_attn_data(whole);
  const AttnOut want = naive_attention(whole, d);
  const std::vector<double> r = random_values(size_t(B * T * H * HD), 612);
  const std::vector<double> zeros(d.k.size(), 0.0);
  const AttnGrads want_g = run_backward<double>(whole, d, r, zeros, zeros);
  std::vector<double> dk = zeros, dv = zeros;
  for (int64_t c0 = (T - 1) / chunk * chunk; c0 >= 0; c0 -= chunk) {  // backward order: last chunk first
    const int64_t c1 = std::min(T, c0 + chunk);
    AttnCase cc = whole;
    cc.Tq = c1 - c0;
    cc.q_offset = c0;
    AttnData cd = d;
    cd.q = rows_of(d.q, B, T, H * HD, c0, c1);
    const AttnOut o = run_forward<double>(cc, cd);
    EXPECT_LE(max_rel_diff(o.out, rows_of(want.out, B, T, H * HD, c0, c1)), 1e-12);
    const AttnGrads g = run_backward<double>(cc, cd, rows_of(r, B, T, H * HD, c0, c1), dk, dv);
    EXPECT_LE(max_rel_diff(g.dq, rows_of(want_g.dq, B, T, H * HD, c0, c1)), 1e-12);
    dk = g.dk, dv = g.dv;
  }
  EXPECT_LE(max_rel_diff(dk, want_g.dk), 1e-12);
  EXPECT_LE(max_rel_diff(dv, want_g.dv), 1e-12);
}

TEST(AttentionSoftcap, NegativeCapIsRefused) {
  AttnCase c = capped({1, 3, 3, 2, 2, 8, 0, 0, false, 621});
  c.softcap = -1;
  AttnData d = make_attn_data(c);
  expect_error_mentions([&] { run_forward<double>(c, d); }, {"softcap = -1; expected a finite number >= 0"});
}

}  // namespace
}  // namespace lt::test
