// Gemma 2 as GGUF (gguf_export.h): llama.cpp's "gemma2" layout, its RMSNorm weights shifted by one, and the
// SentencePiece vocabulary.
#include <fmt/format.h>

#include <filesystem>

#include "cli/gguf_export.h"
#include "cli/gguf_tensors.h"
#include "core/error.h"

namespace lt::cli {

namespace fs = std::filesystem;

// llama.cpp's gemma2 hard-codes what the file does not say: RoPE base 10000 (no rope.freq_base is written),
// soft-capping always on, sliding windows on the even layers (swa pattern 2), no biases, the head tied to the
// embedding, and attention scores scaled by head_dim^-0.5, or (hidden_size / heads)^-0.5 for its 46-layer
// (27B) model, where HF scales by query_pre_attn_scalar^-0.5. A model that differs would load and run
// differently than it was trained, so it is refused, naming the field.
void check_gemma2_exportable(const model::ModelConfig& c) {
  LT_CHECK(!c.qkv_bias && !c.o_bias,
           "export --gguf: Gemma 2 with attention_bias true: llama.cpp's gemma2 has no attention biases");
  LT_CHECK(c.tie_word_embeddings,
           "export --gguf: Gemma 2 with tie_word_embeddings false: llama.cpp's gemma2 ties the output to the "
           "embeddings (the converter drops lm_head)");
  LT_CHECK(c.rope_type == ops::RopeType::Default && c.rope_theta == 10000.0,
           "export --gguf: Gemma 2 with RoPE type '{}' and rope_theta {}: llama.cpp's gemma2 runs RoPE with "
           "the default type and base 10000 (the converter writes no rope.freq_base)",
           model::rope_type_name(c.rope_type), c.rope_theta);
  LT_CHECK(
      c.block.attention_softcap > 0 && c.block.logit_softcap > 0,
      "export --gguf: Gemma 2 with a null attn_logit_softcapping or final_logit_softcapping: llama.cpp's "
      "gemma2 always soft-caps (its defaults 50 and 30 would apply)");
  const int64_t window = c.window_for_layer(0);
  for (int64_t l = 0; l < c.num_layers; ++l)
    LT_CHECK(
        c.window_for_layer(l) == (l % 2 == 0 ? window : 0) && window > 0,
        "export --gguf: Gemma 2 whose layer {} has sliding window {}: llama.cpp's gemma2 slides the even "
        "layers by one window (sliding_window, layer_types alternating from \"sliding_attention\") and "
        "not the odd ones",
        l, c.window_for_layer(l));
  const double llama_cpp_scalar =
      c.num_layers == 46 ? double(c.hidden_size / c.num_heads) : double(c.head_dim);
  LT_CHECK(
      c.block.query_pre_attn_scalar == llama_cpp_scalar,
      "export --gguf: Gemma 2 with query_pre_attn_scalar {}: llama.cpp's gemma2 scales attention by {}^-0.5 "
      "(head_dim, or hidden_size / num_attention_heads for 46 layers) and reads no such key",
      c.block.query_pre_attn_scalar, llama_cpp_scalar);
}

// HF's Gemma RMSNorm multiplies by (1 + w), llama.cpp's by w: the converter adds 1 in float32 to every
// "*norm.weight" (Gemma 3's per-head q_norm / k_norm too).
void add_gemma_tensors(io::GgufWriter& w, io::GgmlType type, const model::ModelConfig& config,
                       const model::ModelWeights& weights) {
  TensorAdder t(w, type);
  auto add_norm = [&t](const std::string& name, const Tensor& norm) {
    const float* x = norm.ptr<float>(name);
    std::vector<float> shifted(x, x + norm.numel());  // (D) or (HD)
    for (float& v : shifted) v += 1.0f;
    t.add(name, shifted.data(), {norm.numel()});
  };
  t.add("token_embd.weight", weights.embed);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const model::LayerWeights& layer = weights.layers[size_t(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    add_norm(blk + "attn_norm.weight", layer.attn_norm);
    // Q and K as stored: llama.cpp runs Gemma's RoPE in HF's NEOX (rotate-half) layout.
    t.add(blk + "attn_q.weight", layer.attn_q);
    t.add(blk + "attn_k.weight", layer.attn_k);
    t.add(blk + "attn_v.weight", layer.attn_v);
    if (config.block.qk_norm) {  // Gemma 3
      add_norm(blk + "attn_q_norm.weight", layer.attn_q_norm);
      add_norm(blk + "attn_k_norm.weight", layer.attn_k_norm);
    }
    t.add(blk + "attn_output.weight", layer.attn_o);
    add_norm(blk + "post_attention_norm.weight", layer.attn_post_norm);
    add_norm(blk + "ffn_norm.weight", layer.ffn_norm);
    t.add(blk + "ffn_gate.weight", layer.ffn_gate);
    t.add(blk + "ffn_up.weight", layer.ffn_up);
    t.add(blk + "ffn_down.weight", layer.ffn_down);
    add_norm(blk + "post_ffw_norm.weight", layer.ffn_post_norm);
  }
  add_norm("output_norm.weight", weights.final_norm);
}

void write_gemma2_gguf(const std::string& path, const std::string& model_dir,
                       const model::ModelConfig& config, const model::ModelWeights& weights,
                       io::GgmlType type) {
  check_gemma2_exportable(config);
  io::GgufWriter w;
  w.add_string("general.architecture", "gemma2");
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32("gemma2.context_length", uint32_t(config.max_position_embeddings));
  w.add_u32("gemma2.embedding_length", uint32_t(config.hidden_size));
  w.add_u32("gemma2.block_count", uint32_t(config.num_layers));
  w.add_u32("gemma2.feed_forward_length", uint32_t(config.intermediate_size));
  w.add_u32("gemma2.attention.head_count", uint32_t(config.num_heads));
  w.add_u32("gemma2.attention.head_count_kv", uint32_t(config.num_kv_heads));
  w.add_f32("gemma2.attention.layer_norm_rms_epsilon", float(config.rms_norm_eps));
  w.add_u32("gemma2.attention.key_length", uint32_t(config.head_dim));
  w.add_u32("gemma2.attention.value_length", uint32_t(config.head_dim));
  w.add_f32("gemma2.attn_logit_softcapping", float(config.block.attention_softcap));
  w.add_f32("gemma2.final_logit_softcapping", float(config.block.logit_softcap));
  w.add_u32("gemma2.attention.sliding_window", uint32_t(config.window_for_layer(0)));
  add_sentencepiece_tokenizer(w, model_dir, config);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);  // Gemma2Model.set_vocab

  add_gemma_tensors(w, type, config, weights);
  w.write(path);
}

}  // namespace lt::cli
