// Fused LM head + cross-entropy on the GPU, the host side (checks, tiling, GEMMs; the op's own kernel is in
// fused_linear_cross_entropy.cu). The (N, V) logits of a long sequence times a 128k vocabulary are the
// largest buffer of a step, so they never exist in full; but the GPU is fast only on big GEMMs, so unlike
// the CPU reference the vocabulary is NOT split (params.vocab_block is a CPU tiling knob and is ignored
// here): rows are taken `rows` at a time with the whole vocabulary, where
//   rows = min(N, max(params.token_block, the rows whose (rows, V) tile fits the tile budget)),
// the budget being 256 MiB unless set_fused_linear_cross_entropy_tile_bytes says otherwise (a multiple of
// 128 rows when the budget allows that many, which suits the GEMM tiles). Per block of rows:
//   forward:  tile = x_blk W^T (cuBLASLt, compute dtype), then the cross-entropy kernels write the block's
//             losses and lse (f32) and the block's loss sum (double); the host adds the block sums in order,
//             so the total is deterministic.
//   forward_backward (training): the forward's tile is turned into dlogits at once (3 GEMMs in all), the
//             losses, lse and dlogits by one kernel (launch_cross_entropy_forward_backward: one launch
//             instead of two, each row re-read right after its first pass, from L2 as far as L2 holds it);
//   backward: the tile is recomputed, turned into dlogits in place from the saved lse, then
//             dx_blk = (or +=) dlogits W and dW += dlogits^T x_blk through cuda::linear_backward (which
//             takes an f32 dW with bf16 inputs: the mixed-precision policy keeps parameter gradients f32).
// The tile (and the forward's block sums) live in one buffer from the stream-ordered pool, taken and
// given back on the current stream: fused_linear_cross_entropy_workspace_bytes is its exact size.
// dx is written (=) unless accumulate_dx; dW accumulates (+=), as parameter gradients do.
#include <algorithm>
#include <atomic>
#include <vector>

#include "core/error.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/dtype_checks.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

constexpr size_t kDefaultTileBytes = size_t(256) << 20;
constexpr int64_t kRowMultiple = 128;
constexpr size_t kSumsAlign = 256;  // the tile starts 256-byte aligned after the block sums

std::atomic<size_t> g_tile_bytes{kDefaultTileBytes};

struct Blocking {
  int64_t rows;    // rows of a full block
  int64_t blocks;  // ceil(N / rows)
  size_t sums_bytes;
  size_t tile_bytes;
};

Blocking blocking(const FusedLinearCrossEntropyParams& p, DType dt) {
  const int64_t row_bytes = p.vocab * int64_t(dtype_size(dt));
  int64_t budget_rows = int64_t(g_tile_bytes.load() / size_t(row_bytes));
  if (budget_rows >= kRowMultiple) budget_rows -= budget_rows % kRowMultiple;
  const int64_t rows = std::min(std::max(p.token_block, budget_rows), std::max<int64_t>(p.rows, 1));
  const int64_t blocks = (p.rows + rows - 1) / rows;
  const size_t sums = (size_t(blocks) * sizeof(double) + kSumsAlign - 1) / kSumsAlign * kSumsAlign;
  return Blocking{rows, blocks, sums, size_t(rows * row_bytes)};
}

// One allocation from the current device's stream-ordered pool, given back on the same stream (also when
// an error unwinds the op).
class PoolBuffer {
 public:
  PoolBuffer(size_t bytes, cudaStream_t s) : stream_(s) { LT_CUDA_CHECK(cudaMallocAsync(&data_, bytes, s)); }
  ~PoolBuffer() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  char* data() const { return static_cast<char*>(data_); }
  void release() {
    void* data = data_;
    data_ = nullptr;
    LT_CUDA_CHECK(cudaFreeAsync(data, stream_));
  }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

DType check_dtypes(const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& dw, const char* op) {
  LT_CHECK(is_gpu_compute_dtype(x.dtype), "{} on CUDA: x has dtype {}; the GPU takes f32, bf16 or f16", op,
           dtype_name(x.dtype));
  LT_CHECK(w.dtype == x.dtype, "{} on CUDA: w has dtype {} while x is {}; expected the same", op,
           dtype_name(w.dtype), dtype_name(x.dtype));
  LT_CHECK(dx.empty() || dx.dtype == x.dtype, "{} on CUDA: dx has dtype {}; expected x's, {}", op,
           dtype_name(dx.dtype), dtype_name(x.dtype));
  LT_CHECK(dw.empty() || dw.dtype == x.dtype || dw.dtype == DType::F32,
           "{} on CUDA: dw has dtype {}; expected {} or f32", op, dtype_name(dw.dtype), dtype_name(x.dtype));
  return x.dtype;
}

void check_f32(const Tensor& t, const char* what) {
  LT_CHECK(t.dtype == DType::F32, "{} on CUDA: dtype {}; the GPU keeps it in f32", what, dtype_name(t.dtype));
}

// tile (nb, V) = x[n0 : n0 + nb] W^T, soft-capped when p.softcap says so.
void tile_logits(const Context& ctx, const FusedLinearCrossEntropyParams& p, Tensor tile, Tensor x, Tensor w,
                 int64_t n0, int64_t nb) {
  cuda::linear_forward(ctx, LinearParams{nb, p.dim, p.vocab}, tile, x.slice_rows(n0, n0 + nb), w, Tensor(),
                       Tensor());
  if (p.softcap > 0.0) launch_logit_softcap(tile.dtype, tile.data, p.softcap, nb * p.vocab, stream_of(ctx));
}

// After the cross-entropy kernels recorded a bad label: finds the first one (on the host: this is the error
// path) and names its row in the whole input.
[[noreturn]] void throw_bad_label(const FusedLinearCrossEntropyParams& p, const Tensor& labels,
                                  const char* op) {
  std::vector<int32_t> host(static_cast<size_t>(p.rows));  // (N)
  LT_CUDA_CHECK(cudaMemcpy(host.data(), labels.data, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  for (size_t n = 0; n < host.size(); ++n)
    if (host[n] != p.ignore_index && (host[n] < 0 || host[n] >= p.vocab))
      LT_FAIL("{}: label {} at row {} is outside the vocabulary [0, {}) and is not ignore_index ({})", op,
              host[n], n, p.vocab, p.ignore_index);
  LT_FAIL(
      "{}: a kernel reported a bad label, but the labels read back are all valid (were they changed "
      "while the op ran?)",
      op);
}

}  // namespace

void set_fused_linear_cross_entropy_tile_bytes(size_t bytes) {
  g_tile_bytes.store(bytes);
}
size_t fused_linear_cross_entropy_tile_bytes() {
  return g_tile_bytes.load();
}

int64_t fused_linear_cross_entropy_token_block(const FusedLinearCrossEntropyParams& p, DType dtype) {
  return blocking(p, dtype).rows;
}

size_t fused_linear_cross_entropy_workspace_bytes(const FusedLinearCrossEntropyParams& p, DType dtype) {
  if (p.rows == 0) return 0;
  const Blocking b = blocking(p, dtype);
  return b.sums_bytes + b.tile_bytes;
}

namespace {

// The forward's pass over the blocks; with `grads`, each block's tile then becomes its dlogits in place
// (from the lse just written) and feeds dx and dw at once, as the backward would after recomputing it.
double forward_pass(const Context& ctx, const FusedLinearCrossEntropyParams& p, Tensor losses, Tensor lse,
                    Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor labels, bool grads, const char* op) {
  const DType dt = check_dtypes(x, w, dx, dw, op);
  check_f32(losses, "fused_linear_cross_entropy_forward losses");
  check_f32(lse, "fused_linear_cross_entropy_forward lse");
  if (p.rows == 0) return 0.0;
  const Blocking b = blocking(p, dt);
  cudaStream_t s = stream_of(ctx);
  PoolBuffer ws(b.sums_bytes + b.tile_bytes, s);
  double* sums = reinterpret_cast<double*>(ws.data());                // (blocks) loss sum of each block
  void* tile_data = ws.data() + b.sums_bytes;                         // (rows, V) logits of one block
  float* losses_f = static_cast<float*>(losses.data);                 // (N)
  float* lse_f = static_cast<float*>(lse.data);                       // (N)
  const int32_t* label_i = static_cast<const int32_t*>(labels.data);  // (N)
  const bool with_grads = grads && !(dx.empty() && dw.empty());
  for (int64_t k = 0; k < b.blocks; ++k) {
    const int64_t n0 = k * b.rows, nb = std::min(b.rows, p.rows - n0);
    const Tensor tile(tile_data, dt, {nb, p.vocab}, Device::CUDA);
    tile_logits(ctx, p, tile, x, w, n0, nb);
    if (!with_grads) {
      launch_cross_entropy_forward(dt, losses_f + n0, lse_f + n0, tile_data, label_i + n0, nb, p.vocab,
                                   p.ignore_index, sums + k, device_error_slot(ctx.device), s);
    } else {
      launch_cross_entropy_forward_backward(dt, losses_f + n0, lse_f + n0, tile_data, label_i + n0, nb,
                                            p.vocab, p.ignore_index, p.grad_scale, sums + k,
                                            device_error_slot(ctx.device), s, p.softcap);
      const LinearParams lp{nb, p.dim, p.vocab, 1.0, false, p.accumulate_dx};
      cuda::linear_backward(ctx, lp, dx.empty() ? Tensor() : dx.slice_rows(n0, n0 + nb), dw, Tensor(), tile,
                            x.slice_rows(n0, n0 + nb), w);
    }
  }
  std::vector<double> host(static_cast<size_t>(b.blocks));  // (blocks)
  LT_CUDA_CHECK(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(double), cudaMemcpyDeviceToHost, s));
  int64_t record[4] = {};  // the device error slot: [code, row, value, unused]
  LT_CUDA_CHECK(
      cudaMemcpyAsync(record, device_error_slot(ctx.device), sizeof(record), cudaMemcpyDeviceToHost, s));
  ws.release();
  try {
    check_device_errors(ctx);  // synchronizes s: the block sums and the record have arrived
  } catch (const Error&) {
    // The kernels knew a bad label's row within their block only: name it in the whole input.
    if (record[0] == kErrCrossEntropyForwardLabel) throw_bad_label(p, labels, op);
    throw;
  }
  double total = 0.0;
  for (double v : host) total += v;
  return total;
}

}  // namespace

double fused_linear_cross_entropy_forward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                          Tensor losses, Tensor lse, Tensor x, Tensor w, Tensor labels) {
  return forward_pass(ctx, p, losses, lse, Tensor(), Tensor(), x, w, labels, false,
                      "fused_linear_cross_entropy_forward");
}

double fused_linear_cross_entropy_forward_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                                   Tensor losses, Tensor lse, Tensor dx, Tensor dw, Tensor x,
                                                   Tensor w, Tensor labels) {
  return forward_pass(ctx, p, losses, lse, dx, dw, x, w, labels, true,
                      "fused_linear_cross_entropy_forward_backward");
}

void fused_linear_cross_entropy_backward(const Context& ctx, const FusedLinearCrossEntropyParams& p,
                                         Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor lse,
                                         Tensor labels) {
  const char* op = "fused_linear_cross_entropy_backward";
  const DType dt = check_dtypes(x, w, dx, dw, op);
  check_f32(lse, "fused_linear_cross_entropy_backward lse");
  if (p.rows == 0 || (dx.empty() && dw.empty())) return;
  const Blocking b = blocking(p, dt);
  cudaStream_t s = stream_of(ctx);
  PoolBuffer ws(b.sums_bytes + b.tile_bytes, s);
  void* tile_data = ws.data() + b.sums_bytes;                         // (rows, V) logits, then dlogits
  const float* lse_f = static_cast<const float*>(lse.data);           // (N)
  const int32_t* label_i = static_cast<const int32_t*>(labels.data);  // (N)
  for (int64_t k = 0; k < b.blocks; ++k) {
    const int64_t n0 = k * b.rows, nb = std::min(b.rows, p.rows - n0);
    const Tensor tile(tile_data, dt, {nb, p.vocab}, Device::CUDA);
    tile_logits(ctx, p, tile, x, w, n0, nb);
    launch_cross_entropy_backward(dt, tile_data, tile_data, lse_f + n0, label_i + n0, nb, p.vocab,
                                  p.ignore_index, p.grad_scale, device_error_slot(ctx.device), s, p.softcap);
    const LinearParams lp{nb, p.dim, p.vocab, 1.0, false, p.accumulate_dx};
    cuda::linear_backward(ctx, lp, dx.empty() ? Tensor() : dx.slice_rows(n0, n0 + nb), dw, Tensor(), tile,
                          x.slice_rows(n0, n0 + nb), w);
  }
  ws.release();
}

}  // namespace lt::ops::cuda
