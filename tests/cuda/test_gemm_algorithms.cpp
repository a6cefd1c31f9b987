// How much cuBLASLt's first heuristic choice leaves on the table for the projections' GEMMs of issue 7's
// workloads: every algorithm the heuristic offers (up to 32) is timed and the first is compared with the
// fastest. A measurement, not a test: it asserts nothing about time (run with
// --gtest_also_run_disabled_tests --gtest_filter='*GemmAlgorithms*'); it prints one GEMMALGO line per
// (shape, pass) and a per-model total weighted by how often a training step calls each GEMM.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "parity_support.h"

namespace lt {
namespace {

#define GEMM_CHECK(x) ASSERT_EQ((x), CUBLAS_STATUS_SUCCESS) << #x

// Column-major D (m, n) = op(A) (m, k) op(B) (k, n) [+ C], bf16 inputs, c_f32: C/D f32 with beta = 1 (a
// parameter gradient accumulated), else bf16 with beta = 0 (linear_cublaslt.cpp's transposed problems).
struct Problem {
  const char* model;
  const char* name;
  bool trans_a, trans_b;
  int64_t m, n, k;
  bool c_f32;
  int calls;  // per training step (layers x projections)
};

struct Timed {
  float first_ms = 0, best_ms = 0;
  int best = -1, offered = 0;
};

void time_problem(cublasLtHandle_t handle, void* workspace, size_t ws, const Problem& p, Timed& out) {
  const int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t c_size = p.c_f32 ? 4 : 2;
  ASSERT_EQ(cudaMalloc(&a, size_t(a_rows * a_cols) * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, size_t(b_rows * b_cols) * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, size_t(p.m * p.n) * c_size), cudaSuccess);
  cudaMemset(a, 0x3c, size_t(a_rows * a_cols) * 2);  // small finite bf16 values
  cudaMemset(b, 0x3c, size_t(b_rows * b_cols) * 2);
  cudaMemset(c, 0, size_t(p.m * p.n) * c_size);
  cublasLtMatmulDesc_t op;
  GEMM_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  GEMM_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  GEMM_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t la, lb, lc;
  const cudaDataType_t c_type = p.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  GEMM_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, uint64_t(a_rows), uint64_t(a_cols), a_rows));
  GEMM_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, uint64_t(b_rows), uint64_t(b_cols), b_rows));
  GEMM_CHECK(cublasLtMatrixLayoutCreate(&lc, c_type, uint64_t(p.m), uint64_t(p.n), p.m));
  cublasLtMatmulPreference_t pref;
  GEMM_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  GEMM_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(32);
  int found = 0;
  GEMM_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, op, la, lb, lc, lc, pref, int(results.size()),
                                            results.data(), &found));
  out.offered = found;
  const float alpha = 1.0f, beta = p.c_f32 ? 1.0f : 0.0f;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kWarm = 3, kReps = 10;
  for (int i = 0; i < found; ++i) {
    auto run = [&] {
      return cublasLtMatmul(handle, op, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &results[size_t(i)].algo,
                            workspace, ws, nullptr);
    };
    bool ok = true;
    for (int r = 0; r < kWarm && ok; ++r) ok = run() == CUBLAS_STATUS_SUCCESS;
    if (!ok) continue;
    cudaEventRecord(start);
    for (int r = 0; r < kReps; ++r) run();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    ms /= kReps;
    if (i == 0) out.first_ms = ms;
    if (out.best < 0 || ms < out.best_ms) {
      out.best_ms = ms;
      out.best = i;
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

// The projections of one layer at M = 8192 tokens (1024 x 8), in linear_cublaslt.cpp's transposed form:
// forward y^T (N, M) = W (op T) x^T; dx^T (K, M) = W^T dy^T; dw^T (K, N) += x^T dy (op T), f32.
std::vector<Problem> problems() {
  const int64_t M = 8192;
  std::vector<Problem> out;
  struct Proj {
    const char* model;
    const char* name;
    int64_t out, in;
    int per_layer;
    bool dw;
    int layers;
  };
  const Proj projs[] = {
      {"llama8b", "q/o", 4096, 4096, 2, false, 32},      {"llama8b", "k/v", 1024, 4096, 2, false, 32},
      {"llama8b", "gate/up", 14336, 4096, 2, false, 32}, {"llama8b", "down", 4096, 14336, 1, false, 32},
      {"qwen1.5b", "q/o", 1536, 1536, 2, true, 28},      {"qwen1.5b", "k/v", 256, 1536, 2, true, 28},
      {"qwen1.5b", "gate/up", 8960, 1536, 2, true, 28},  {"qwen1.5b", "down", 1536, 8960, 1, true, 28}};
  for (const Proj& p : projs) {
    const int calls = p.per_layer * p.layers;
    out.push_back({p.model, p.name, true, false, p.out, M, p.in, false, calls});           // forward
    out.push_back({p.model, p.name, false, false, p.in, M, p.out, false, calls});          // dx
    if (p.dw) out.push_back({p.model, p.name, false, true, p.in, p.out, M, true, calls});  // dw f32
  }
  return out;
}

TEST(CudaBench, DISABLED_GemmAlgorithms) {
  LT_REQUIRE_GPU();
  cublasLtHandle_t handle;
  GEMM_CHECK(cublasLtCreate(&handle));
  const size_t ws = size_t(32) << 20;  // linear_cublaslt.cpp's workspace
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, ws), cudaSuccess);
  struct Total {
    double first = 0, best = 0;
  };
  std::vector<std::pair<std::string, Total>> totals;
  for (const Problem& p : problems()) {
    Timed t;
    time_problem(handle, workspace, ws, p, t);
    const double flop = 2.0 * double(p.m) * double(p.n) * double(p.k);
    const char* pass = p.c_f32 ? "dw" : p.trans_a ? "fwd" : "dx";
    std::printf(
        "GEMMALGO %-8s %-7s %-3s m %6ld n %6ld k %6ld: first %.3f ms %.0f TFLOP/s, best #%d of %d %.3f ms "
        "%.0f TFLOP/s\n",
        p.model, p.name, pass, long(p.m), long(p.n), long(p.k), t.first_ms, flop / t.first_ms / 1e9, t.best,
        t.offered, t.best_ms, flop / t.best_ms / 1e9);
    if (totals.empty() || totals.back().first != p.model) totals.push_back({p.model, {}});
    totals.back().second.first += t.first_ms * p.calls;
    totals.back().second.best += t.best_ms * p.calls;
  }
  for (const auto& [model, t] : totals)
    std::printf("GEMMALGO %s per step (every projection GEMM): first choices %.1f ms, fastest %.1f ms\n",
                model.c_str(), t.first, t.best);
  cudaFree(workspace);
  cublasLtDestroy(handle);
}

}  // namespace
}  // namespace lt
