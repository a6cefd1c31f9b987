// Quant4Weight: one weight quantized as bitsandbytes' quantize_4bit leaves it (ops/quant4.h).
#include "ops/quant4.h"

#include "core/error.h"

namespace lt::ops {

int64_t Quant4Weight::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> Quant4Weight::block_absmax() const {
  if (!double_quant) return absmax;
  const int64_t blocks = quant4_blocks(numel());
  LT_CHECK(int64_t(qabsmax.size()) == blocks && int64_t(nested_absmax.size()) == nested_blocks(blocks) &&
               nested_map.size() == 256,
           "4-bit weight: double-quantized scales have {} codes, {} nested scales and a {}-value map; "
           "expected {}, {} and 256",
           qabsmax.size(), nested_absmax.size(), nested_map.size(), blocks, nested_blocks(blocks));
  std::vector<float> out(static_cast<size_t>(blocks));
  dequantize_absmax_cpu(qabsmax.data(), nested_absmax.data(), nested_map.data(), offset, blocks, out.data());
  return out;
}

int64_t Quant4Weight::storage_bytes() const {
  return int64_t(packed.size()) +
         int64_t(absmax.size() * 4 + qabsmax.size() + nested_absmax.size() * 4 + nested_map.size() * 4);
}

Quant4Weight quantize_weight_4bit(DType x_dtype, const void* x, std::vector<int64_t> shape, Quant4Type type,
                                  bool double_quant, std::vector<float> nested_map) {
  Quant4Weight w;
  w.type = type;
  w.shape = std::move(shape);
  w.dtype = x_dtype;
  const int64_t n = w.numel();
  const int64_t blocks = quant4_blocks(n);
  w.packed.resize(size_t(quant4_packed_bytes(n)));
  w.absmax.resize(size_t(blocks));
  quantize_4bit_cpu(x_dtype, x, n, type, w.packed.data(), w.absmax.data());
  finish_quant4_weight(w, double_quant, std::move(nested_map));
  return w;
}

void finish_quant4_weight(Quant4Weight& w, bool double_quant, std::vector<float> nested_map) {
  const int64_t blocks = quant4_blocks(w.numel());
  LT_CHECK(int64_t(w.absmax.size()) == blocks && int64_t(w.packed.size()) == quant4_packed_bytes(w.numel()),
           "4-bit weight: {} block scales and {} packed bytes, expected {} and {}", w.absmax.size(),
           w.packed.size(), blocks, quant4_packed_bytes(w.numel()));
  if (double_quant) {
    w.double_quant = true;
    w.nested_map = nested_map.empty() ? signed_dynamic_map() : std::move(nested_map);
    LT_CHECK(w.nested_map.size() == 256, "double quantization: the nested map has {} values, expected 256",
             w.nested_map.size());
    w.offset = absmax_mean(w.absmax.data(), blocks);
    w.qabsmax.resize(size_t(blocks));
    w.nested_absmax.resize(size_t(nested_blocks(blocks)));
    quantize_absmax_cpu(w.absmax.data(), blocks, w.offset, w.nested_map.data(), w.qabsmax.data(),
                        w.nested_absmax.data());
    w.absmax.clear();
  }
}

void dequantize_weight_4bit(const Quant4Weight& w, DType out_dtype, void* out) {
  const int64_t n = w.numel();
  LT_CHECK(int64_t(w.packed.size()) == quant4_packed_bytes(n), "4-bit weight: {} packed bytes, expected {}",
           w.packed.size(), quant4_packed_bytes(n));
  const std::vector<float> scales = w.block_absmax();
  LT_CHECK(int64_t(scales.size()) == quant4_blocks(n), "4-bit weight: {} block scales, expected {}",
           scales.size(), quant4_blocks(n));
  dequantize_4bit_cpu(w.packed.data(), scales.data(), n, w.type, out_dtype, out);
}

}  // namespace lt::ops
