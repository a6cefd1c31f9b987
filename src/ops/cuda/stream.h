// The stream every CUDA launcher uses: the one of the context its op call was given (ops/context.h). The
// default is the legacy default stream (nullptr).
#pragma once

#include <cuda_runtime.h>

#include "ops/context.h"

namespace lt::ops::cuda {

cudaStream_t stream_of(const Context& ctx);

}  // namespace lt::ops::cuda
