#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {
thread_local cudaStream_t g_current_stream = nullptr;
}

cudaStream_t current_stream() {
  return g_current_stream;
}
void set_current_stream(cudaStream_t stream) {
  g_current_stream = stream;
}

}  // namespace lt::ops::cuda
