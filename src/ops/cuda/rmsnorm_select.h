// Which RMSNorm kernels a CUDA call takes (rmsnorm.cu), for measuring them against each other on one GPU
// run (CudaBench.DISABLED_ElementwiseBandwidth times every variant) and for testing each one (the parity
// and determinism tests run every variant). Read from the environment at every call, so a test can switch:
//   LT_RMSNORM_FORWARD:  rows (unset or empty: the default): one block per row, the row in registers;
//                        walk: a fixed grid of blocks walks the rows, w and the next row in registers;
//                        general: the general kernel (the row read twice) for every shape.
//   LT_RMSNORM_BACKWARD: single (unset or empty: the default): the row, w and the dw columns in registers
//                        (4 blocks/SM); prefetch: the same, the next row loaded before the current one is
//                        reduced (3 blocks/SM; measured slower on the H200: 58% against 70% of the copy
//                        bandwidth at 8192 x 4096 bf16);
//                        general: the general kernel (partial dw rows in memory) for every shape.
// Shapes the register kernels do not cover take the general kernels whatever the request. No fmt here:
// rmsnorm.cu includes it; the values are parsed (and refused, naming the variable) in rmsnorm_select.cpp.
#pragma once

#include <cstdint>

namespace lt::ops::cuda {

enum class RmsNormForwardKernel : uint8_t { Rows, Walk, General };
enum class RmsNormBackwardKernel : uint8_t { Prefetch, Single, General };

RmsNormForwardKernel rmsnorm_forward_kernel_request();    // LT_RMSNORM_FORWARD
RmsNormBackwardKernel rmsnorm_backward_kernel_request();  // LT_RMSNORM_BACKWARD

}  // namespace lt::ops::cuda
