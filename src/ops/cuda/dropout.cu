// Dropout with Philox masks: one thread per element (grid-stride), each drawing its own 32 bits from
// core/philox.h, the same function the CPU calls, so the masks agree bit for bit. The per-row streams are a
// kernel parameter (up to kDropoutStreamsPerLaunch rows of the batch per launch), so there is no upload and
// no synchronization; a larger batch takes several launches.
#include "core/philox.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;

struct Streams {
  uint64_t s[kDropoutStreamsPerLaunch];
};

// x: the rows of `batch` sequences (batch * tokens, dim), sequence b drawing from streams.s[b].
template <class T>
__global__ void dropout_kernel(T* x, Streams streams, int64_t batch, int64_t tokens, int64_t dim,
                               int64_t q_offset, double p, float keep_scale, uint64_t seed) {
  const int64_t count = batch * tokens * dim;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = e / dim, j = e - row * dim;
    const int64_t b = row / tokens, i = row - b * tokens;
    const uint64_t index = uint64_t(q_offset + i) * uint64_t(dim) + uint64_t(j);
    // The comparison in double, as on the CPU (the uniform has 24 bits: exact in either type).
    const bool keep = double(philox_uniform(seed, streams.s[b], index)) >= p;
    store_f(x + e, keep ? load_f(x + e) * keep_scale : 0.0f);
  }
}

}  // namespace

void launch_dropout(DType dt, void* x, const uint64_t* streams, int64_t batch, int64_t tokens, int64_t dim,
                    int64_t q_offset, double p, uint64_t seed, bool scale_kept, cudaStream_t s) {
  if (batch * tokens * dim == 0) return;
  // (float)(1 / (1 - p)): the CPU's f32 keep_scale, and the factor bf16 values are multiplied by in f32.
  const float keep_scale = scale_kept ? float(1.0 / (1.0 - p)) : 1.0f;
  const size_t elem = dtype_size(dt);
  for (int64_t b0 = 0; b0 < batch; b0 += kDropoutStreamsPerLaunch) {
    const int64_t nb = batch - b0 < kDropoutStreamsPerLaunch ? batch - b0 : kDropoutStreamsPerLaunch;
    Streams group{};
    for (int64_t b = 0; b < nb; ++b) group.s[b] = streams[b0 + b];
    void* rows = static_cast<char*>(x) + size_t(b0 * tokens * dim) * elem;  // (nb * tokens, dim)
    dispatch_compute(dt, [&](auto tag) {
      using T = decltype(tag);
      dropout_kernel<T><<<grid_for(nb * tokens * dim, kThreads), kThreads, 0, s>>>(
          static_cast<T*>(rows), group, nb, tokens, dim, q_offset, p, keep_scale, seed);
    });
    LT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace lt::ops::cuda
