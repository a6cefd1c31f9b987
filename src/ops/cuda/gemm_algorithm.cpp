#include "ops/cuda/gemm_algorithm.h"

#include <unordered_map>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

namespace {

constexpr int kTunedCandidates = 8;
constexpr int kTimedRuns = 3;  // after one warm-up run

// Mean time of kTimedRuns runs of `algo` into the scratch D, or a negative value if it does not run.
float time_candidate(const GemmCall& c, const cublasLtMatmulAlgo_t& algo, void* scratch, cudaEvent_t start,
                     cudaEvent_t stop) {
  auto run = [&] {
    return cublasLtMatmul(c.handle, c.op, c.alpha, c.a, c.la, c.b, c.lb, c.beta, c.c == c.d ? scratch : c.c,
                          c.lc, scratch, c.lc, &algo, c.workspace, c.workspace_bytes, c.stream);
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  LT_CUDA_CHECK(cudaEventRecord(start, c.stream));
  for (int i = 0; i < kTimedRuns; ++i)
    if (run() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  LT_CUDA_CHECK(cudaEventRecord(stop, c.stream));
  LT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms / kTimedRuns;
}

// The fastest of `candidates` (the first on a tie or when none can be timed).
cublasLtMatmulAlgo_t fastest(const GemmCall& c,
                             const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) {
  void* scratch = nullptr;
  if (cudaMalloc(&scratch, c.d_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory for the scratch: the first choice, untimed
    return candidates[0].algo;
  }
  // With C = D the timing reads the scratch as C too: its contents only matter to the values, not the time.
  cudaEvent_t start, stop;
  LT_CUDA_CHECK(cudaEventCreate(&start));
  LT_CUDA_CHECK(cudaEventCreate(&stop));
  size_t best = 0;
  float best_ms = -1.0f;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const float ms = time_candidate(c, candidates[i].algo, scratch, start, stop);
    if (ms >= 0 && (best_ms < 0 || ms < best_ms)) {
      best_ms = ms;
      best = i;
    }
  }
  LT_CUDA_CHECK(cudaEventDestroy(start));
  LT_CUDA_CHECK(cudaEventDestroy(stop));
  LT_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  LT_CUDA_CHECK(cudaFree(scratch));
  return candidates[best].algo;
}

}  // namespace

bool gemm_tuning(const KernelOptions& options) {
  return options.gemm_tune && !options.deterministic;
}

bool gemm_algorithm(GpuHandles& handles, const KernelOptions& options, const std::string& problem,
                    const GemmCall& call, cublasLtMatmulAlgo_t* algo, cublasStatus_t* status) {
  const bool tune = gemm_tuning(options);
  const std::string key = problem + (tune ? " tuned" : "");
  std::unordered_map<std::string, cublasLtMatmulAlgo_t>& chosen = handles.gemm_algorithms();
  const auto found = chosen.find(key);
  if (found != chosen.end()) {
    *algo = found->second;
    return true;
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(tune ? kTunedCandidates : 1);
  int count = 0;
  *status = cublasLtMatmulAlgoGetHeuristic(call.handle, call.op, call.la, call.lb, call.lc, call.lc,
                                           call.pref, int(results.size()), results.data(), &count);
  if (*status != CUBLAS_STATUS_SUCCESS || count == 0) return false;
  results.resize(size_t(count));
  *algo = count > 1 ? fastest(call, results) : results[0].algo;
  chosen.emplace(key, *algo);
  return true;
}

}  // namespace lt::ops::cuda
