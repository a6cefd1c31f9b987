// Which RMSNorm kernels a CUDA call takes (rmsnorm.cu), for measuring them against each other on one GPU
// run (CudaBench.DISABLED_ElementwiseBandwidth times every variant) and for testing each one (the parity
// and determinism tests run every variant). Read from the environment at every call, so a test can switch:
//   LT_RMSNORM_FORWARD:  rows (unset or empty: the default): one block per row, the row in registers;
//                        (a "walk" variant, a fixed grid walking the rows with w and the next row in
//                        registers, measured 67% against 78% at 8192 x 4096 bf16 and was removed);
//                        general: the general kernel (the row read twice) for every shape.
//   LT_RMSNORM_BACKWARD: single: the row, w and the dw columns in registers (4 blocks/SM), every block
//                        writes its partial dw row, the sum launched after it (H200, 8192 x 4096 bf16, f32
//                        dw: 67-68% of the copy bandwidth; 16384 x 4096: 75%);
//                        single-pdl: the same kernel, the sum a programmatic dependent launch (its launch
//                        overlaps the backward's tail) of a kernel reading 16 columns per block in float4s
//                        (256 blocks at D = 4096, against 32 columns and 128 blocks);
//                        fused: the same kernel and no second launch: the last 256 blocks to finish wait
//                        for every partial row (a ticket counter) and sum a fixed share of the columns each
//                        (the single kernel and its sum where those 256 blocks do not fit on the GPU);
//                        both sum every column in a fixed order (bit-deterministic, like the others);
//                        (H200, 8192 x 4096: single-pdl 69%, fused 66%);
//                        pair (unset or empty: the default; 71% at 8192 x 4096, H200, session 5):
//                        blocks of two halves of 256 threads at 2 blocks/SM (264 blocks, the same
//                        threads and registers per SM as single), each half the single kernel's work on its
//                        own rows, the halves' dw columns added in shared memory: one partial row per block
//                        (half of single's), summed as in single-pdl (single-pdl where the pair grid is not
//                        one wave on the GPU);
//                        cluster: the same kernel with the blocks in clusters of 4 that add their partial
//                        dw rows in
//                        distributed shared memory before writing them (4x fewer rows to write and sum);
//                        the kernel that sums the rows into dw is a programmatic dependent launch (its
//                        launch overlaps the backward's tail);
//                        cluster-serial: the same, the sum launched after the backward's end (what the
//                        dependent launch gains);
//                        cluster8: clusters of 8 (dependent launch too);
//                        (measured slower on the H200: 56% at 8192 x 4096, 60% at 16384 x 4096; a
//                        cluster of 4 leaves 496 blocks resident against the grid's 528, two waves; the
//                        clusters of 8 and the serial launch likewise 54-59%);
//                        general: the general kernel (partial dw rows in memory) for every shape.
//                        (A "prefetch" variant, the next row loaded before the current one is reduced at 3
//                        blocks/SM, measured 58% and was removed.)
// Shapes the register kernels do not cover take the general kernels whatever the request. No fmt here:
// rmsnorm.cu includes it; the values are parsed (and refused, naming the variable) in rmsnorm_select.cpp.
#pragma once

#include <cstdint>

namespace lt::ops::cuda {

enum class RmsNormForwardKernel : uint8_t { Rows, General };
enum class RmsNormBackwardKernel : uint8_t {
  Cluster,
  ClusterSerial,
  Cluster8,
  Single,
  SinglePdl,
  Fused,
  Pair,
  General
};

RmsNormForwardKernel rmsnorm_forward_kernel_request();    // LT_RMSNORM_FORWARD
RmsNormBackwardKernel rmsnorm_backward_kernel_request();  // LT_RMSNORM_BACKWARD

// A diagnostic for the bandwidth bench: the bf16 backward register kernel at row length `dim` (a multiple of
// 8, <= 8192) in clusters of `cluster` blocks (1, 4 or 8): how many of its blocks this GPU holds at once
// (cudaOccupancyMaxActiveClusters times the cluster size; SMs times blocks per SM without clusters), and
// its grid. The grid in one wave needs resident >= grid. The arguments are checked here (rmsnorm_select.cpp),
// the kernels queried in rmsnorm.cu (_unchecked: trusts its arguments).
// With cluster 1 also the fused variant's check (bf16, f32 dw): it runs fused when fused_resident (its
// kernel's blocks held at once) >= fused_reducers (the blocks that wait), else falls back to single; and the
// pair variant's: it runs paired when pair_resident (its blocks of twice the threads held at once) >=
// pair_grid, else falls back to single-pdl.
struct RmsNormBackwardOccupancy {
  int64_t resident = 0, grid = 0;
  int64_t fused_resident = 0, fused_reducers = 0;  // cluster 1 only
  int64_t pair_resident = 0, pair_grid = 0;        // cluster 1 only
};
RmsNormBackwardOccupancy rmsnorm_backward_occupancy(int64_t dim, int cluster);
RmsNormBackwardOccupancy rmsnorm_backward_occupancy_unchecked(int64_t dim, int cluster);  // rmsnorm.cu

}  // namespace lt::ops::cuda
