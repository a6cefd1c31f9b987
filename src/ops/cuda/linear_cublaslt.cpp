// linear through cuBLASLt. Row-major buffers are read as column-major transposes, so every GEMM is
// written on the transposed problem (a row-major (r, c) buffer is a column-major (c, r) one):
//   y  (M, N)  -> y^T  (N, M) = W (N, K: buffer (K, N) col-major, op T) * x^T (K, M)
//   dx (M, K)  -> dx^T (K, M) = W^T (K, N: buffer, op N)             * dy^T (N, M)
//   dw (N, K)  -> dw^T (K, N) = x^T (K, M: buffer, op N)             * dy (M, N: buffer (N, M), op T)
// Inputs bf16 or f32, accumulation and alpha/beta in f32 (f32 inputs in full f32 unless TF32 is allowed).
// Mixed precision: with bf16 dy/x/w, dw and dbias may be f32 (parameter gradients kept in f32); the dw GEMM
// then reads bf16 A/B and accumulates into an f32 C/D. dx always has the compute dtype.
// out_scale is alpha; accumulate_y / accumulate_dx / dw's += are beta = 1 with C = D. linear_forward's
// residual is C (beta = 1) with D = y. cuBLASLt does not read C when beta = 0, so written outputs need no
// clearing. The bias epilogue adds b outside alpha, so it serves out_scale == 1 only; otherwise (or when no
// algorithm takes the epilogue) a small kernel writes (y or 0) + out_scale * b first and the GEMM adds with
// beta = 1. dbias is a deterministic column-sum kernel. The handle and its workspace belong to the run's
// context (its GPU handles, gpu_handles.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/context.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/gemm_algorithm.h"
#include "ops/cuda/gpu_handles.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/op_profile.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

// RAII owners of the cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  ~Layout() {
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  ~Preference() {
    if (d) cublasLtMatmulPreferenceDestroy(d);
  }
};

// The largest power of two (<= 256) dividing the address: what the algorithm may assume.
uint32_t alignment(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

// Column-major C (m, n) = alpha * op(A) (m, k) op(B) (k, n) + beta * C [+ bias (m) via the epilogue].
struct Gemm {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  float alpha, beta;
  const void* bias = nullptr;
  const void* c_in = nullptr;  // C when it is not D (same layout); nullptr: C = D
};

cudaDataType_t cuda_type(DType dt) {
  return dt == DType::BF16 ? CUDA_R_16BF : dt == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

// Returns false (and runs nothing) when cuBLASLt offers no algorithm; with no bias that is an error. A and B
// (and the bias) are of `dt`; C = D of `c_dt` (dt, or f32 under bf16 inputs).
bool run_gemm(const Context& ctx, DType dt, const Gemm& g, DType c_dt) {
  GpuHandles& handles = gpu_handles(ctx);
  const cudaStream_t stream = stream_of(ctx);
  const cudaDataType_t type = cuda_type(dt), c_type = cuda_type(c_dt);
  const cublasComputeType_t compute =
      dt == DType::F32 && ctx.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MatmulDesc op;
  LT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.d, compute, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    LT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    LT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
    LT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  // Stored shapes: op(A) is (m, k), so A is stored (m, k) or, transposed, (k, m).
  Layout la, lb, lc;
  LT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la.d, type, uint64_t(g.trans_a ? g.k : g.m),
                                             uint64_t(g.trans_a ? g.m : g.k), g.lda));
  LT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb.d, type, uint64_t(g.trans_b ? g.n : g.k),
                                             uint64_t(g.trans_b ? g.k : g.n), g.ldb));
  LT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc.d, c_type, uint64_t(g.m), uint64_t(g.n), g.ldc));

  Preference pref;
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
  const size_t ws = GpuHandles::kBlasLtWorkspaceBytes;
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                       sizeof(ws)));
  const uint32_t align_a = alignment(g.a), align_b = alignment(g.b),
                 align_c = std::min(alignment(g.c), alignment(g.c_in ? g.c_in : g.c));
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &align_a, sizeof(align_a)));
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                       &align_b, sizeof(align_b)));
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                       &align_c, sizeof(align_c)));
  LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                       &align_c, sizeof(align_c)));

  const void* c_in = g.c_in ? g.c_in : g.c;
  const std::string problem =
      fmt::format("{} {} {} {}{} {} {} {} {} {} {} {}/{}/{} bias {} beta {} c {}", int(dt), int(c_dt),
                  int(compute), g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.m, g.n, g.k, g.lda, g.ldb,
                  g.ldc, align_a, align_b, align_c, g.bias != nullptr, g.beta != 0.0f, c_in != g.c);
  const GemmCall call{handles.blaslt(),
                      op.d,
                      la.d,
                      lb.d,
                      lc.d,
                      pref.d,
                      g.a,
                      g.b,
                      c_in,
                      g.c,
                      &g.alpha,
                      &g.beta,
                      handles.blaslt_workspace(),
                      ws,
                      size_t(g.m) * size_t(g.n) * dtype_size(c_dt),
                      stream};
  cublasLtMatmulAlgo_t algo{};
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (!gemm_algorithm(handles, ctx.kernels, problem, call, &algo, &st)) {
    if (g.bias) return false;
    LT_CHECK(false,
             "linear on CUDA: cuBLASLt has no algorithm for a {} GEMM into {} of m = {}, n = {}, k = {} "
             "(transposes {}{}, alignments {}/{}/{} bytes; status {})",
             dtype_name(dt), dtype_name(c_dt), g.m, g.n, g.k, g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N',
             align_a, align_b, align_c, int(st));
  }
  LT_CUBLAS_CHECK(cublasLtMatmul(handles.blaslt(), op.d, &g.alpha, g.a, la.d, g.b, lb.d, &g.beta, c_in, lc.d,
                                 g.c, lc.d, &algo, handles.blaslt_workspace(), ws, stream));
  return true;
}

}  // namespace

void linear_forward(const Context& ctx, const LinearParams& p, Tensor y, Tensor x, Tensor w, Tensor bias,
                    Tensor residual) {
  const DType dt = compute_dtype(x, {&y, &w, &bias, &residual}, "linear_forward");
  const int64_t M = p.rows, K = p.in, N = p.out;
  if (M == 0 || N == 0) return;
  cudaStream_t s = stream_of(ctx);
  const float alpha = float(p.out_scale);
  // With a residual: y = residual + ..., i.e. beta = 1 reading C = residual.
  const bool add = p.accumulate_y || !residual.empty();
  if (op_profile_shapes(ctx))
    op_profile_detail(fmt::format("{}x{}->{}{}{}", M, K, N, add ? " +=" : "", bias.empty() ? "" : " bias"));
  Gemm g{true, false, N, M, K, w.data, K, x.data, K, y.data, N, alpha, add ? 1.0f : 0.0f};
  if (!residual.empty() && residual.data != y.data) g.c_in = residual.data;
  // The paths that write y before the GEMM start from the residual copied into y.
  auto residual_into_y = [&] {
    if (!g.c_in) return;
    LT_CUDA_CHECK(cudaMemcpyAsync(y.data, residual.data, y.bytes(), cudaMemcpyDeviceToDevice, s));
    g.c_in = nullptr;
  };
  if (K == 0) {  // no product: y = (y, residual or 0) + out_scale * b
    residual_into_y();
    launch_bias_fill(dt, y.data, bias.data, M, N, p.out_scale, add, s);
    return;
  }
  if (!bias.empty()) {
    // The epilogue reads the bias with vector loads: offer it only a 16-byte aligned one.
    if (p.out_scale == 1.0 && alignment(bias.data) >= 16) {
      g.bias = bias.data;
      if (run_gemm(ctx, dt, g, dt)) return;
      g.bias = nullptr;
    }
    residual_into_y();
    launch_bias_fill(dt, y.data, bias.data, M, N, p.out_scale, add, s);
    g.beta = 1.0f;
  }
  run_gemm(ctx, dt, g, dt);
}

void linear_backward(const Context& ctx, const LinearParams& p, Tensor dx, Tensor dw, Tensor dbias, Tensor dy,
                     Tensor x, Tensor w) {
  const DType dt =
      compute_dtype(dy, {&dx, dw.empty() ? nullptr : &x, dx.empty() ? nullptr : &w}, "linear_backward");
  const DType dw_dt = gradient_dtype(dw, dt, "linear_backward dw"),
              dbias_dt = gradient_dtype(dbias, dt, "linear_backward dbias");
  const int64_t M = p.rows, K = p.in, N = p.out;
  cudaStream_t s = stream_of(ctx);
  const float alpha = float(p.out_scale);
  if (op_profile_shapes(ctx))
    op_profile_detail(fmt::format("{}x{}->{}{}{}{}", M, K, N,
                                  dx.empty()        ? ""
                                  : p.accumulate_dx ? " dx+="
                                                    : " dx",
                                  dw.empty() ? "" : " dw", dbias.empty() ? "" : " db"));
  if (!dx.empty() && M > 0 && K > 0) {
    if (N == 0) {
      if (!p.accumulate_dx) LT_CUDA_CHECK(cudaMemsetAsync(dx.data, 0, dx.bytes(), s));
    } else {
      run_gemm(ctx, dt,
               Gemm{false, false, K, M, N, w.data, K, dy.data, N, dx.data, K, alpha,
                    p.accumulate_dx ? 1.0f : 0.0f},
               dt);
    }
  }
  if (!dw.empty() && M > 0 && N > 0 && K > 0)
    run_gemm(ctx, dt, Gemm{false, true, K, N, M, x.data, K, dy.data, N, dw.data, K, alpha, 1.0f}, dw_dt);
  if (!dbias.empty() && M > 0)
    launch_column_sums_add_to(dbias_dt, dbias.data, dt, dy.data, M, N, p.out_scale, s);
}

}  // namespace lt::ops::cuda
