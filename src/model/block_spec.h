// BlockSpec: one decoder block described by data. Each architecture file (model/arch/) fills one from its
// config.json; the block code (layer_forward.cpp, layer_backward.cpp, lm_loss.cpp) switches on it at op
// calls, never inside kernels. Every choice a known architecture family makes is an enum value here; the
// values whose ops have not landed yet are refused when the config is loaded (check_block_supported), so a
// model that needs one is told "not supported yet" instead of being computed wrongly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lt::model {

enum class NormKind : uint8_t {
  Rms,           // x / rms(x) * w (Llama, Qwen2, Mistral)
  RmsOnePlus,    // x / rms(x) * (1 + w) (Gemma)
  LayerNormBias  // (x - mean) / std * w + b (BLOOM, Phi)
};
enum class MlpKind : uint8_t {
  SwiGlu,  // down(silu(gate(x)) * up(x))
  GeGlu,   // down(gelu(gate(x)) * up(x))
  Gelu     // down(gelu(up(x))), no gate
};
enum class PositionKind : uint8_t {
  Rope,   // rotary embeddings on q and k (rotary_dim of head_dim, scaling in ModelConfig's rope fields)
  Alibi,  // linear biases on the attention scores
  None
};
enum class ResidualKind : uint8_t {
  Sequential,  // mid = x + attn(norm1(x)); out = mid + mlp(norm2(mid))
  Parallel     // out = x + attn(norm(x)) + mlp(norm(x))
};

struct BlockSpec {
  NormKind norm = NormKind::Rms;
  MlpKind mlp = MlpKind::SwiGlu;
  PositionKind positions = PositionKind::Rope;
  int64_t rotary_dim = 0;  // RoPE: the leading dims of each head that rotate; 0 = all of head_dim
  ResidualKind residual = ResidualKind::Sequential;
  // q and k each normalized per head (an RMSNorm over head_dim with its own (HD) weight) before positions
  // (Qwen3's q_norm / k_norm); the norm kind is the block's.
  bool qk_norm = false;
  // Fused projections (Phi-3): one (q+k+v, D) weight and one LoRA module instead of three, one (2F, D)
  // instead of gate and up. The block computes the parts as usual: their weights are row blocks of the fused
  // one (model/weights.h) and a fused adapter is one A shared by the parts with B split by rows (lora.h).
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // A LayerNorm (the block's norm kind) of the token embeddings before the first layer, with its own weights
  // (BLOOM's word_embeddings_layernorm).
  bool embedding_norm = false;
  // The biases (q/k/v, o, MLP) are ModelConfig's qkv_bias / o_bias / mlp_bias: they decide tensor shapes
  // everywhere a weight is listed, and the architecture file sets them from its keys.
  double embedding_scale = 1.0;  // embeddings multiplied by this (Gemma: sqrt(D)); 1 = none
  double logit_softcap = 0.0;    // logits = c * tanh(logits / c); 0 = none
  // Gemma 2's sandwich norms: the attention output (after o_proj) and the MLP output (after down_proj) each
  // pass their own norm before the residual add (post_attention_layernorm, post_feedforward_layernorm).
  bool post_norms = false;
  double attention_softcap =
      0.0;  // attention scores = c * tanh(scores / c) (attn_logit_softcapping); 0 = none
  // The attention scores are scaled by query_pre_attn_scalar^-0.5 (Gemma); 0 = by head_dim^-0.5.
  double query_pre_attn_scalar = 0.0;
};

std::string_view norm_kind_name(NormKind k);          // "rms", "rms(1+w)", "layernorm+bias"
std::string_view mlp_kind_name(MlpKind k);            // "swiglu", "geglu", "gelu"
std::string_view position_kind_name(PositionKind k);  // "rope", "alibi", "none"
std::string_view residual_kind_name(ResidualKind k);  // "sequential", "parallel"

// One line: "rms norm, swiglu MLP, rope positions, sequential residual".
std::string describe_block(const BlockSpec& spec);

// Throws lt::Error "<source>: <choice> is not supported yet" for a choice whose ops have not landed (today:
// the parallel residual and no positions).
void check_block_supported(const BlockSpec& spec, int64_t head_dim, const std::string& source);

}  // namespace lt::model
