// The CUDA twins of ops/quant4.h's tensor functions: the public dispatchers checked shapes, devices and
// the code/scale dtypes; these check the output dtype the kernels write and launch on the current stream.
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/quant4_launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

void quantize_4bit(const Context& ctx, Tensor x, Quant4Type type, Tensor packed, Tensor absmax) {
  launch_quantize_4bit(x.dtype, x.data, x.numel(), type, static_cast<uint8_t*>(packed.data),
                       static_cast<float*>(absmax.data), stream_of(ctx));
}

void dequantize_4bit(const Context& ctx, Tensor packed, Tensor absmax, Quant4Type type, Tensor out) {
  LT_CHECK(out.dtype == DType::F32 || out.dtype == DType::BF16 || out.dtype == DType::F16,
           "dequantize_4bit on CUDA: output dtype {}, expected f32, bf16 or f16", dtype_name(out.dtype));
  launch_dequantize_4bit(static_cast<const uint8_t*>(packed.data), static_cast<const float*>(absmax.data),
                         out.numel(), type, out.dtype, out.data, stream_of(ctx));
}

void dequantize_absmax(const Context& ctx, Tensor q, Tensor nested_absmax, Tensor map, float offset,
                       Tensor absmax) {
  launch_dequantize_absmax(static_cast<const uint8_t*>(q.data), static_cast<const float*>(nested_absmax.data),
                           static_cast<const float*>(map.data), offset, absmax.numel(),
                           static_cast<float*>(absmax.data), stream_of(ctx));
}

}  // namespace lt::ops::cuda
