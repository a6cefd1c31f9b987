// CPU reference of the bitsandbytes 4-bit and 8-bit blockwise codes (ops/quant4.h). Every step is the f32
// operation the CUDA kernels do, in the same order, so the bytes match theirs: absmax as a max of |x|, one
// reciprocal, one multiply per element, comparisons against the kernels' f32 thresholds.
#include "ops/quant4.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/quant4_code.h"

namespace lt::ops {
namespace {

constexpr std::array<float, 16> kNf4Values = {LT_NF4_CODE_VALUES};
constexpr std::array<float, 16> kFp4Values = {LT_FP4_CODE_VALUES};

float load_float(DType dtype, const void* x, int64_t i) {
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(x)[i];
    case DType::BF16:
      return to_float(static_cast<const bf16*>(x)[i]);
    case DType::F16:
      return to_float(static_cast<const fp16*>(x)[i]);
    default:
      LT_FAIL("4-bit quantization: input dtype {} is not f32, bf16 or f16", dtype_name(dtype));
  }
}

void store_float(DType dtype, void* out, int64_t i, float v) {
  switch (dtype) {
    case DType::F32:
      static_cast<float*>(out)[i] = v;
      return;
    case DType::BF16:
      static_cast<bf16*>(out)[i] = to_bf16(v);
      return;
    case DType::F16:
      static_cast<fp16*>(out)[i] = to_fp16(v);
      return;
    case DType::F64:  // the f32 product widened exactly (the CPU's float64 reference runs)
      static_cast<double*>(out)[i] = double(v);
      return;
    default:
      LT_FAIL("4-bit dequantization: output dtype {} is not f64, f32, bf16 or f16", dtype_name(dtype));
  }
}

}  // namespace

std::string_view quant4_type_name(Quant4Type type) {
  return type == Quant4Type::NF4 ? "nf4" : "fp4";
}

std::optional<Quant4Type> parse_quant4_type(std::string_view name) {
  if (name == "nf4") return Quant4Type::NF4;
  if (name == "fp4") return Quant4Type::FP4;
  return std::nullopt;
}

const std::array<float, 16>& quant4_code_values(Quant4Type type) {
  return type == Quant4Type::NF4 ? kNf4Values : kFp4Values;
}

std::array<float, 16> quant4_quant_map(Quant4Type type) {
  std::array<float, 16> map = quant4_code_values(type);
  if (type == Quant4Type::FP4) map[8] = 0.0f;
  return map;
}

uint8_t quantize4_value(Quant4Type type, float scaled) {
  return type == Quant4Type::NF4 ? nf4_code(scaled) : fp4_code(scaled);
}

std::vector<float> signed_dynamic_map() {
  // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for exponent i in 0..6, 2^i
  // fraction midpoints of linspace(0.1, 1, 2^i + 1) (f32 linspace, f32 midpoints) scaled by 10^(i-6)
  // (a Python float times an f32 tensor: an f32 product of f32(10^(i-6))), both signs; then 0 and 1;
  // sorted.
  std::vector<float> map;
  for (int i = 0; i < 7; ++i) {
    const int items = (1 << i) + 1;
    std::vector<float> bounds(static_cast<size_t>(items));
    // torch.linspace(0.1, 1, steps) in f32 as its CPU kernel computes it: start + k * step for the first
    // half, end - (steps-1-k) * step for the second, each one fused multiply-add (a single rounding).
    const float start = 0.1f, end = 1.0f;
    const float step = (end - start) / float(items - 1);
    const int halfway = items / 2;
    for (int k = 0; k < items; ++k)
      bounds[size_t(k)] =
          k < halfway ? std::fma(step, float(k), start) : std::fma(-step, float(items - 1 - k), end);
    const float scale = float(std::pow(10.0, double(i - 6)));
    for (int k = 0; k + 1 < items; ++k) {
      const float mean = (bounds[size_t(k)] + bounds[size_t(k) + 1]) / 2.0f;
      map.push_back(scale * mean);
      map.push_back(-scale * mean);
    }
  }
  map.push_back(0.0f);
  map.push_back(1.0f);
  std::sort(map.begin(), map.end());
  LT_CHECK(map.size() == 256, "signed dynamic map: {} values, expected 256", map.size());
  return map;
}

uint8_t quantize8_value(const float* map, float x) {
  return dynamic8_code(map, x);
}

void quantize_4bit_cpu(DType x_dtype, const void* x, int64_t n, Quant4Type type, uint8_t* packed,
                       float* absmax) {
  const int64_t blocks = quant4_blocks(n);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kQuant4BlockSize;
    const int64_t end = std::min(begin + kQuant4BlockSize, n);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(load_float(x_dtype, x, i)));
    absmax[b] = amax;
    const float inv = 1.0f / amax;  // inf for an all-zero block: 0 * inf = NaN encodes as code 0
    // A block starts at an even element (64 is even), so its bytes are its own.
    for (int64_t i = begin; i < end; i += 2) {
      const uint8_t hi = quantize4_value(type, load_float(x_dtype, x, i) * inv);
      // An odd n pads the last byte's low nibble with the code of 0 * inv.
      const float second = i + 1 < end ? load_float(x_dtype, x, i + 1) : 0.0f;
      const uint8_t lo = quantize4_value(type, second * inv);
      packed[i / 2] = uint8_t(hi << 4 | lo);
    }
  }
}

void dequantize_4bit_cpu(const uint8_t* packed, const float* absmax, int64_t n, Quant4Type type,
                         DType out_dtype, void* out) {
  const std::array<float, 16>& values = quant4_code_values(type);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = packed[i / 2];
    const uint8_t code = (i & 1) ? uint8_t(byte & 0x0f) : uint8_t(byte >> 4);
    store_float(out_dtype, out, i, values[code] * absmax[i / kQuant4BlockSize]);
  }
}

float absmax_mean(const float* absmax, int64_t blocks) {
  LT_CHECK(blocks > 0, "double quantization: no absmax values");
  double sum = 0.0;
  for (int64_t i = 0; i < blocks; ++i) sum += double(absmax[i]);
  return float(sum / double(blocks));
}

void quantize_absmax_cpu(const float* absmax, int64_t blocks, float offset, const float* map, uint8_t* q,
                         float* nested_absmax) {
  const int64_t nblocks = nested_blocks(blocks);
#pragma omp parallel for schedule(static) if (nblocks > 16)
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t begin = b * kNestedBlockSize;
    const int64_t end = std::min(begin + kNestedBlockSize, blocks);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(absmax[i] - offset));
    nested_absmax[b] = amax;
    const float inv = 1.0f / amax;
    for (int64_t i = begin; i < end; ++i) q[i] = quantize8_value(map, (absmax[i] - offset) * inv);
  }
}

void dequantize_absmax_cpu(const uint8_t* q, const float* nested_absmax, const float* map, float offset,
                           int64_t blocks, float* absmax) {
  for (int64_t i = 0; i < blocks; ++i) {
    const float scaled = map[q[i]] * nested_absmax[i / kNestedBlockSize];  // rounded to f32 here
    absmax[i] = scaled + offset;
  }
}

}  // namespace lt::ops

namespace lt::ops::cpu {

void quantize_4bit(Tensor x, Quant4Type type, Tensor packed, Tensor absmax) {
  quantize_4bit_cpu(x.dtype, x.data, x.numel(), type, static_cast<uint8_t*>(packed.data),
                    static_cast<float*>(absmax.data));
}

void dequantize_4bit(Tensor packed, Tensor absmax, Quant4Type type, Tensor out) {
  dequantize_4bit_cpu(static_cast<const uint8_t*>(packed.data), static_cast<const float*>(absmax.data),
                      out.numel(), type, out.dtype, out.data);
}

void dequantize_absmax(Tensor q, Tensor nested_absmax, Tensor map, float offset, Tensor absmax) {
  dequantize_absmax_cpu(static_cast<const uint8_t*>(q.data), static_cast<const float*>(nested_absmax.data),
                        static_cast<const float*>(map.data), offset, absmax.numel(),
                        static_cast<float*>(absmax.data));
}

}  // namespace lt::ops::cpu
