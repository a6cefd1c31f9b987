// CPU reference of causal attention with GQA, a query offset, a sliding window, packed segments and ALiBi.
// dq is written (=); dk and dv accumulate (+=), since chunked training adds every chunk's share into the
// per-layer dK/dV accumulators.
//
// Why it is shaped this way: every visibility rule (causal, window, segment) leaves query row i one
// contiguous key interval [lo_i, q_offset + i], and both ends never decrease with i (positions grow,
// segment ids never decrease). A block of query rows therefore needs only the keys [lo_first, last row]:
// its scores are one GEMM over that rectangle, keys outside it (fully masked) are never touched, and the
// masked corners inside it are zeroed after the softmax. Backward recomputes P from q, k and lse.
// Soft-capping (params.softcap) turns the visible scaled scores t into c * tanh(t / c) before ALiBi's bias
// and the softmax (soft_cap_scores); backward multiplies dS by its slope 1 - (s / c)^2 (soft_cap_slope).
// Threads take (batch, head, query block) tasks in forward. In backward they take (batch, head) tasks so
// that each task owns its dk/dv sums; heads sharing a kv head (GQA) write per-head scratch that is added
// in head order afterwards, so no sum depends on thread scheduling. BLAS runs single-threaded inside the
// OpenMP region (the op's threads already cover the cores).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/alibi.h"
#include "ops/cpu/cpu_attention.h"
#include "ops/cpu/cpu_common.h"

namespace lt::ops::cpu {
namespace {

constexpr int64_t kRowBlock = 64;  // query rows per task: scores of a block are (kRowBlock, keys)
// Below this many multiply-adds (an upper bound: Tq * (q_offset + Tq) * HD per head) a call runs on the
// calling thread: waking a team costs more than it saves, and idle spinning threads slow a loaded machine.
constexpr int64_t kParallelWork = int64_t(1) << 21;

int team_size(const AttentionParams& p, int64_t tasks) {
  const int64_t work = p.batch * p.heads * p.q_len * (p.q_offset + p.q_len) * p.head_dim;
  if (work < kParallelWork) return 1;
  return std::max(1, int(std::min<int64_t>(omp_get_max_threads(), tasks)));
}

// Row-major C = alpha * op(A) op(B) + beta * C, op = transpose when the flag is set.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m),
              blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m),
              blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

// OpenBLAS on one thread while the guard lives; restored afterwards for the ops that want its threads.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) {
    if (saved_ != 1) openblas_set_num_threads(1);
  }
  ~SingleThreadedBlas() {
    if (saved_ != 1) openblas_set_num_threads(saved_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

// Attention-logit soft-capping of the visible scores [c0, c1) of one row, in place: s = c tanh(t / c).
template <class T>
void soft_cap_scores(T* row, int64_t c0, int64_t c1, double cap) {
  for (int64_t c = c0; c < c1; ++c) row[c] = T(cap * std::tanh(double(row[c]) / cap));
}
// d s / d t at a capped score s: 1 - tanh^2 = 1 - (s / c)^2.
template <class T>
T soft_cap_slope(T s, double cap) {
  const double th = double(s) / cap;
  return T(1.0 - th * th);
}

// First visible key of every query row: (B, Tq). The last visible key of row i is q_offset + i itself
// (a query's own position is always visible: its segment is checked to equal its key's segment).
std::vector<int64_t> first_visible_keys(const AttentionParams& p, const Tensor& q_segments,
                                        const Tensor& k_segments) {
  const int64_t B = p.batch, Tq = p.q_len, S = p.kv_len;
  const int32_t* qs = q_segments.empty() ? nullptr : q_segments.ptr<int32_t>("attention q_segments");
  const int32_t* ks = k_segments.empty() ? nullptr : k_segments.ptr<int32_t>("attention k_segments");
  if (ks) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 1; j < S; ++j)
        LT_CHECK(
            ks[b * S + j] >= ks[b * S + j - 1],
            "attention: k_segments[{}, {}] = {} is smaller than k_segments[{}, {}] = {}; segment ids must be "
            "non-decreasing along each row (packed sequences)",
            b, j, ks[b * S + j], b, j - 1, ks[b * S + j - 1]);
      for (int64_t i = 0; i < Tq; ++i)
        LT_CHECK(
            qs[b * Tq + i] == ks[b * S + p.q_offset + i],
            "attention: q_segments[{}, {}] = {} but k_segments[{}, {}] = {}; query {} sits at key position "
            "q_offset + {} = {} and must carry that position's segment id",
            b, i, qs[b * Tq + i], b, p.q_offset + i, ks[b * S + p.q_offset + i], i, i, p.q_offset + i);
    }
  }
  std::vector<int64_t> lo(size_t(B * Tq));  // (B, Tq)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < Tq; ++i) {
      const int64_t pos = p.q_offset + i;
      int64_t first = 0;
      if (p.window > 0) first = std::max<int64_t>(first, pos - p.window + 1);
      if (ks) {
        const int32_t* row = ks + b * S;
        first = std::max<int64_t>(first, std::lower_bound(row, row + pos + 1, qs[b * Tq + i]) - row);
      }
      lo[size_t(b * Tq + i)] = first;
    }
  }
  return lo;
}

// ALiBi (p.alibi): per head its slope, per key its position in its sequence (ops/alibi.h). Empty otherwise.
struct AlibiTable {
  std::vector<float> slopes;       // (H)
  std::vector<int64_t> positions;  // (B, S): j, or j minus its segment's first key
  int64_t S = 0;

  AlibiTable(const AttentionParams& p, const Tensor& k_segments) : S(p.kv_len) {
    if (!p.alibi) return;
    for (int64_t h = 0; h < p.heads; ++h) slopes.push_back(alibi_slope(h, p.heads));
    const int32_t* ks = k_segments.empty() ? nullptr : k_segments.ptr<int32_t>("attention k_segments");
    positions.resize(size_t(p.batch * S));
    for (int64_t b = 0; b < p.batch; ++b) {
      int64_t start = 0;
      for (int64_t j = 0; j < S; ++j) {
        if (ks && j > 0 && ks[b * S + j] != ks[b * S + j - 1]) start = j;
        positions[size_t(b * S + j)] = j - start;
      }
    }
  }
  // Adds the biases of keys [j0 + c0, j0 + c1) to row[c0, c1) (scores of head h, batch row b).
  template <class T>
  void add(T* row, int64_t b, int64_t h, int64_t j0, int64_t c0, int64_t c1) const {
    if (slopes.empty()) return;
    const float slope = slopes[size_t(h)];
    const int64_t* pos = positions.data() + b * S + j0;
    for (int64_t c = c0; c < c1; ++c) row[c] += T(alibi_bias(slope, pos[c]));
  }
};

template <class T>
void forward_impl(const AttentionParams& p, Tensor out_t, Tensor lse_t, Tensor q_t, Tensor k_t, Tensor v_t,
                  Tensor q_segments, Tensor k_segments) {
  const int64_t B = p.batch, Tq = p.q_len, S = p.kv_len, H = p.heads, KVH = p.kv_heads, HD = p.head_dim;
  const int64_t group = H / KVH;
  const int64_t q_ld = H * HD, kv_ld = KVH * HD;  // row strides of (.., H, HD) and (.., KVH, HD)
  T* out = out_t.ptr<T>("attention out");
  T* lse = lse_t.ptr<T>("attention lse");
  const T* q = q_t.ptr<T>("attention q");
  const T* k = k_t.ptr<T>("attention k");
  const T* v = v_t.ptr<T>("attention v");
  const std::vector<int64_t> lo = first_visible_keys(p, q_segments, k_segments);  // (B, Tq)
  const AlibiTable alibi(p, k_segments);
  const T scale = T(p.scale);

  const int64_t blocks = (Tq + kRowBlock - 1) / kRowBlock;
  const int64_t tasks = B * H * blocks;
  const int64_t max_keys = p.q_offset + Tq;  // no query sees a key at or beyond this
  const int threads = team_size(p, tasks);
  std::vector<T> scratch(size_t(threads) * size_t(kRowBlock * max_keys));  // per thread (kRowBlock, keys)
  SingleThreadedBlas blas_guard;

#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / (H * blocks), h = task / blocks % H, blk = task % blocks;
    const int64_t i0 = blk * kRowBlock, i1 = std::min(Tq, i0 + kRowBlock), rows = i1 - i0;
    const int64_t j0 = lo[size_t(b * Tq + i0)], j1 = p.q_offset + i1, keys = j1 - j0;
    T* prob = scratch.data() + size_t(omp_get_thread_num()) * size_t(kRowBlock * max_keys);  // (rows, keys)
    const T* q_blk = q + ((b * Tq + i0) * H + h) * HD;           // (rows, HD), stride q_ld
    const T* k_rng = k + ((b * S + j0) * KVH + h / group) * HD;  // (keys, HD), stride kv_ld
    const T* v_rng = v + ((b * S + j0) * KVH + h / group) * HD;  // (keys, HD), stride kv_ld
    gemm(false, true, rows, keys, HD, scale, q_blk, q_ld, k_rng, kv_ld, T(0), prob, keys);
    for (int64_t r = 0; r < rows; ++r) {
      T* row = prob + r * keys;
      const int64_t c0 = lo[size_t(b * Tq + i0 + r)] - j0,
                    c1 = p.q_offset + i0 + r + 1 - j0;  // visible [c0, c1)
      if (p.softcap > 0) soft_cap_scores(row, c0, c1, p.softcap);
      alibi.add(row, b, h, j0, c0, c1);
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t c = c0; c < c1; ++c) m = std::max(m, row[c]);
      T sum = 0;
      for (int64_t c = c0; c < c1; ++c) sum += (row[c] = std::exp(row[c] - m));
      const T inv = T(1) / sum;
      std::fill(row, row + c0, T(0));
      for (int64_t c = c0; c < c1; ++c) row[c] *= inv;
      std::fill(row + c1, row + keys, T(0));
      lse[(b * H + h) * Tq + i0 + r] = m + std::log(sum);
    }
    gemm(false, false, rows, HD, keys, T(1), prob, keys, v_rng, kv_ld, T(0),
         out + ((b * Tq + i0) * H + h) * HD, q_ld);
  }
}

template <class T>
void backward_impl(const AttentionParams& p, Tensor dq_t, Tensor dk_t, Tensor dv_t, Tensor dout_t,
                   Tensor out_t, Tensor lse_t, Tensor q_t, Tensor k_t, Tensor v_t, Tensor q_segments,
                   Tensor k_segments) {
  const int64_t B = p.batch, Tq = p.q_len, S = p.kv_len, H = p.heads, KVH = p.kv_heads, HD = p.head_dim;
  const int64_t group = H / KVH;
  const int64_t q_ld = H * HD, kv_ld = KVH * HD;
  T* dq = dq_t.ptr<T>("attention dq");
  T* dk = dk_t.ptr<T>("attention dk");
  T* dv = dv_t.ptr<T>("attention dv");
  const T* dout = dout_t.ptr<T>("attention dout");
  const T* out = out_t.ptr<T>("attention out");
  const T* lse = lse_t.ptr<T>("attention lse");
  const T* q = q_t.ptr<T>("attention q");
  const T* k = k_t.ptr<T>("attention k");
  const T* v = v_t.ptr<T>("attention v");
  const std::vector<int64_t> lo = first_visible_keys(p, q_segments, k_segments);  // (B, Tq)
  const AlibiTable alibi(p, k_segments);
  const T scale = T(p.scale);

  const int64_t tasks = B * H;
  const int64_t max_keys = p.q_offset + Tq;
  const int threads = team_size(p, tasks);
  const size_t block_elems = size_t(kRowBlock * max_keys);
  std::vector<T> scratch(size_t(threads) * (2 * block_elems + size_t(kRowBlock)));  // per thread: P, dS, D
  // With GQA several tasks feed one kv head: each head sums into its own (max_keys, HD) slices of dk and dv.
  const bool shared_kv = group > 1;
  std::vector<T> head_dkv(shared_kv ? size_t(tasks) * 2 * size_t(max_keys * HD) : 0,
                          T(0));  // (B, H, 2, keys, HD)
  SingleThreadedBlas blas_guard;

#pragma omp parallel for schedule(dynamic) num_threads(threads) if (threads > 1)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task / H, h = task % H, kvh = h / group;
    T* mine = scratch.data() + size_t(omp_get_thread_num()) * (2 * block_elems + size_t(kRowBlock));
    T* prob = mine;                     // (rows, keys)
    T* dscore = mine + block_elems;     // (rows, keys)
    T* delta = mine + 2 * block_elems;  // (rows): rowsum(dout * out)
    T* dk_dst = shared_kv ? head_dkv.data() + size_t(task) * 2 * size_t(max_keys * HD)
                          : dk + (b * S * KVH + kvh) * HD;
    T* dv_dst = shared_kv ? dk_dst + max_keys * HD : dv + (b * S * KVH + kvh) * HD;
    const int64_t dst_ld = shared_kv ? HD : kv_ld;  // (keys, HD) rows of the destination

    for (int64_t i0 = 0; i0 < Tq; i0 += kRowBlock) {
      const int64_t i1 = std::min(Tq, i0 + kRowBlock), rows = i1 - i0;
      const int64_t j0 = lo[size_t(b * Tq + i0)], j1 = p.q_offset + i1, keys = j1 - j0;
      const int64_t q_at = ((b * Tq + i0) * H + h) * HD;  // (rows, HD) blocks of q, dq, out, dout
      const T* k_rng = k + ((b * S + j0) * KVH + kvh) * HD;
      const T* v_rng = v + ((b * S + j0) * KVH + kvh) * HD;
      gemm(false, true, rows, keys, HD, scale, q + q_at, q_ld, k_rng, kv_ld, T(0), prob, keys);
      gemm(false, true, rows, keys, HD, T(1), dout + q_at, q_ld, v_rng, kv_ld, T(0), dscore, keys);
      for (int64_t r = 0; r < rows; ++r) {
        const T* o = out + q_at + r * q_ld;
        const T* d_o = dout + q_at + r * q_ld;
        T dot = 0;
        for (int64_t d = 0; d < HD; ++d) dot += o[d] * d_o[d];
        delta[r] = dot;
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* prow = prob + r * keys;
        T* dsrow = dscore + r * keys;
        const int64_t c0 = lo[size_t(b * Tq + i0 + r)] - j0, c1 = p.q_offset + i0 + r + 1 - j0;
        const T row_lse = lse[(b * H + h) * Tq + i0 + r];
        std::fill(prow, prow + c0, T(0));
        std::fill(dsrow, dsrow + c0, T(0));
        if (p.softcap > 0) {
          // The cap bends the scaled score alone (ALiBi's bias is added after it, as in forward): the slope
          // is taken before the bias joins.
          soft_cap_scores(prow, c0, c1, p.softcap);
          for (int64_t c = c0; c < c1; ++c)
            dsrow[c] = (dsrow[c] - delta[r]) * soft_cap_slope(prow[c], p.softcap);
          alibi.add(prow, b, h, j0, c0, c1);
          for (int64_t c = c0; c < c1; ++c) {
            prow[c] = std::exp(prow[c] - row_lse);
            dsrow[c] = prow[c] * dsrow[c] * scale;
          }
        } else {
          alibi.add(prow, b, h, j0, c0, c1);
          for (int64_t c = c0; c < c1; ++c) {
            prow[c] = std::exp(prow[c] - row_lse);
            dsrow[c] = prow[c] * (dsrow[c] - delta[r]) * scale;
          }
        }
        std::fill(prow + c1, prow + keys, T(0));
        std::fill(dsrow + c1, dsrow + keys, T(0));
      }
      gemm(false, false, rows, HD, keys, T(1), dscore, keys, k_rng, kv_ld, T(0), dq + q_at, q_ld);
      gemm(true, false, keys, HD, rows, T(1), dscore, keys, q + q_at, q_ld, T(1), dk_dst + j0 * dst_ld,
           dst_ld);
      gemm(true, false, keys, HD, rows, T(1), prob, keys, dout + q_at, q_ld, T(1), dv_dst + j0 * dst_ld,
           dst_ld);
    }
  }

  if (shared_kv) {
    // dk[b, j, kvh] += sum over the group's heads in head order: the same sums whatever the threads did.
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t row = 0; row < B * max_keys; ++row) {
      const int64_t b = row / max_keys, j = row % max_keys;
      for (int64_t kvh = 0; kvh < KVH; ++kvh) {
        T* dk_row = dk + ((b * S + j) * KVH + kvh) * HD;
        T* dv_row = dv + ((b * S + j) * KVH + kvh) * HD;
        for (int64_t d = 0; d < HD; ++d) {
          T sk = 0, sv = 0;
          for (int64_t g = 0; g < group; ++g) {
            const T* src = head_dkv.data() + size_t((b * H + kvh * group + g) * 2 * max_keys * HD);
            sk += src[j * HD + d];
            sv += src[(max_keys + j) * HD + d];
          }
          dk_row[d] += sk;
          dv_row[d] += sv;
        }
      }
    }
  }
}

}  // namespace

void attention_forward(const AttentionParams& p, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                       Tensor q_segments, Tensor k_segments) {
  if (p.batch * p.q_len == 0) return;  // no query: nothing to write (its tensors may have no data)
  dispatch_float(q.dtype, "attention_forward",
                 [&]<class T>() { forward_impl<T>(p, out, lse, q, k, v, q_segments, k_segments); });
}

void attention_backward(const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor out,
                        Tensor lse, Tensor q, Tensor k, Tensor v, Tensor q_segments, Tensor k_segments) {
  if (p.batch * p.q_len == 0) return;  // no query: dq is empty and dk/dv receive nothing
  dispatch_float(q.dtype, "attention_backward", [&]<class T>() {
    backward_impl<T>(p, dq, dk, dv, dout, out, lse, q, k, v, q_segments, k_segments);
  });
}

}  // namespace lt::ops::cpu
