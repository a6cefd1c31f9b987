// BLOOM as GGUF (gguf_export.h): llama.cpp's "bloom" layout (ALiBi, LayerNorms with biases, the fused
// attn_qkv) and its BPE vocabulary.
#include <fmt/format.h>

#include <filesystem>

#include "cli/gguf_export.h"
#include "cli/gguf_tensors.h"
#include "core/error.h"
#include "core/json_read.h"

namespace lt::cli {
namespace {
namespace fs = std::filesystem;

// BLOOM's pre-tokenizer regex (tokenizer.json's Split pattern), which llama.cpp knows as "bloom".
constexpr const char* kBloomPattern = " ?[^(\\s|[.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C])]+";

// The converter's BloomModel context length: config.json's seq_length, else hidden_size (bloom-560m's
// config.json has no seq_length; ALiBi puts no limit in the weights).
int64_t converter_context_length(const std::string& model_dir, const model::ModelConfig& config) {
  const nlohmann::json j = read_json((fs::path(model_dir) / "config.json").string(), kMaxSmallJsonBytes);
  if (j.contains("seq_length") && j["seq_length"].is_number_integer()) return j["seq_length"].get<int64_t>();
  return config.hidden_size;
}

// Rows q, then k, then v of the parts (the engine's order, and the one the converter re-orders BLOOM's
// per-head interleave [H, 3, HD] into): (3D, D) for the weights, (3D) for the biases.
std::vector<float> qkv_rows(const Tensor& q, const Tensor& k, const Tensor& v) {
  std::vector<float> out;
  for (const Tensor* part : {&q, &k, &v}) {
    const float* x = part->ptr<float>("attn_qkv");
    out.insert(out.end(), x, x + part->numel());
  }
  return out;
}

}  // namespace

void check_bloom_exportable(const std::string& model_dir) {
  LT_CHECK(fs::exists(fs::path(model_dir) / "tokenizer.json"),
           "export --gguf: {} has no tokenizer.json; a BLOOM GGUF needs its BPE vocabulary", model_dir);
  const std::string pattern = tokenizer_split_regex(model_dir);
  LT_CHECK(
      pattern == kBloomPattern,
      "export --gguf: {}/tokenizer.json: its pre-tokenizer (Split regex '{}') is not BLOOM's; a BLOOM GGUF "
      "is written with BLOOM's BPE tokenizer (llama.cpp's pre-tokenizer \"bloom\")",
      model_dir, pattern);
}

void write_bloom_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                      const model::ModelWeights& weights, io::GgmlType type) {
  check_bloom_exportable(model_dir);
  io::GgufWriter w;
  w.add_string("general.architecture", "bloom");
  w.add_string("general.name", fs::path(model_dir).lexically_normal().filename().string());
  w.add_u32("general.file_type", file_type_of(type));
  w.add_u32("general.quantization_version", 2);  // GGML_QUANT_VERSION
  w.add_u32("bloom.context_length", uint32_t(converter_context_length(model_dir, config)));
  w.add_u32("bloom.embedding_length", uint32_t(config.hidden_size));
  w.add_u32("bloom.feed_forward_length", uint32_t(config.intermediate_size));  // 4 D
  w.add_u32("bloom.block_count", uint32_t(config.num_layers));
  w.add_u32("bloom.attention.head_count", uint32_t(config.num_heads));
  w.add_u32("bloom.attention.head_count_kv", uint32_t(config.num_heads));
  w.add_f32("bloom.attention.layer_norm_epsilon", float(config.rms_norm_eps));
  add_bpe_tokenizer(w, model_dir, config, "bloom");

  const int64_t D = config.hidden_size;
  TensorAdder t(w, type);
  t.add("token_embd.weight", weights.embed);
  t.add("token_embd_norm.weight", weights.embed_norm);
  t.add("token_embd_norm.bias", weights.embed_norm_bias);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const model::LayerWeights& layer = weights.layers[size_t(l)];
    const std::string blk = fmt::format("blk.{}.", l);
    t.add(blk + "attn_norm.weight", layer.attn_norm);
    t.add(blk + "attn_norm.bias", layer.attn_norm_bias);
    const std::vector<float> qkv = qkv_rows(layer.attn_q, layer.attn_k, layer.attn_v);  // (3D, D)
    t.add(blk + "attn_qkv.weight", qkv.data(), {3 * D, D});
    const std::vector<float> qkv_bias =
        qkv_rows(layer.attn_q_bias, layer.attn_k_bias, layer.attn_v_bias);  // (3D)
    t.add(blk + "attn_qkv.bias", qkv_bias.data(), {3 * D});
    t.add(blk + "attn_output.weight", layer.attn_o);
    t.add(blk + "attn_output.bias", layer.attn_o_bias);
    t.add(blk + "ffn_norm.weight", layer.ffn_norm);
    t.add(blk + "ffn_norm.bias", layer.ffn_norm_bias);
    t.add(blk + "ffn_up.weight", layer.ffn_up);
    t.add(blk + "ffn_up.bias", layer.ffn_up_bias);
    t.add(blk + "ffn_down.weight", layer.ffn_down);
    t.add(blk + "ffn_down.bias", layer.ffn_down_bias);
  }
  t.add("output_norm.weight", weights.final_norm);
  t.add("output_norm.bias", weights.final_norm_bias);
  if (!config.tie_word_embeddings) t.add("output.weight", weights.lm_head);
  w.write(path);
}

}  // namespace lt::cli
