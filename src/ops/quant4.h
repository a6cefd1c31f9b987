// 4-bit blockwise weight quantization in bitsandbytes' format (QLoRA's NF4, and FP4), bit-identical to
// bitsandbytes' CUDA kernels (kQuantizeBlockwise / kDequantizeBlockwise), with the optional double
// quantization of the block scales (8-bit blockwise over the signed dynamic map). FORMATS.md has the facts.
//
// The weight [out, in] is flattened row-major and cut into blocks of 64 elements (blocks cross rows; the last
// one may be partial); each block keeps absmax = max|x| as f32 and one 4-bit code per element, element 2k
// in the high nibble of byte k. The CPU functions here are the reference the CUDA twins
// (ops/cuda/quant4_launch.h) are checked against byte for byte.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace lt::ops {

enum class Quant4Type : uint8_t { NF4, FP4 };
std::string_view quant4_type_name(Quant4Type type);                  // "nf4" / "fp4"
std::optional<Quant4Type> parse_quant4_type(std::string_view name);  // nullopt for anything else

constexpr int64_t kQuant4BlockSize = 64;   // elements per absmax (bitsandbytes' and transformers' default)
constexpr int64_t kNestedBlockSize = 256;  // absmax values per nested scale under double quantization

constexpr int64_t quant4_packed_bytes(int64_t n) {
  return (n + 1) / 2;
}
constexpr int64_t quant4_blocks(int64_t n) {
  return (n + kQuant4BlockSize - 1) / kQuant4BlockSize;
}
constexpr int64_t nested_blocks(int64_t blocks) {
  return (blocks + kNestedBlockSize - 1) / kNestedBlockSize;
}

// The 16 values a code stands for (index = code), as bitsandbytes' CUDA dequantization computes them (FP4's
// code 8, the sign bit on a zero magnitude, is -0.0).
const std::array<float, 16>& quant4_code_values(Quant4Type type);
// The table files store as quant_map (bitsandbytes' get_4bit_type): the same values, but FP4's code 8 is
// +0.0 there (Python's -0 is the integer 0).
std::array<float, 16> quant4_quant_map(Quant4Type type);
// The code of one value already scaled by 1/absmax: the nearest table value, a value exactly between two
// going to the lower (strict `>` against f32 midpoints). NaN (an all-zero block: 0 * inf) encodes as 0.
uint8_t quantize4_value(Quant4Type type, float scaled);

// bitsandbytes' create_dynamic_map(signed=True): 256 sorted f32 values (the nested map of new files; a
// loaded file's own nested_quant_map is used as it is).
std::vector<float> signed_dynamic_map();
// The 8-bit code of `scaled` over a sorted 256-value map: the same binary search and final midpoint test
// as bitsandbytes' dQuantize (nearest; a tie goes where the search's last probe sends it).
uint8_t quantize8_value(const float* map /*256*/, float scaled);

// x: n elements of F32, BF16 or F16 (16-bit values are upcast exactly). packed: (n+1)/2 bytes; absmax:
// quant4_blocks(n) floats. absmax = max|x| per block, inv = 1.0f / absmax, code = quantize4_value(x * inv).
void quantize_4bit_cpu(DType x_dtype, const void* x, int64_t n, Quant4Type type, uint8_t* packed,
                       float* absmax);
// out (n elements of F32, BF16, F16, or F64: exact) = (out dtype)(code_value[nibble] * absmax[block]): one
// f32 product, one rounding.
void dequantize_4bit_cpu(const uint8_t* packed, const float* absmax, int64_t n, Quant4Type type,
                         DType out_dtype, void* out);

// Double quantization of `blocks` absmax values: offset = their mean (computed in f64, rounded once to f32),
// then 8-bit blockwise (blocks of 256) quantization of (absmax - offset) in f32 over `map`.
float absmax_mean(const float* absmax, int64_t blocks);
void quantize_absmax_cpu(const float* absmax, int64_t blocks, float offset, const float* map /*256*/,
                         uint8_t* q /*blocks*/, float* nested_absmax /*nested_blocks(blocks)*/);
// absmax[i] = f32(map[q[i]] * nested_absmax[i / 256]), then + offset as a separate f32 add.
void dequantize_absmax_cpu(const uint8_t* q, const float* nested_absmax, const float* map /*256*/,
                           float offset, int64_t blocks, float* absmax);

// One quantized weight in host memory, the pieces bitsandbytes stores (FORMATS.md names the tensors).
struct Quant4Weight {
  Quant4Type type = Quant4Type::NF4;
  std::vector<int64_t> shape;   // the original weight's shape, [out, in]
  DType dtype = DType::BF16;    // the dtype the weight was quantized from (quant_state "dtype")
  std::vector<uint8_t> packed;  // (n+1)/2
  // Without double quantization: absmax (quant4_blocks(n)). With it: qabsmax, nested_absmax, nested_map,
  // offset, and absmax empty.
  std::vector<float> absmax;
  bool double_quant = false;
  std::vector<uint8_t> qabsmax;      // quant4_blocks(n)
  std::vector<float> nested_absmax;  // nested_blocks(quant4_blocks(n))
  std::vector<float> nested_map;     // 256
  float offset = 0.0f;

  int64_t numel() const;
  // The f32 block scales: absmax, or the double-quantized ones dequantized.
  std::vector<float> block_absmax() const;
  // Bytes it takes: packed + scales (+ nested scales and map).
  int64_t storage_bytes() const;
};

// Quantizes x (n = product of shape elements of x_dtype) the way bitsandbytes' quantize_4bit does, with
// compress_statistics = double_quant. nested_map: the 256-value map for double quantization (empty: the
// signed dynamic map).
Quant4Weight quantize_weight_4bit(DType x_dtype, const void* x, std::vector<int64_t> shape, Quant4Type type,
                                  bool double_quant, std::vector<float> nested_map = {});
// The rest of quantize_weight_4bit for codes and block scales already computed (`w` with packed and absmax
// set, by the CPU or the GPU kernel): double quantization of the absmax when asked.
void finish_quant4_weight(Quant4Weight& w, bool double_quant, std::vector<float> nested_map = {});
// The weight dequantized to out_dtype (F32, BF16 or F16), numel() elements.
void dequantize_weight_4bit(const Quant4Weight& w, DType out_dtype, void* out);

}  // namespace lt::ops
