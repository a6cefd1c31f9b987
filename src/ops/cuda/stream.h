// The stream every CUDA launcher of this thread uses. ops.h's signatures carry no stream (they are shared
// with the CPU backend), so the caller sets a thread-local "current stream" once (StreamScope) and every
// launcher reads it. The default is the legacy default stream (nullptr).
#pragma once

#include <cuda_runtime.h>

namespace lt::ops::cuda {

cudaStream_t current_stream();
void set_current_stream(cudaStream_t stream);

// Sets the current stream for a scope and restores the previous one at its end.
class StreamScope {
 public:
  explicit StreamScope(cudaStream_t stream) : previous_(current_stream()) { set_current_stream(stream); }
  ~StreamScope() { set_current_stream(previous_); }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace lt::ops::cuda
