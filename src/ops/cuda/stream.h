// The stream every CUDA launcher uses: the one of the op call in progress (ops/context.h's call context,
// which each public op sets from the context it is given). The default is the legacy default stream
// (nullptr).
#pragma once

#include <cuda_runtime.h>

namespace lt::ops::cuda {

cudaStream_t current_stream();

}  // namespace lt::ops::cuda
