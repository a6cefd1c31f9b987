// Token embedding, the reference. Forward copies rows; backward ACCUMULATES dout's rows into dtable
// (a parameter gradient), adding in the table's dtype as a gradient buffer of that dtype would. Ids repeat
// within a batch, so backward is parallel over blocks of columns and every thread walks the tokens in
// order: the sums are the same bits whatever the thread count.
#include <algorithm>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/parallel.h"

namespace lt::ops::cpu {

namespace {

const int32_t* checked_ids(const EmbeddingParams& p, const Tensor& ids, const char* op) {
  const int32_t* id = ids.ptr<int32_t>("embedding ids");
  for (int64_t n = 0; n < p.tokens; ++n)
    LT_CHECK(id[n] >= 0 && id[n] < p.vocab, "{}: token id {} at row {} is outside the vocabulary [0, {})", op,
             id[n], n, p.vocab);
  return id;
}

template <class T>
void forward(const EmbeddingParams& p, Tensor out_t, Tensor ids_t, Tensor table_t) {
  const int32_t* ids = checked_ids(p, ids_t, "embedding_forward");
  const T* table = table_t.ptr<T>("embedding_forward table");  // (V, D)
  T* out = out_t.ptr<T>("embedding_forward out");              // (N, D)
  const int64_t D = p.dim;
#pragma omp parallel for schedule(static) if (p.tokens * D >= kMinParallelWork)
  for (int64_t n = 0; n < p.tokens; ++n) std::copy_n(table + ids[n] * D, D, out + n * D);
}

template <class T>
void backward(const EmbeddingParams& p, Tensor dtable_t, Tensor dout_t, Tensor ids_t) {
  const int32_t* ids = checked_ids(p, ids_t, "embedding_backward");
  T* dtable = dtable_t.ptr<T>("embedding_backward dtable");  // (V, D) +=
  const T* dout = dout_t.ptr<T>("embedding_backward dout");  // (N, D)
  const int64_t D = p.dim;
  for_column_blocks(D, p.tokens * D, [&](int64_t d0, int64_t d1) {
    for (int64_t n = 0; n < p.tokens; ++n) {
      T* row = dtable + ids[n] * D;
      const T* g = dout + n * D;
      for (int64_t d = d0; d < d1; ++d) row[d] += g[d];
    }
  });
}

}  // namespace

void embedding_forward(const EmbeddingParams& p, Tensor out, Tensor ids, Tensor table) {
  dispatch_float(table.dtype, "embedding_forward", [&]<class T>() { forward<T>(p, out, ids, table); });
}

void embedding_backward(const EmbeddingParams& p, Tensor dtable, Tensor dout, Tensor ids) {
  dispatch_float(dtable.dtype, "embedding_backward", [&]<class T>() { backward<T>(p, dtable, dout, ids); });
}

}  // namespace lt::ops::cpu
