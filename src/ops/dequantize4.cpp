// 4-bit quantization and dequantization on tensors (ops/quant4.h), routed by device: QLoRA's projections are
// dequantized into the compute dtype right before their GEMM.
#include "ops/check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/dispatch.h"
#include "ops/quant4_ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace lt::ops {

void dequantize_4bit(const Context& ctx, Tensor packed, Tensor absmax, Quant4Type type, Tensor out) {
  LT_CHECK(!packed.empty() && !absmax.empty() && !out.empty(),
           "dequantize_4bit: a tensor is missing (empty view)");
  check_device(out.device, {&packed, &absmax, &out}, "dequantize_4bit");
  check_dtype(packed, DType::U8, "dequantize_4bit packed");
  check_dtype(absmax, DType::F32, "dequantize_4bit absmax");
  const int64_t n = out.numel();
  LT_CHECK(packed.numel() == quant4_packed_bytes(n) && absmax.numel() == quant4_blocks(n),
           "dequantize_4bit: {} packed bytes and {} block scales for {} values; expected {} and {}",
           packed.numel(), absmax.numel(), n, quant4_packed_bytes(n), quant4_blocks(n));
  LT_CHECK(is_floating(out.dtype), "dequantize_4bit out: dtype {} is not floating", dtype_name(out.dtype));
  LT_OP_DISPATCH(ctx, out.device, dequantize_4bit, packed, absmax, type, out);
}

void quantize_4bit(const Context& ctx, Tensor x, Quant4Type type, Tensor packed, Tensor absmax) {
  LT_CHECK(!x.empty() && !packed.empty() && !absmax.empty(),
           "quantize_4bit: a tensor is missing (empty view)");
  check_device(x.device, {&x, &packed, &absmax}, "quantize_4bit");
  check_dtype(packed, DType::U8, "quantize_4bit packed");
  check_dtype(absmax, DType::F32, "quantize_4bit absmax");
  LT_CHECK(x.dtype == DType::F32 || x.dtype == DType::BF16 || x.dtype == DType::F16,
           "quantize_4bit x: dtype {}, expected f32, bf16 or f16 (what bitsandbytes quantizes)",
           dtype_name(x.dtype));
  const int64_t n = x.numel();
  LT_CHECK(packed.numel() == quant4_packed_bytes(n) && absmax.numel() == quant4_blocks(n),
           "quantize_4bit: {} packed bytes and {} block scales for {} values; expected {} and {}",
           packed.numel(), absmax.numel(), n, quant4_packed_bytes(n), quant4_blocks(n));
  LT_OP_DISPATCH(ctx, x.device, quantize_4bit, x, type, packed, absmax);
}

void dequantize_absmax(const Context& ctx, Tensor q, Tensor nested_absmax, Tensor map, float offset,
                       Tensor absmax) {
  LT_CHECK(!q.empty() && !nested_absmax.empty() && !map.empty() && !absmax.empty(),
           "dequantize_absmax: a tensor is missing (empty view)");
  check_device(absmax.device, {&q, &nested_absmax, &map, &absmax}, "dequantize_absmax");
  check_dtype(q, DType::U8, "dequantize_absmax q");
  check_dtype(nested_absmax, DType::F32, "dequantize_absmax nested_absmax");
  check_dtype(map, DType::F32, "dequantize_absmax map");
  check_dtype(absmax, DType::F32, "dequantize_absmax absmax");
  const int64_t blocks = absmax.numel();
  LT_CHECK(q.numel() == blocks && nested_absmax.numel() == nested_blocks(blocks) && map.numel() == 256,
           "dequantize_absmax: {} codes, {} nested scales and a {}-value map for {} scales; expected {}, {} "
           "and 256",
           q.numel(), nested_absmax.numel(), map.numel(), blocks, blocks, nested_blocks(blocks));
  LT_OP_DISPATCH(ctx, absmax.device, dequantize_absmax, q, nested_absmax, map, offset, absmax);
}

}  // namespace lt::ops
