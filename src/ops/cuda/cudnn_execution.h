// Running a cuDNN plan: a call's stream-ordered scratch (cuDNN's workspace and our buffers in one
// cudaMallocAsync on the call's stream, given back when the call returns, like the other ops' scratch), one
// execution of a plan with its variant pack, and the autotune that times a shape's candidate plans once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cudnn_plan_cache.h"

namespace lt::ops::cuda::cudnn {

inline size_t round256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Stream-ordered scratch of one call: cuDNN's workspace and our buffers in one allocation.
class Scratch {
 public:
  Scratch(std::initializer_list<size_t> sizes, cudaStream_t s) : stream_(s) {
    size_t total = 0;
    for (size_t b : sizes) {
      offsets_.push_back(total);
      total += round256(b);
    }
    if (total > 0) LT_CUDA_CHECK(cudaMallocAsync(&base_, total, s));
  }
  ~Scratch() {
    if (base_) cudaFreeAsync(base_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* at(size_t i) const { return base_ ? static_cast<char*>(base_) + offsets_[i] : nullptr; }

 private:
  cudaStream_t stream_;
  void* base_ = nullptr;
  std::vector<size_t> offsets_;
};

void execute(cudnnHandle_t handle, const Candidate& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, cudaStream_t stream);

// On a shape's first call with several candidate plans: runs each (`run(candidate)` enqueues one execution
// with everything it needs reset) once to warm up and twice timed, and keeps the fastest. The outputs of
// the last timed run are overwritten by the caller's own execution afterwards.
// log: the kernel option cudnn_autotune_log (each choice printed to stderr).
template <class Run>
void autotune(Plan& plan, cudaStream_t stream, bool log_choice, Run&& run) {
  if (plan.tuned) return;
  plan.tuned = true;
  if (plan.candidates.size() < 2) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  LT_CUDA_CHECK(cudaEventCreate(&start));
  LT_CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = 0;
  std::string log;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    run(plan.candidates[i]);
    LT_CUDA_CHECK(cudaEventRecord(start, stream));
    run(plan.candidates[i]);
    run(plan.candidates[i]);
    LT_CUDA_CHECK(cudaEventRecord(stop, stream));
    LT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    log += fmt::format(" engine {} {:.3f} ms;", plan.candidates[i].engine, ms / 2);
    if (i == 0 || ms < best_ms) best_ms = ms, plan.best = i;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  trace(fmt::format("autotune:{} chose engine {}", log, plan.chosen().engine));
  if (log_choice)
    std::fprintf(stderr, "leantune: cuDNN attention autotune:%s chose engine %lld\n", log.c_str(),
                 (long long)plan.chosen().engine);
}

}  // namespace lt::ops::cuda::cudnn
