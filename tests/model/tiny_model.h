// A tiny model for whole-model tests that need no files: every optional feature on (q/k/v/o and MLP biases,
// GQA with H * HD != D, llama3 RoPE, a sliding window in layer 1) and random weights far from HF's tiny init,
// so every part of the computation matters. Batches include packing (segments) and ignored labels.
#pragma once

#include <cstdint>
#include <vector>

#include "core/philox.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/weights.h"

namespace lt::test {

inline model::ModelConfig tiny_config(bool tied) {
  model::ModelConfig c;
  c.arch = model::Architecture::Llama;
  c.architecture_name = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 11;         // V
  c.hidden_size = 8;         // D
  c.intermediate_size = 12;  // F
  c.num_layers = 2;
  c.num_heads = 4;     // H
  c.num_kv_heads = 2;  // KVH
  c.head_dim = 6;      // HD: H * HD = 24 != D
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.rope_theta = 100.0;
  c.rope_type = ops::RopeType::Llama3;
  c.rope_factor = 4.0;
  c.rope_original_max_position = 16;
  c.layer_window = {0, 3};
  return c;
}

// Every weight uniform in a range that keeps activations O(1); norm weights around 1.
inline void fill_random(const model::ModelConfig& config, model::ModelWeights& w, uint64_t seed) {
  std::vector<model::WeightSpec> specs = model::weight_specs(config);
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor& t = model::weight_of(w, specs[i]);
    const bool norm = specs[i].shape.size() == 1 && specs[i].hf_name.find("norm") != std::string::npos;
    const double scale = specs[i].shape.size() == 2 ? 1.5 / std::sqrt(double(specs[i].shape[1])) : 0.5;
    std::vector<double> v(size_t(t.numel()));
    for (size_t j = 0; j < v.size(); ++j) {
      double u = 2.0 * philox_uniform_double(seed, i, j) - 1.0;
      v[j] = norm ? 1.0 + 0.3 * u : scale * u;
    }
    convert_elements(t.data, t.dtype, v.data(), DType::F64, v.size());
  }
}

// Two rows of T = 7: row 0 packs two sequences (positions restart), row 1 is one sequence with a prompt.
struct TinyBatch {
  static constexpr int64_t B = 2, T = 7;
  std::vector<int32_t> ids{3, 7, 1, 9, 4, 10, 2, 5, 0, 8, 6, 2, 9, 1};
  std::vector<int32_t> positions{0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4, 5, 6};
  std::vector<int32_t> segments{0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  std::vector<int32_t> labels{3, 7, 1, 9, -100, 10, 2, -100, -100, 8, 6, 2, 9, 1};

  model::Batch batch(bool packed = true) {
    return {.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
            .positions = Tensor(positions.data(), DType::I32, {B, T}),
            .segments = packed ? Tensor(segments.data(), DType::I32, {B, T}) : Tensor(),
            .labels = Tensor(labels.data(), DType::I32, {B, T})};
  }
};

}  // namespace lt::test
