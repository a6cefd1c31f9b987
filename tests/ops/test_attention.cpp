// Causal attention (GQA, query offset, sliding window, packed segments): the op against a naive
// long double reference, float64 finite-difference gradients, the accumulate contract of dk/dv, and the
// chunked == whole property that chunked training relies on.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>

#include "ops/attention_chunked.h"
#include "ops/attention_reference.h"

namespace lt::test {
namespace {

// A spread of shapes: every (H, KVH) pairing, both head dims, rows that span several 64-row blocks,
// offsets with keys beyond the last query, windows from 1 token up, packed and unpacked rows.
std::vector<AttnCase> forward_cases() {
  std::vector<AttnCase> cases = {
      {2, 71, 130, 4, 2, 16, 50, 17, true, 101},  // everything at once, two row blocks
      {2, 150, 150, 6, 1, 16, 0, 0, false, 102},  // whole sequence, three row blocks
      {2, 130, 170, 4, 4, 16, 33, 0, true, 103},  // (these three are large enough to run multithreaded)
  };
  std::mt19937_64 rng(20261121);
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); };
  const int64_t head_pairs[3][2] = {{4, 4}, {4, 2}, {6, 1}};
  for (uint64_t n = 0; n < 40; ++n) {
    AttnCase c{};
    c.B = pick({1, 2});
    const int64_t hp = pick({0, 1, 2});
    c.H = head_pairs[hp][0];
    c.KVH = head_pairs[hp][1];
    c.HD = pick({8, 16});
    c.Tq = pick({1, 3, 7, 13, 29, 67});
    c.q_offset = pick({0, 0, 5, 11, 40});
    c.S = c.q_offset + c.Tq + pick({0, 3, 9});
    c.window = pick({0, 0, 1, 3, 6, 17});
    c.packed = rng() % 2;
    c.seed = n + 1;
    cases.push_back(c);
  }
  return cases;
}

template <class T>
void check_forward_against_naive(double tol) {
  for (const AttnCase& c : forward_cases()) {
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    AttnOut want = naive_attention(c, d);
    AttnOut got = run_forward<T>(c, d);
    EXPECT_LE(max_rel_diff(got.out, want.out), tol);
    EXPECT_LE(max_rel_diff(got.lse, want.lse), tol);
  }
}

TEST(Attention, ForwardFloat64MatchesNaive) {
  check_forward_against_naive<double>(1e-12);
}
TEST(Attention, ForwardFloat32MatchesNaive) {
  check_forward_against_naive<float>(1e-5);
}

// d/dx of sum(out * R), by finite differences of the float64 op, against attention_backward.
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

TEST(Attention, GradientsMatchFiniteDifferences) {
  check_gradients({1, 6, 6, 4, 4, 8, 0, 0, false, 201});   // plain causal
  check_gradients({2, 5, 13, 4, 2, 8, 4, 0, false, 202});  // GQA, offset, keys past the last query
  check_gradients({1, 7, 15, 6, 1, 8, 5, 4, true, 203});   // GQA + offset + window + segments
  check_gradients({2, 9, 12, 4, 2, 16, 3, 3, true, 204});
  check_gradients({1, 70, 72, 4, 2, 8, 2, 0, true, 205});  // two row blocks
}

TEST(Attention, BackwardFloat32MatchesFloat64) {
  for (const AttnCase& c :
       {AttnCase{2, 140, 200, 4, 2, 16, 50, 17, true, 301}, AttnCase{1, 29, 40, 6, 1, 8, 9, 0, false, 302}}) {
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), 303);
    const std::vector<double> zeros(d.k.size(), 0.0);
    AttnGrads g64 = run_backward<double>(c, d, r, zeros, zeros);
    AttnGrads g32 = run_backward<float>(c, d, r, zeros, zeros);
    EXPECT_LE(max_rel_diff(g32.dq, g64.dq), 1e-5);
    EXPECT_LE(max_rel_diff(g32.dk, g64.dk), 1e-5);
    EXPECT_LE(max_rel_diff(g32.dv, g64.dv), 1e-5);
  }
}

TEST(Attention, BackwardAccumulatesDkDvAndWritesDq) {
  const AttnCase c{2, 13, 24, 6, 1, 8, 7, 5, true, 401};
  AttnData d = make_attn_data(c);
  const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), 402);
  const std::vector<double> dk0 = random_values(d.k.size(), 403), dv0 = random_values(d.v.size(), 404);
  AttnGrads once = run_backward<double>(c, d, r, dk0, dv0);
  AttnGrads twice = run_backward<double>(c, d, r, once.dk, once.dv);
  std::vector<double> step1(d.k.size()), step2(d.k.size()), vstep1(d.v.size()), vstep2(d.v.size());
  for (size_t i = 0; i < d.k.size(); ++i) {
    step1[i] = 2 * (once.dk[i] - dk0[i]);
    step2[i] = twice.dk[i] - dk0[i];
    vstep1[i] = 2 * (once.dv[i] - dv0[i]);
    vstep2[i] = twice.dv[i] - dv0[i];
  }
  EXPECT_LE(max_rel_diff(step2, step1), 1e-12);
  EXPECT_LE(max_rel_diff(vstep2, vstep1), 1e-12);
  EXPECT_EQ(once.dq, twice.dq);  // written, not accumulated
}

TEST(Attention, ChunkedEqualsWholeSequence) {
  check_chunked({1, 37, 37, 4, 2, 8, 0, 0, false, 501}, 8, false);
  check_chunked({2, 37, 37, 6, 1, 16, 0, 5, true, 502}, 10, true);
  check_chunked({2, 150, 150, 4, 2, 16, 0, 0, true, 503}, 50, false);  // multithreaded
  check_chunked({2, 29, 29, 4, 2, 8, 0, 7, true, 504}, 4, false);
  check_chunked({1, 41, 41, 6, 1, 8, 0, 0, false, 505}, 41, true);  // one chunk: the trivial split
}

// window = 1, or one segment per token: each row sees only its own key, so out = v, lse = scale * q.k,
// and no gradient reaches q or k (softmax over one key is constant).
TEST(Attention, RowThatSeesOnlyItself) {
  for (bool by_segments : {false, true}) {
    AttnCase c{2, 9, 14, 4, 2, 8, 3, by_segments ? 0 : 1, by_segments, 601};
    SCOPED_TRACE(c.str());
    AttnData d = make_attn_data(c);
    if (by_segments) {
      for (int64_t b = 0; b < c.B; ++b) {
        for (int64_t j = 0; j < c.S; ++j) d.k_seg[size_t(b * c.S + j)] = int32_t(j);
        for (int64_t i = 0; i < c.Tq; ++i) d.q_seg[size_t(b * c.Tq + i)] = int32_t(c.q_offset + i);
      }
    }
    AttnOut o = run_forward<double>(c, d);
    const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), 602);
    const std::vector<double> zeros(d.k.size(), 0.0);
    AttnGrads g = run_backward<double>(c, d, r, zeros, zeros);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.Tq; ++i)
        for (int64_t h = 0; h < c.H; ++h) {
          const int64_t kv = ((b * c.S + c.q_offset + i) * c.KVH + h / (c.H / c.KVH)) * c.HD;
          const int64_t qi = ((b * c.Tq + i) * c.H + h) * c.HD;
          double dot = 0;
          for (int64_t e = 0; e < c.HD; ++e) {
            EXPECT_NEAR(o.out[size_t(qi + e)], d.v[size_t(kv + e)], 1e-14);
            EXPECT_NEAR(g.dq[size_t(qi + e)], 0.0, 1e-13);
            dot += d.q[size_t(qi + e)] * d.k[size_t(kv + e)];
          }
          EXPECT_NEAR(o.lse[size_t((b * c.H + h) * c.Tq + i)], dot * c.params().scale, 1e-13);
        }
    for (double x : g.dk) EXPECT_NEAR(x, 0.0, 1e-13);
    // dv at each query's own key = the sum of dout over the heads of its group.
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.Tq; ++i)
        for (int64_t kvh = 0; kvh < c.KVH; ++kvh)
          for (int64_t e = 0; e < c.HD; ++e) {
            double sum = 0;
            for (int64_t h = kvh * (c.H / c.KVH); h < (kvh + 1) * (c.H / c.KVH); ++h)
              sum += r[size_t(((b * c.Tq + i) * c.H + h) * c.HD + e)];
            EXPECT_NEAR(g.dv[size_t(((b * c.S + c.q_offset + i) * c.KVH + kvh) * c.HD + e)], sum, 1e-13);
          }
  }
}

// A packed row whose second sequence starts inside the chunk: rows after the boundary do not depend on the
// keys before it at all (bit for bit), rows before it do, and both match the naive reference.
TEST(Attention, SegmentStartsMidChunk) {
  const AttnCase c{1, 8, 16, 4, 2, 8, 6, 0, true, 701};
  constexpr int64_t kBoundary = 9;  // key position where the second sequence starts; query row 3
  AttnData d = make_attn_data(c);
  for (int64_t j = 0; j < c.S; ++j) d.k_seg[size_t(j)] = j < kBoundary ? 4 : 5;
  for (int64_t i = 0; i < c.Tq; ++i) d.q_seg[size_t(i)] = d.k_seg[size_t(c.q_offset + i)];
  const std::vector<double> r = random_values(size_t(c.Tq * c.H * c.HD), 702);
  const std::vector<double> zeros(d.k.size(), 0.0);
  AttnOut before = run_forward<double>(c, d);
  AttnGrads g_before = run_backward<double>(c, d, r, zeros, zeros);
  EXPECT_LE(max_rel_diff(before.out, naive_attention(c, d).out), 1e-12);

  const std::vector<double> fresh = random_values(d.k.size(), 703, -2, 2);
  const int64_t kv_row = c.KVH * c.HD, q_row = c.H * c.HD, first_after = kBoundary - c.q_offset;
  for (int64_t j = 0; j < kBoundary * kv_row; ++j) {
    d.k[size_t(j)] = fresh[size_t(j)];
    d.v[size_t(j)] = -fresh[size_t(j)];
  }
  AttnOut after = run_forward<double>(c, d);
  AttnGrads g_after = run_backward<double>(c, d, r, zeros, zeros);
  EXPECT_LE(max_rel_diff(after.out, naive_attention(c, d).out), 1e-12);
  for (int64_t i = 0; i < c.Tq; ++i) {
    const bool second = i >= first_after;
    const auto row = [&](const std::vector<double>& x) {
      return std::vector<double>(x.begin() + i * q_row, x.begin() + (i + 1) * q_row);
    };
    if (second) {
      EXPECT_EQ(row(after.out), row(before.out)) << "row " << i;
      EXPECT_EQ(row(g_after.dq), row(g_before.dq)) << "row " << i;
    } else {
      EXPECT_NE(row(after.out), row(before.out)) << "row " << i;
    }
  }
  for (int64_t j = kBoundary * kv_row; j < c.S * kv_row; ++j) {
    EXPECT_EQ(g_after.dk[size_t(j)], g_before.dk[size_t(j)]);
    EXPECT_EQ(g_after.dv[size_t(j)], g_before.dv[size_t(j)]);
  }
}

// The task split does not depend on the thread count, so neither do the sums.
TEST(Attention, SameBitsWithAnyThreadCount) {
  const AttnCase c{2, 200, 260, 6, 1, 16, 60, 0, true, 801};  // large enough for a team of threads
  AttnData d = make_attn_data(c);
  const std::vector<double> r = random_values(size_t(c.B * c.Tq * c.H * c.HD), 802);
  const std::vector<double> zeros(d.k.size(), 0.0);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  AttnOut o1 = run_forward<float>(c, d);
  AttnGrads g1 = run_backward<float>(c, d, r, zeros, zeros);
  omp_set_num_threads(3);
  AttnOut o3 = run_forward<float>(c, d);
  AttnGrads g3 = run_backward<float>(c, d, r, zeros, zeros);
  omp_set_num_threads(saved);
  EXPECT_EQ(o1.out, o3.out);
  EXPECT_EQ(o1.lse, o3.lse);
  EXPECT_EQ(g1.dq, g3.dq);
  EXPECT_EQ(g1.dk, g3.dk);
  EXPECT_EQ(g1.dv, g3.dv);
}

// A chunk with no queries (q_len = 0) writes nothing and adds nothing, whatever its offset.
TEST(Attention, EmptyQueryChunkChangesNothing) {
  const AttnCase c{2, 0, 11, 6, 1, 8, 7, 0, true, 901};
  AttnData d = make_attn_data(c);
  const std::vector<double> dk0 = random_values(d.k.size(), 902), dv0 = random_values(d.v.size(), 903);
  AttnGrads g = run_backward<double>(c, d, {}, dk0, dv0);
  EXPECT_TRUE(g.dq.empty());
  EXPECT_EQ(g.dk, dk0);
  EXPECT_EQ(g.dv, dv0);
}

}  // namespace
}  // namespace lt::test
