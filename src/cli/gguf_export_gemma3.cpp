// Gemma 3 (text) as GGUF (gguf_export.h): llama.cpp's "gemma3" layout, every RMSNorm weight shifted by one
// (q_norm and k_norm included), and the SentencePiece vocabulary.
#include <filesystem>

#include "cli/gguf_export.h"
#include "cli/gguf_tensors.h"
#include "core/error.h"

namespace lt::cli {

namespace fs = std::filesystem;

// llama.cpp's gemma3 hard-codes what the file does not say: five sliding layers then one global layer (swa
// pattern 6), the sliding layers' RoPE base 10000 unscaled (rope.freq_base and the linear scaling are the
// global layers'), no soft-capping (the converter writes neither cap), no biases, and attention scores scaled
// by head_dim^-0.5, or (hidden_size / heads)^-0.5 for its 62-layer (27B) model, where HF scales by
// query_pre_attn_scalar^-0.5. The converter drops nothing for an untied head, so only tied models are
// written. A model that differs would load and run differently than it was trained: refused, naming the
// field.
void check_gemma3_exportable(const model::ModelConfig& c) {
  LT_CHECK(!c.qkv_bias && !c.o_bias,
           "export --gguf: Gemma 3 with attention_bias true: llama.cpp's gemma3 has no attention biases");
  LT_CHECK(
      c.tie_word_embeddings,
      "export --gguf: Gemma 3 with tie_word_embeddings false: an untied Gemma 3 head is not written to GGUF "
      "yet (llama.cpp's gemma3 falls back to the embeddings without an output tensor)");
  LT_CHECK(c.rope_type == ops::RopeType::Default || c.rope_type == ops::RopeType::Linear,
           "export --gguf: Gemma 3 with RoPE type '{}': llama.cpp's gemma3 scales the global layers' RoPE "
           "linearly or not at all",
           model::rope_type_name(c.rope_type));
  LT_CHECK(
      c.rope_local_theta == 10000.0,
      "export --gguf: Gemma 3 with rope_local_base_freq {}: llama.cpp's gemma3 rotates the sliding layers "
      "with base 10000 (the converter writes only the global rope_theta)",
      c.rope_local_theta);
  LT_CHECK(c.block.attention_softcap == 0 && c.block.logit_softcap == 0,
           "export --gguf: Gemma 3 with attn_logit_softcapping {} / final_logit_softcapping {}: llama.cpp's "
           "gemma3 soft-caps neither (expected null)",
           c.block.attention_softcap, c.block.logit_softcap);
  const int64_t window = c.window_for_layer(0);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool sliding = l % 6 != 5;
    LT_CHECK(
        c.window_for_layer(l) == (sliding ? window : 0) && window > 0 && c.local_rope_for_layer(l) == sliding,
        "export --gguf: Gemma 3 whose layer {} has sliding window {}: llama.cpp's gemma3 slides five "
        "layers of every six by one window (sliding_window, layer_types \"sliding_attention\" except "
        "every sixth \"full_attention\") and not the sixth",
        l, c.window_for_layer(l));
  }
  const double llama_cpp_scalar =
      c.num_layers == 62 ? double(c.hidden_size / c.num_heads) : double(c.head_dim);
  LT_CHECK(
      c.block.query_pre_attn_scalar == llama_cpp_scalar,
      "export --gguf: Gemma 3 with query_pre_attn_scalar {}: llama.cpp's gemma3 scales attention by {}^-0.5 "
      "(head_dim, or hidden_size / num_attention_heads for 62 layers) and reads no such key",
      c.block.query_pre_attn_scalar, llama_cpp_scalar);
}

void write_gemma3_gguf(const std::string& path, const std::string& model_dir,
                       const model::ModelConfig& config, const model::ModelWeights& weights,
                       io::GgmlType type) {
  check_gemma3_exportable(config);
  io::GgufWriter w;
  w.add_string("general.architecture", "gemma3");
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32("gemma3.context_length", uint32_t(config.max_position_embeddings));
  w.add_u32("gemma3.embedding_length", uint32_t(config.hidden_size));
  w.add_u32("gemma3.block_count", uint32_t(config.num_layers));
  w.add_u32("gemma3.feed_forward_length", uint32_t(config.intermediate_size));
  w.add_u32("gemma3.attention.head_count", uint32_t(config.num_heads));
  w.add_f32("gemma3.attention.layer_norm_rms_epsilon", float(config.rms_norm_eps));
  w.add_u32("gemma3.attention.key_length", uint32_t(config.head_dim));
  w.add_u32("gemma3.attention.value_length", uint32_t(config.head_dim));
  w.add_f32("gemma3.rope.freq_base", float(config.rope_theta));  // the global layers'
  w.add_u32("gemma3.attention.sliding_window", uint32_t(config.window_for_layer(0)));
  w.add_u32("gemma3.attention.head_count_kv", uint32_t(config.num_kv_heads));
  if (config.rope_type == ops::RopeType::Linear) {  // llama.cpp, like HF, scales only the global layers
    w.add_string("gemma3.rope.scaling.type", "linear");
    w.add_f32("gemma3.rope.scaling.factor", float(config.rope_factor));
  }
  add_sentencepiece_tokenizer(w, model_dir, config);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);  // Gemma3Model.set_vocab

  add_gemma_tensors(w, type, config, weights);  // q_norm / k_norm plus 1 as well
  w.write(path);
}

}  // namespace lt::cli
