// Test helpers for attention: random cases, a naive reference that follows the definition in ops.h
// literally (full score matrix, explicit mask, long double softmax), and wrappers that run the op in
// float or double on std::vector<double> data with poisoned outputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt::test {

struct AttnCase {
  int64_t B, Tq, S, H, KVH, HD;
  int64_t q_offset = 0;
  int64_t window = 0;
  bool packed = false;
  uint64_t seed = 1;
  bool alibi = false;  // BLOOM's ALiBi biases (naive_alibi_bias)
  double softcap = 0;  // attention-logit soft-cap (ops.h); 0 = none

  ops::AttentionParams params() const {
    ops::AttentionParams p;
    p.batch = B;
    p.q_len = Tq;
    p.kv_len = S;
    p.heads = H;
    p.kv_heads = KVH;
    p.head_dim = HD;
    p.q_offset = q_offset;
    p.window = window;
    p.scale = 1.0 / std::sqrt(double(HD));
    p.softcap = softcap;
    p.alibi = alibi;
    return p;
  }
  std::string str() const {
    return "B=" + std::to_string(B) + " Tq=" + std::to_string(Tq) + " S=" + std::to_string(S) +
           " H=" + std::to_string(H) + " KVH=" + std::to_string(KVH) + " HD=" + std::to_string(HD) +
           " q_offset=" + std::to_string(q_offset) + " window=" + std::to_string(window) +
           " packed=" + std::to_string(packed) + " seed=" + std::to_string(seed) +
           (softcap > 0 ? " softcap=" + std::to_string(softcap) : std::string()) + (alibi ? " alibi" : "");
  }
};

struct AttnData {
  std::vector<double> q, k, v;        // (B, Tq, H, HD), (B, S, KVH, HD) x2
  std::vector<int32_t> q_seg, k_seg;  // (B, Tq), (B, S); empty unless packed
};

// Random q/k/v in [-2, 2) (wide enough for peaked softmaxes) and, when packed, segment ids that start at
// an arbitrary value and step up at random positions (about one boundary every 5 tokens).
inline AttnData make_attn_data(const AttnCase& c) {
  AttnData d;
  d.q = random_values(size_t(c.B * c.Tq * c.H * c.HD), c.seed * 10 + 1, -2, 2);
  d.k = random_values(size_t(c.B * c.S * c.KVH * c.HD), c.seed * 10 + 2, -2, 2);
  d.v = random_values(size_t(c.B * c.S * c.KVH * c.HD), c.seed * 10 + 3, -2, 2);
  if (c.packed) {
    std::vector<double> u = random_values(size_t(c.B * c.S), c.seed * 10 + 4, 0, 1);
    d.k_seg.resize(size_t(c.B * c.S));
    d.q_seg.resize(size_t(c.B * c.Tq));
    for (int64_t b = 0; b < c.B; ++b) {
      int32_t id = int32_t(3 + 7 * b);
      for (int64_t j = 0; j < c.S; ++j) {
        if (j > 0 && u[size_t(b * c.S + j)] < 0.2) id += 1 + int32_t(j % 2);
        d.k_seg[size_t(b * c.S + j)] = id;
      }
      for (int64_t i = 0; i < c.Tq; ++i)
        d.q_seg[size_t(b * c.Tq + i)] = d.k_seg[size_t(b * c.S + c.q_offset + i)];
    }
  }
  return d;
}

struct AttnOut {
  std::vector<double> out, lse;  // (B, Tq, H, HD), (B, H, Tq)
};

// transformers' _get_alibi_slopes written out literally (Python's float math in double, the torch tensors in
// float32): the slope of head h of n heads.
inline float naive_alibi_slope(int64_t h, int64_t n) {
  const double closest = std::pow(2.0, std::floor(std::log2(double(n))));
  const float base = float(std::pow(2.0, -std::pow(2.0, -(std::log2(closest) - 3))));
  if (h < int64_t(closest)) return powf(base, float(h + 1));
  const float extra = float(std::pow(2.0, -std::pow(2.0, -(std::log2(2 * closest) - 3))));
  return powf(extra, float(1 + 2 * (h - int64_t(closest))));
}

// build_alibi_tensor's bias of a key at position `pos` of its sequence: float32 slope * float32(pos).
inline double naive_alibi_bias(const AttnCase& c, const AttnData& d, int64_t b, int64_t h, int64_t j) {
  if (!c.alibi) return 0;
  int64_t start = 0;
  if (c.packed)
    while (d.k_seg[size_t(b * c.S + start)] != d.k_seg[size_t(b * c.S + j)]) ++start;
  return double(naive_alibi_slope(h, c.H) * float(j - start));
}

// The definition, literally: every score, then the mask, then a long double softmax.
inline AttnOut naive_attention(const AttnCase& c, const AttnData& d) {
  const double scale = c.params().scale;
  AttnOut r{std::vector<double>(size_t(c.B * c.Tq * c.H * c.HD)),
            std::vector<double>(size_t(c.B * c.H * c.Tq))};
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.Tq; ++i) {
        const int64_t kvh = h / (c.H / c.KVH), pos = c.q_offset + i;
        std::vector<long double> score(size_t(c.S));
        std::vector<bool> visible(size_t(c.S));
        long double m = -std::numeric_limits<long double>::infinity();
        for (int64_t j = 0; j < c.S; ++j) {
          long double s = 0;
          for (int64_t e = 0; e < c.HD; ++e)
            s += (long double)d.q[size_t(((b * c.Tq + i) * c.H + h) * c.HD + e)] *
                 d.k[size_t(((b * c.S + j) * c.KVH + kvh) * c.HD + e)];
          score[size_t(j)] = s * scale;
          if (c.softcap > 0) score[size_t(j)] = c.softcap * std::tanh(score[size_t(j)] / c.softcap);
          score[size_t(j)] += naive_alibi_bias(c, d, b, h, j);  // after the cap, as transformers
          visible[size_t(j)] = j <= pos && (c.window == 0 || pos - j < c.window) &&
                               (!c.packed || d.k_seg[size_t(b * c.S + j)] == d.q_seg[size_t(b * c.Tq + i)]);
          if (visible[size_t(j)]) m = std::max(m, score[size_t(j)]);
        }
        long double sum = 0;
        std::vector<long double> acc(size_t(c.HD), 0);
        for (int64_t j = 0; j < c.S; ++j) {
          if (!visible[size_t(j)]) continue;
          long double p = std::exp(score[size_t(j)] - m);
          sum += p;
          for (int64_t e = 0; e < c.HD; ++e)
            acc[size_t(e)] += p * d.v[size_t(((b * c.S + j) * c.KVH + kvh) * c.HD + e)];
        }
        for (int64_t e = 0; e < c.HD; ++e)
          r.out[size_t(((b * c.Tq + i) * c.H + h) * c.HD + e)] = double(acc[size_t(e)] / sum);
        r.lse[size_t((b * c.H + h) * c.Tq + i)] = double(m + std::log(sum));
      }
  return r;
}

template <class T>
std::vector<T> to(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}
template <class T>
std::vector<double> from(const std::vector<T>& x) {
  return std::vector<double>(x.begin(), x.end());
}
template <class T>
DType dtype_for() {
  return sizeof(T) == 8 ? DType::F64 : DType::F32;
}

inline Tensor seg_tensor(std::vector<int32_t>& s, int64_t b, int64_t n) {
  return s.empty() ? Tensor() : Tensor(s.data(), DType::I32, {b, n});
}

// Forward in T; outputs start as NaN so that an unwritten element shows.
template <class T>
AttnOut run_forward(const AttnCase& c, AttnData& d) {
  std::vector<T> q = to<T>(d.q), k = to<T>(d.k), v = to<T>(d.v);
  std::vector<T> out(size_t(c.B * c.Tq * c.H * c.HD), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> lse(size_t(c.B * c.H * c.Tq), std::numeric_limits<T>::quiet_NaN());
  const DType dt = dtype_for<T>();
  ops::attention_forward(
      ctx, c.params(), Tensor(out.data(), dt, {c.B, c.Tq, c.H, c.HD}),
      Tensor(lse.data(), dt, {c.B, c.H, c.Tq}), Tensor(q.data(), dt, {c.B, c.Tq, c.H, c.HD}),
      Tensor(k.data(), dt, {c.B, c.S, c.KVH, c.HD}), Tensor(v.data(), dt, {c.B, c.S, c.KVH, c.HD}),
      seg_tensor(d.q_seg, c.B, c.Tq), seg_tensor(d.k_seg, c.B, c.S));
  return {from(out), from(lse)};
}

struct AttnGrads {
  std::vector<double> dq, dk, dv;
};

// Forward then backward in T with upstream gradient `dout`; dk/dv start at `dk0`/`dv0` (they accumulate),
// dq starts as NaN (it is written).
template <class T>
AttnGrads run_backward(const AttnCase& c, AttnData& d, const std::vector<double>& dout,
                       const std::vector<double>& dk0, const std::vector<double>& dv0) {
  AttnOut fwd = run_forward<T>(c, d);
  std::vector<T> q = to<T>(d.q), k = to<T>(d.k), v = to<T>(d.v), out = to<T>(fwd.out), lse = to<T>(fwd.lse);
  std::vector<T> g = to<T>(dout), dk = to<T>(dk0), dv = to<T>(dv0);
  std::vector<T> dq(q.size(), std::numeric_limits<T>::quiet_NaN());
  const DType dt = dtype_for<T>();
  auto qshape = [&](std::vector<T>& x) { return Tensor(x.data(), dt, {c.B, c.Tq, c.H, c.HD}); };
  auto kshape = [&](std::vector<T>& x) { return Tensor(x.data(), dt, {c.B, c.S, c.KVH, c.HD}); };
  ops::attention_backward(ctx, c.params(), qshape(dq), kshape(dk), kshape(dv), qshape(g), qshape(out),
                          Tensor(lse.data(), dt, {c.B, c.H, c.Tq}), qshape(q), kshape(k), kshape(v),
                          seg_tensor(d.q_seg, c.B, c.Tq), seg_tensor(d.k_seg, c.B, c.S));
  return {from(dq), from(dk), from(dv)};
}

}  // namespace lt::test
