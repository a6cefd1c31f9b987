// Wall-clock timing on the host (CUDA event timing lives in ops/cuda).
#pragma once

#include <chrono>

namespace lt {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lt
