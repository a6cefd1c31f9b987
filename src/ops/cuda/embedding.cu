// Token embedding. Forward: one block per token copies its table row (a bad id writes zeros and records
// the error). Backward must be deterministic, so no atomics: thread (column d, vocab class g) owns the
// entries dtable[v, d] with v % G == g and walks ALL tokens in order, adding those whose id is in its
// class. Each entry thus sees its tokens in token order, as on the CPU, whatever the schedule. Ids are
// staged through shared memory in tiles (every thread of a block reads the same ids); G spreads the
// read-modify-writes over G x D threads so that D alone (a few thousand columns) is not the parallelism.
// dtable may be f32 under bf16 dout (mixed precision: the entries then add in f32, never rounded to bf16).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_common.cuh"
#include "ops/cuda/launch.h"

namespace lt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kIdTile = 1024;
constexpr int kClasses = 32;  // G

// Copies rows as 16-byte packs when D is a multiple of the pack and both pointers are aligned.
template <class T>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const T* table, int64_t dim,
                                         int64_t vocab, bool packed, int64_t* err) {
  constexpr int64_t P = 16 / sizeof(T);
  const int64_t n = blockIdx.x;
  const int32_t id = ids[n];
  T* dst = out + n * dim;  // (D) row of out (N, D)
  const bool bad = id < 0 || id >= vocab;
  if (bad && threadIdx.x == 0) report_error(err, kErrEmbeddingForwardId, n, id);
  const T* src = table + (bad ? 0 : int64_t(id)) * dim;
  if (packed) {
    Pack<T>* d = reinterpret_cast<Pack<T>*>(dst);
    const Pack<T>* sp = reinterpret_cast<const Pack<T>*>(src);
    for (int64_t k = threadIdx.x; k < dim / P; k += blockDim.x) d[k] = bad ? Pack<T>{} : sp[k];
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = bad ? T{} : src[i];
  }
}

// grid: (column blocks, G). dtable (V, D) +=, dout (N, D), ids (N). TG: T, or f32 (an f32 gradient).
template <class TG, class T>
__global__ void embedding_backward_kernel(TG* dtable, const T* dout, const int32_t* ids, int64_t tokens,
                                          int64_t dim, int64_t vocab, int64_t* err) {
  __shared__ int32_t tile[kIdTile];  // ids[n0, n0 + kIdTile)
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t cls = int32_t(blockIdx.y);
  for (int64_t n0 = 0; n0 < tokens; n0 += kIdTile) {
    const int64_t count = tokens - n0 < kIdTile ? tokens - n0 : kIdTile;
    __syncthreads();  // the previous tile is consumed
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) tile[i] = ids[n0 + i];
    __syncthreads();
    for (int64_t i = 0; i < count; ++i) {
      const int32_t id = tile[i];
      if (id < 0 || id >= vocab) {
        if (cls == 0 && blockIdx.x == 0 && threadIdx.x == 0)
          report_error(err, kErrEmbeddingBackwardId, n0 + i, id);
        continue;
      }
      if (id % kClasses != cls || d >= dim) continue;
      TG* e = dtable + int64_t(id) * dim + d;
      store_f(e, load_f(e) + load_f(dout + (n0 + i) * dim + d));
    }
  }
}

}  // namespace

void launch_embedding_forward(DType dt, void* out, const int32_t* ids, const void* table, int64_t tokens,
                              int64_t dim, int64_t vocab, int64_t* err, cudaStream_t s) {
  if (tokens == 0 || dim == 0) return;
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool packed = dim % int64_t(16 / sizeof(T)) == 0 && aligned16(out) && aligned16(table);
    embedding_forward_kernel<T><<<unsigned(tokens), kThreads, 0, s>>>(
        static_cast<T*>(out), ids, static_cast<const T*>(table), dim, vocab, packed, err);
  });
  LT_CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(DType dtable_dt, DType dt, void* dtable, const void* dout, const int32_t* ids,
                               int64_t tokens, int64_t dim, int64_t vocab, int64_t* err, cudaStream_t s) {
  if (tokens == 0 || dim == 0) return;
  const dim3 grid(grid_for(dim, kThreads), kClasses);
  dispatch_compute(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(dout);
    if (dtable_dt == DType::F32)
      embedding_backward_kernel<float, T>
          <<<grid, kThreads, 0, s>>>(static_cast<float*>(dtable), in, ids, tokens, dim, vocab, err);
    else
      embedding_backward_kernel<T, T>
          <<<grid, kThreads, 0, s>>>(static_cast<T*>(dtable), in, ids, tokens, dim, vocab, err);
  });
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda
