// A tiny model with LoRA adapters on every projection (ranks, alphas and rsLoRA differing per module) and
// random non-zero A and B, for the whole-model LoRA tests.
#pragma once

#include <memory>
#include <vector>

#include "core/arena.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "support/test_context.h"
#include "tiny_model.h"

namespace lt::test {

// Rank 1..4 and alpha by (layer, module); rsLoRA on the MLP of layer 1. Every projection is adapted.
inline std::vector<model::LoraSpec> tiny_lora_specs(const model::ModelConfig& config) {
  return model::lora_specs(config, [](const std::string& path) -> std::optional<model::LoraModuleSetting> {
    const int64_t h = int64_t(std::hash<std::string>{}(path) % 4);
    const bool mlp1 = path.starts_with("model.layers.1.mlp");
    return model::LoraModuleSetting{.rank = 1 + h, .alpha = 2.0 + double(h) * 1.5, .use_rslora = mlp1};
  });
}

// A and B uniform in a range that makes the adapters' contribution comparable to the base weights'.
inline void fill_lora_random(model::LoraWeights& lora, uint64_t seed) {
  for (size_t i = 0; i < lora.specs.size(); ++i) {
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      Tensor& t = lora.matrix(lora.specs[i], which);
      std::vector<double> v(size_t(t.numel()));
      const double scale = 1.0 / std::sqrt(double(t.dim(1)));
      for (size_t j = 0; j < v.size(); ++j)
        v[j] = scale * (2.0 * philox_uniform_double(seed, 2 * i + (which == model::LoraMatrix::B), j) - 1.0);
      convert_elements(t.data, t.dtype, v.data(), DType::F64, v.size());
    }
  }
}

// tiny_config as a Phi-3: fused q/k/v and gate/up (one weight and one adapter each), no biases, 4 of the 6
// dims of each head rotating.
inline void make_phi3(model::ModelConfig& c) {
  c.arch = model::Architecture::Phi3;
  c.architecture_name = "Phi3ForCausalLM";
  c.model_type = "phi3";
  c.block.fused_qkv = c.block.fused_gate_up = true;
  c.block.rotary_dim = 4;
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
}

// Base weights (+ optional gradients), adapters and their gradients, and a decoder planned for them.
struct TinyLoraModel {
  model::ModelConfig config;
  std::vector<model::LoraSpec> specs;
  std::unique_ptr<Arena> arena;
  model::ModelWeights weights, grads;
  model::LoraWeights lora, lora_grads;
  std::unique_ptr<model::Decoder> decoder;

  // intermediate_size > 0 replaces tiny_config's F; qk_norm adds per-head q/k norms (Qwen3's block); fused
  // makes it a Phi-3 (fused qkv_proj / gate_up_proj weights and adapters, no biases, partial rotary).
  TinyLoraModel(DType dtype, bool train_base, uint64_t seed, int64_t B = TinyBatch::B,
                int64_t T = TinyBatch::T, int64_t intermediate_size = 0, bool qk_norm = false,
                bool fused = false)
      : config(tiny_config(false)) {
    if (intermediate_size > 0) config.intermediate_size = intermediate_size;
    config.block.qk_norm = qk_norm;
    if (fused) make_phi3(config);
    specs = tiny_lora_specs(config);
    const model::TrainableFn trainable =
        train_base ? model::TrainableFn(model::train_all)
                   : model::TrainableFn([](const model::WeightSpec&) { return false; });
    arena = std::make_unique<Arena>(
        "lora-test", HostMemory::instance(),
        model::weights_bytes(config, dtype) + model::grads_bytes(config, dtype, trainable) +
            2 * model::lora_bytes(specs, dtype) +
            model::Decoder::arena_bytes(config, dtype, B, T, specs, model::DecoderOptions::plain_head()));
    weights = model::allocate_weights(config, dtype, *arena);
    fill_random(config, weights, seed);
    grads = model::allocate_grads(ctx, config, dtype, *arena, trainable);
    lora = model::allocate_lora(config, specs, dtype, *arena);
    fill_lora_random(lora, seed + 1000);
    lora_grads = model::allocate_lora(config, specs, dtype, *arena);
    model::zero_lora(ctx, lora_grads);
    decoder = std::make_unique<model::Decoder>(ctx, config, dtype, B, T, *arena, specs,
                                               model::DecoderOptions::plain_head());  // logits() for tests
  }
};

}  // namespace lt::test
