// Token embedding: out[n] = table[ids[n]]; backward adds dout's rows into dtable (a parameter gradient).
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

namespace {
void check_params(const EmbeddingParams& p, const char* op) {
  check_size(p.tokens, 0, op, "tokens");
  check_size(p.dim, 0, op, "dim");
  check_size(p.vocab, 1, op, "vocab");
}
}  // namespace

void embedding_forward(const Context& ctx, const EmbeddingParams& p, Tensor out, Tensor ids, Tensor table) {
  const char* op = "embedding_forward";
  check_params(p, op);
  check_device(table.device, {&out, &ids, &table}, op);
  check_tensor(out, {p.tokens, p.dim}, "embedding_forward out");
  check_tensor(ids, {p.tokens}, "embedding_forward ids");
  check_dtype(ids, DType::I32, "embedding_forward ids");
  check_tensor(table, {p.vocab, p.dim}, "embedding_forward table");
  LT_OP_DISPATCH(ctx, table.device, embedding_forward, p, out, ids, table);
}

void embedding_backward(const Context& ctx, const EmbeddingParams& p, Tensor dtable, Tensor dout,
                        Tensor ids) {
  const char* op = "embedding_backward";
  check_params(p, op);
  check_device(dtable.device, {&dtable, &dout, &ids}, op);
  check_tensor(dtable, {p.vocab, p.dim}, "embedding_backward dtable");
  check_tensor(dout, {p.tokens, p.dim}, "embedding_backward dout");
  check_tensor(ids, {p.tokens}, "embedding_backward ids");
  check_dtype(ids, DType::I32, "embedding_backward ids");
  LT_OP_DISPATCH(ctx, dtable.device, embedding_backward, p, dtable, dout, ids);
}

}  // namespace lt::ops
