// The merge is one GEMM per adapter through the linear op: W (out, in) += scaling * B (out, r) (A^T)^T, with
// A^T (in, r) as the op's weight; A is transposed into a temporary first.
#include "model/lora_merge.h"

#include <cstring>
#include <vector>

#include "ops/ops.h"

namespace lt::model {

Tensor& projection_weight(LayerWeights& w, LoraModule m) {
  switch (m) {
    case LoraModule::Q:
      return w.attn_q;
    case LoraModule::K:
      return w.attn_k;
    case LoraModule::V:
      return w.attn_v;
    case LoraModule::O:
      return w.attn_o;
    case LoraModule::Gate:
      return w.ffn_gate;
    case LoraModule::Up:
      return w.ffn_up;
    default:
      return w.ffn_down;
  }
}

void merge_lora(const ops::Context& ctx, const ModelConfig& config, ModelWeights& weights,
                const LoraWeights& lora) {
  LT_CHECK(
      weights.layers.size() == size_t(config.num_layers) && lora.layers.size() == size_t(config.num_layers),
      "merge_lora: {} weight layers and {} adapter layers for a model of {}", weights.layers.size(),
      lora.layers.size(), config.num_layers);
  const size_t elem = dtype_size(lora.dtype);
  for (const LoraSpec& s : lora.specs) {
    const LoraAdapter& ad = lora.adapter(s);
    LayerWeights& layer = weights.layers[size_t(s.layer)];
    // A fused module's adapter merges into the fused weight (B's row blocks are its parts').
    const bool fused = lora_module_parts(config, s.module).size() > 1;
    Tensor& w = !fused                      ? projection_weight(layer, s.module)
                : s.module == LoraModule::Q ? layer.attn_qkv
                                            : layer.ffn_gate_up;
    check_shape(w, {s.out, s.in}, s.module_path + ".weight (merge target)");
    check_shape(ad.a, {s.rank, s.in}, s.module_path + ".lora_A");
    check_shape(ad.b, {s.out, s.rank}, s.module_path + ".lora_B");
    check_same_dtype(w, ad.a, "merge_lora: base weight and adapter");
    LT_CHECK(w.device == Device::CPU && ad.a.device == Device::CPU, "merge_lora: {}: expected host memory",
             s.module_path);
    std::vector<unsigned char> a_t_bytes(size_t(s.in * s.rank) * elem);  // (in, r) A^T
    const auto* a = static_cast<const unsigned char*>(ad.a.data);
    for (int64_t k = 0; k < s.rank; ++k)
      for (int64_t j = 0; j < s.in; ++j)
        std::memcpy(&a_t_bytes[size_t(j * s.rank + k) * elem], a + size_t(k * s.in + j) * elem, elem);
    Tensor a_t(a_t_bytes.data(), lora.dtype, {s.in, s.rank});
    ops::linear_forward(
        ctx, {.rows = s.out, .in = s.rank, .out = s.in, .out_scale = ad.scaling, .accumulate_y = true}, w,
        ad.b, a_t, Tensor());
  }
}

}  // namespace lt::model
