// The chunked == whole check of attention (test_attention.cpp, test_attention_alibi.cpp): a case run over
// the whole sequence against the same computed chunk by chunk, as chunked training does.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ops/attention_reference.h"

namespace lt::test {

// Copies rows [begin, end) of the second dimension of a (B, N, inner) array.
template <class X>
inline std::vector<X> slice_seq(const std::vector<X>& x, int64_t B, int64_t N, int64_t inner, int64_t begin,
                                int64_t end) {
  std::vector<X> s;
  for (int64_t b = 0; b < B; ++b)
    s.insert(s.end(), x.begin() + (b * N + begin) * inner, x.begin() + (b * N + end) * inner);
  return s;
}
template <class X>
inline void put_seq(std::vector<X>& x, const std::vector<X>& s, int64_t B, int64_t N, int64_t inner,
                    int64_t begin) {
  const int64_t n = int64_t(s.size()) / (B * inner);
  for (int64_t b = 0; b < B; ++b)
    std::copy(s.begin() + b * n * inner, s.begin() + (b + 1) * n * inner,
              x.begin() + (b * N + begin) * inner);
}

// Whole-sequence forward/backward against the same computed chunk by chunk: each chunk's queries attend to
// the K/V prefix [0, chunk end) (prefix copies) or to the full K/V buffer (kv_len = T), backward runs in
// reverse chunk order and adds into one full-length dK/dV accumulator, dQ is concatenated.
inline void check_chunked(AttnCase whole, int64_t chunk, bool full_buffer) {
  SCOPED_TRACE(whole.str() + " chunk=" + std::to_string(chunk) +
               " full_buffer=" + std::to_string(full_buffer));
  const int64_t B = whole.B, T = whole.Tq, H = whole.H, KVH = whole.KVH, HD = whole.HD;
  AttnData d = make_attn_data(whole);
  const std::vector<double> r = random_values(size_t(B * T * H * HD), whole.seed * 10 + 8);
  const std::vector<double> zeros(d.k.size(), 0.0);
  AttnOut want = run_forward<double>(whole, d);
  AttnGrads want_g = run_backward<double>(whole, d, r, zeros, zeros);

  AttnOut got{std::vector<double>(want.out.size()), std::vector<double>(want.lse.size())};
  AttnGrads got_g{std::vector<double>(want_g.dq.size()), zeros, zeros};
  std::vector<int64_t> starts;
  for (int64_t c0 = 0; c0 < T; c0 += chunk) starts.push_back(c0);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t n = 0; n < starts.size(); ++n) {
      const int64_t c0 = pass == 0 ? starts[n] : starts[starts.size() - 1 - n], c1 = std::min(T, c0 + chunk);
      AttnCase cc = whole;
      cc.Tq = c1 - c0;
      cc.q_offset = c0;
      cc.S = full_buffer ? T : c1;
      AttnData cd;
      cd.q = slice_seq(d.q, B, T, H * HD, c0, c1);
      cd.k = slice_seq(d.k, B, T, KVH * HD, 0, cc.S);
      cd.v = slice_seq(d.v, B, T, KVH * HD, 0, cc.S);
      if (whole.packed) {
        cd.q_seg = slice_seq(d.q_seg, B, T, 1, c0, c1);
        cd.k_seg = slice_seq(d.k_seg, B, T, 1, 0, cc.S);
      }
      if (pass == 0) {  // forward, chunks in order
        AttnOut o = run_forward<double>(cc, cd);
        put_seq(got.out, o.out, B, T, H * HD, c0);
        put_seq(got.lse, o.lse, B * H, T, 1, c0);
      } else {  // backward, reverse order, accumulating into the prefix of the full-length dK/dV
        AttnGrads g = run_backward<double>(cc, cd, slice_seq(r, B, T, H * HD, c0, c1),
                                           slice_seq(got_g.dk, B, T, KVH * HD, 0, cc.S),
                                           slice_seq(got_g.dv, B, T, KVH * HD, 0, cc.S));
        put_seq(got_g.dq, g.dq, B, T, H * HD, c0);
        put_seq(got_g.dk, g.dk, B, T, KVH * HD, 0);
        put_seq(got_g.dv, g.dv, B, T, KVH * HD, 0);
      }
    }
  }
  EXPECT_LE(max_rel_diff(got.out, want.out), 1e-12);
  EXPECT_LE(max_rel_diff(got.lse, want.lse), 1e-12);
  EXPECT_LE(max_rel_diff(got_g.dq, want_g.dq), 1e-12);
  EXPECT_LE(max_rel_diff(got_g.dk, want_g.dk), 1e-12);
  EXPECT_LE(max_rel_diff(got_g.dv, want_g.dv), 1e-12);
}

}  // namespace lt::test
