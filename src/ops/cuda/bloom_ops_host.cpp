// The CUDA twins of BLOOM's ops (ops.h: layernorm, bloom_gelu): the public dispatchers have checked shapes
// and devices; these check the dtypes the GPU kernels take and call the launchers (bloom_launch.h) on the
// current stream.
#include <climits>

#include "ops/cuda/bloom_launch.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {
// One block per row: the grid's x dimension.
void check_rows(int64_t rows, const char* op) {
  LT_CHECK(rows <= int64_t(INT32_MAX), "{} on CUDA: {} rows exceed the launch grid", op, rows);
}
void check_rstd(const Tensor& t, const char* what) {
  LT_CHECK(t.dtype == DType::F32, "{} on CUDA: dtype {}; the GPU keeps it in f32", what, dtype_name(t.dtype));
}
}  // namespace

void layernorm_forward(const Context& ctx, const LayerNormParams& p, Tensor y, Tensor rstd, Tensor x,
                       Tensor w, Tensor b) {
  const DType dt = compute_dtype(x, {&y, &w, &b}, "layernorm_forward");
  check_rstd(rstd, "layernorm_forward rstd");
  check_rows(p.rows, "layernorm_forward");
  launch_layernorm_forward(dt, y.data, static_cast<float*>(rstd.data), x.data, w.data, b.data, p.rows, p.dim,
                           p.eps, stream_of(ctx));
}

void layernorm_backward(const Context& ctx, const LayerNormParams& p, Tensor dx, Tensor dw, Tensor db,
                        Tensor dy, Tensor x, Tensor w, Tensor rstd) {
  const DType dt = compute_dtype(x, {&dx, &dy, &w}, "layernorm_backward");
  const DType dw_dt = gradient_dtype(dw, dt, "layernorm_backward dw");
  const DType db_dt = gradient_dtype(db, dt, "layernorm_backward db");
  LT_CHECK(dw.empty() || db.empty() || dw_dt == db_dt,
           "layernorm_backward on CUDA: dw is {} and db is {}; expected one dtype", dtype_name(dw_dt),
           dtype_name(db_dt));
  check_rstd(rstd, "layernorm_backward rstd");
  check_rows(p.rows, "layernorm_backward");
  launch_layernorm_backward(dt, dx.data, dw.empty() ? db_dt : dw_dt, dw.data, db.data, dy.data, x.data,
                            w.data, static_cast<const float*>(rstd.data), p.rows, p.dim, p.accumulate_dx,
                            stream_of(ctx));
}

void bloom_gelu_forward(const Context& ctx, const BloomGeluParams& p, Tensor h, Tensor x) {
  const DType dt = compute_dtype(x, {&h}, "bloom_gelu_forward");
  launch_bloom_gelu_forward(dt, h.data, x.data, p.rows * p.dim, stream_of(ctx));
}

void bloom_gelu_backward(const Context& ctx, const BloomGeluParams& p, Tensor dx, Tensor dh, Tensor x) {
  const DType dt = compute_dtype(x, {&dx, &dh}, "bloom_gelu_backward");
  launch_bloom_gelu_backward(dt, dx.data, dh.data, x.data, p.rows * p.dim, stream_of(ctx));
}

}  // namespace lt::ops::cuda
