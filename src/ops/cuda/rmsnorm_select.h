// Which RMSNorm kernels a CUDA call takes (rmsnorm.cu): the kernel options
// rmsnorm_forward and rmsnorm_backward (ops/kernel_options.h), read at every call, so that the parity and
// determinism tests run every variant and the bandwidth bench (CudaBench.DISABLED_ElementwiseBandwidth) times
// them side by side.
//   rmsnorm_forward:  rows (the default): one block per row, the row in registers;
//                     general: the general kernel (the row read twice) for every shape.
//   rmsnorm_backward: pair (the default): blocks of two halves of 256 threads at 2 blocks/SM (the same
//                     threads and registers per SM as one block of 256 at 4 blocks/SM), each half walking
//                     its own rows with the row, w and its dw columns in registers; the halves' dw columns
//                     are added in shared memory into one partial row per block, and a programmatic
//                     dependent launch of a float4 column-sum kernel adds the partial rows into dw (its
//                     launch overlaps the backward's tail). Where the pair grid is not one wave on the GPU,
//                     single-pdl instead;
//                     single-pdl: one block of 256 threads per row walk, every block writing its own partial
//                     row, summed as in pair (twice the partial rows to write and read: slower);
//                     general: the general kernel (partial dw rows in memory) for every shape.
//                     Every variant sums each column in a fixed order (bit-deterministic).
// Shapes the register kernels do not cover take the general kernels whatever the request. No fmt here:
// the rmsnorm .cu files include it.
#pragma once

#include <cstdint>

#include "ops/context.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

using ops::RmsNormBackwardKernel;
using ops::RmsNormForwardKernel;

RmsNormForwardKernel rmsnorm_forward_kernel_request(const Context& ctx);    // ctx.kernels.rmsnorm_forward
RmsNormBackwardKernel rmsnorm_backward_kernel_request(const Context& ctx);  // ctx.kernels.rmsnorm_backward

// A diagnostic for the bandwidth bench: the bf16 backward register kernel at row length `dim` (a multiple of
// 8, <= 8192): how many of its blocks this GPU holds at once (SMs times blocks per SM), and its grid; and
// the pair variant's: it runs paired when pair_resident (its blocks of twice the threads held at once) >=
// pair_grid, else falls back to single-pdl. The argument is checked here (rmsnorm_select.cpp), the kernels
// queried in rmsnorm.cu (_unchecked: trusts its argument).
struct RmsNormBackwardOccupancy {
  int64_t resident = 0, grid = 0;
  int64_t pair_resident = 0, pair_grid = 0;
};
RmsNormBackwardOccupancy rmsnorm_backward_occupancy(const Context& ctx, int64_t dim);    // on ctx.device
RmsNormBackwardOccupancy rmsnorm_backward_occupancy_unchecked(int64_t dim, int device);  // rmsnorm.cu

}  // namespace lt::ops::cuda
