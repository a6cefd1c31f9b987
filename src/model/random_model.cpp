// Tiny random models and batches (see random_model.h). Random draws are Philox streams keyed by purpose, so
// a (seed, arch) pair always gives the same model and a (seed, shape) the same batch.
#include "model/random_model.h"

#include <algorithm>
#include <cmath>

#include "core/philox.h"

namespace lt::model {
namespace {

// An integer in [lo, hi] from stream `stream` of `seed`.
int64_t uniform_int(uint64_t seed, uint64_t stream, uint64_t index, int64_t lo, int64_t hi) {
  const double u = philox_uniform_double(seed, stream, index);
  return std::min(hi, lo + int64_t(u * double(hi - lo + 1)));
}

}  // namespace

ModelConfig tiny_random_config(Architecture arch, uint64_t seed) {
  ModelConfig c;
  c.arch = arch;
  const int64_t kv_heads = uniform_int(seed, 1, 0, 1, 2);
  const int64_t group = uniform_int(seed, 1, 1, 1, 2);
  c.num_kv_heads = kv_heads;
  c.num_heads = kv_heads * group;
  c.head_dim = 2 * uniform_int(seed, 1, 2, 1, 3);  // even, 2..6
  c.hidden_size = 4 * uniform_int(seed, 1, 3, 1, 3);
  c.intermediate_size = c.hidden_size + 2 * uniform_int(seed, 1, 4, 1, 4);
  c.vocab_size = uniform_int(seed, 1, 5, 7, 29);
  c.num_layers = 2;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  switch (arch) {
    case Architecture::Llama:
      c.architecture_name = "LlamaForCausalLM";
      c.model_type = "llama";
      c.tie_word_embeddings = uniform_int(seed, 1, 6, 0, 1) == 1;
      c.o_bias = c.qkv_bias = c.mlp_bias = uniform_int(seed, 1, 7, 0, 1) == 1;
      c.rope_theta = 500.0;
      c.rope_type = ops::RopeType::Llama3;
      c.rope_factor = 4.0;
      c.rope_original_max_position = 16;
      break;
    case Architecture::Qwen2:
      c.architecture_name = "Qwen2ForCausalLM";
      c.model_type = "qwen2";
      c.tie_word_embeddings = true;
      c.qkv_bias = true;
      c.rope_theta = 1000000.0;
      c.layer_window = {0, uniform_int(seed, 1, 8, 2, 5)};  // use_sliding_window on the upper layers
      break;
    case Architecture::Qwen3:
      c.architecture_name = "Qwen3ForCausalLM";
      c.model_type = "qwen3";
      c.block.qk_norm = true;
      c.tie_word_embeddings = uniform_int(seed, 1, 6, 0, 1) == 1;
      c.o_bias = c.qkv_bias = uniform_int(seed, 1, 7, 0, 1) == 1;
      c.rope_theta = 1000000.0;
      c.layer_window = {0, uniform_int(seed, 1, 8, 2, 5)};
      break;
    case Architecture::Phi3: {
      c.architecture_name = "Phi3ForCausalLM";
      c.model_type = "phi3";
      c.block.fused_qkv = c.block.fused_gate_up = true;
      c.block.rotary_dim = c.head_dim > 2 ? c.head_dim - 2 : 0;  // partial rotary (Phi-4-mini's kind)
      c.tie_word_embeddings = uniform_int(seed, 1, 6, 0, 1) == 1;
      c.rope_theta = 10000.0;
      const int64_t window = uniform_int(seed, 1, 8, 1, 5);  // 1 stands for none (Phi-3-mini-4k has one)
      c.layer_window.assign(2, window == 1 ? 0 : window);
      break;
    }
    case Architecture::Gemma2: {
      c.architecture_name = "Gemma2ForCausalLM";
      c.model_type = "gemma2";
      c.block = BlockSpec{.norm = NormKind::RmsOnePlus,
                          .mlp = MlpKind::GeGlu,
                          .embedding_scale = std::sqrt(double(c.hidden_size)),
                          .logit_softcap = 2.0 + double(uniform_int(seed, 1, 9, 0, 3)),  // bends the logits
                          .post_norms = true,
                          .attention_softcap = 1.0 + double(uniform_int(seed, 1, 10, 0, 3)),
                          .query_pre_attn_scalar = double(uniform_int(seed, 1, 11, 2, 9))};
      c.tie_word_embeddings = true;
      c.rope_theta = 10000.0;
      c.layer_window = {uniform_int(seed, 1, 8, 2, 5), 0};  // sliding, then global
      break;
    }
    case Architecture::Gemma3: {
      // Gemma 3: q/k norms, no soft-caps, a sliding layer with the local RoPE base, then a global one with
      // another base and linear scaling.
      c.architecture_name = "Gemma3ForCausalLM";
      c.model_type = "gemma3_text";
      c.block = BlockSpec{.norm = NormKind::RmsOnePlus,
                          .mlp = MlpKind::GeGlu,
                          .qk_norm = true,
                          .embedding_scale = std::sqrt(double(c.hidden_size)),
                          .post_norms = true,
                          .query_pre_attn_scalar = double(uniform_int(seed, 1, 11, 2, 9))};
      c.tie_word_embeddings = true;
      c.rope_theta = 1000000.0;
      c.rope_type = ops::RopeType::Linear;
      c.rope_factor = double(uniform_int(seed, 1, 9, 2, 8));
      c.rope_local_theta = 10000.0;
      c.layer_local_rope = {1, 0};
      c.layer_window = {uniform_int(seed, 1, 8, 2, 5), 0};
      break;
    }
    case Architecture::Bloom:
      c.architecture_name = "BloomForCausalLM";
      c.model_type = "bloom";
      c.block = BlockSpec{.norm = NormKind::LayerNormBias,
                          .mlp = MlpKind::Gelu,
                          .positions = PositionKind::Alibi,
                          .fused_qkv = true,
                          .embedding_norm = true};
      c.num_heads = c.num_kv_heads = kv_heads * group + 1;  // 2, 3 or 5: non-power-of-two ALiBi slopes too
      c.hidden_size = c.num_heads * c.head_dim;
      c.intermediate_size = 4 * c.hidden_size;
      c.qkv_bias = c.o_bias = c.mlp_bias = true;
      c.tie_word_embeddings = uniform_int(seed, 1, 6, 0, 1) == 1;
      break;
    case Architecture::Mistral:
      c.architecture_name = "MistralForCausalLM";
      c.model_type = "mistral";
      c.rope_theta = 10000.0;
      const int64_t window = uniform_int(seed, 1, 8, 2, 5);
      c.layer_window = {window, window};
      break;
  }
  return c;
}

void fill_weights_uniform(const ModelConfig& config, ModelWeights& w, uint64_t seed) {
  std::vector<WeightSpec> specs = weight_specs(config);
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor& t = weight_of(w, specs[i]);
    const bool norm = specs[i].shape.size() == 1 && specs[i].hf_name.find("norm") != std::string::npos;
    const double scale = specs[i].shape.size() == 2 ? 1.5 / std::sqrt(double(specs[i].shape[1])) : 0.5;
    std::vector<double> v(size_t(t.numel()));  // (numel) the tensor's values in double
    for (size_t j = 0; j < v.size(); ++j) {
      const double u = 2.0 * philox_uniform_double(seed, 100 + i, j) - 1.0;
      v[j] = norm ? 1.0 + 0.3 * u : scale * u;
    }
    convert_elements(t.data, t.dtype, v.data(), DType::F64, v.size());
  }
}

Batch RandomBatch::batch() {
  return {.input_ids = Tensor(ids.data(), DType::I32, {rows, tokens}),
          .positions = Tensor(positions.data(), DType::I32, {rows, tokens}),
          .segments = segments.empty() ? Tensor() : Tensor(segments.data(), DType::I32, {rows, tokens}),
          .labels = Tensor(labels.data(), DType::I32, {rows, tokens})};
}

RandomBatch random_batch(int64_t rows, int64_t tokens, int64_t vocab, bool packed, uint64_t seed) {
  RandomBatch r;
  r.rows = rows;
  r.tokens = tokens;
  const size_t n = size_t(rows * tokens);
  r.ids.assign(n, 0);
  r.positions.assign(n, 0);
  r.labels.assign(n, -100);
  if (packed) r.segments.assign(n, 0);
  for (int64_t b = 0; b < rows; ++b) {
    // Row 0 is full length, so that the longest row spans every chunk.
    const int64_t length = b == 0 ? tokens : uniform_int(seed, 2, uint64_t(b), 1, tokens);
    const int64_t prompt = uniform_int(seed, 3, uint64_t(b), 0, length / 3);
    int64_t segment = 0, start = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      const size_t i = size_t(b * tokens + t);
      if (packed && t > start && t < length && uniform_int(seed, 4, i, 0, 4) == 0 && segment < 2) {
        ++segment;
        start = t;
      }
      if (packed) r.segments[i] = int32_t(t < length ? segment : segment + 1);  // padding: its own segment
      r.positions[i] = int32_t(t < length ? t - start : t - length);
      if (t >= length) continue;  // padding: id 0, label -100
      r.ids[i] = int32_t(uniform_int(seed, 5, i, 0, vocab - 1));
      r.labels[i] = t < prompt ? -100 : r.ids[i];
    }
  }
  return r;
}

}  // namespace lt::model
