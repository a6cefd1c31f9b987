// The architecture registry: one file per architecture (llama.cpp, qwen2.cpp, mistral.cpp, qwen3.cpp,
// phi3.cpp) says what its config.json keys mean that the shared reader (model/config.cpp) does not, which HF
// tensor names its checkpoints use and its BlockSpec. Adding an architecture is adding such a file, its
// Architecture value and its line in registry.cpp (plus any op its BlockSpec needs that has not landed).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "model/config.h"
#include "model/config_fields.h"
#include "model/proj_id.h"

namespace lt::model {

// The HF names of a model's tensors: "<embed>", "<layer_prefix><l>.<part>.weight" and ".bias" per layer
// tensor, "<final_norm>", "<lm_head>".
struct HfTensorNames {
  const char* embed;          // "model.embed_tokens.weight"
  const char* layer_prefix;   // "model.layers."
  const char* attn_norm;      // "input_layernorm"
  const char* ffn_norm;       // "post_attention_layernorm"
  const char* q_norm;         // "self_attn.q_norm" (BlockSpec::qk_norm only)
  const char* k_norm;         // "self_attn.k_norm"
  PerProj<const char*> proj;  // "self_attn.q_proj" ... "mlp.down_proj"
  // Fused projections (BlockSpec::fused_qkv / fused_gate_up, read only then): one module and one weight for
  // q, k and v (rows q, then k, then v) and one for gate and up (rows gate, then up); nullptr: none.
  const char* qkv = nullptr;      // "self_attn.qkv_proj"
  const char* gate_up = nullptr;  // "mlp.gate_up_proj"
  // BlockSpec::post_norms (Gemma): the norms of the attention and MLP outputs; nullptr: none.
  const char* attn_post_norm = nullptr;  // "post_attention_layernorm"
  const char* ffn_post_norm = nullptr;   // "post_feedforward_layernorm"
  const char* final_norm;                // "model.norm.weight"
  const char* lm_head;                   // "lm_head.weight"
  // BlockSpec::embedding_norm's module ("<embed_norm>.weight" / ".bias") and, with LayerNorm's bias, the
  // final norm's bias; nullptr: none.
  const char* embed_norm = nullptr;       // "transformer.word_embeddings_layernorm"
  const char* final_norm_bias = nullptr;  // "transformer.ln_f.bias"
};

struct ArchitectureDef {
  Architecture arch;
  const char* class_name;  // config.json's "architectures" entry: "LlamaForCausalLM"
  const char* model_type;  // "llama"
  // The transformers config class's defaults for keys the shared reader takes.
  int64_t default_max_position;  // max_position_embeddings
  int64_t default_kv_heads;      // num_key_value_heads absent: this many; 0 = num_attention_heads
  bool default_bos_eos;          // bos_token_id / eos_token_id absent: 1 and 2 (else none)
  int64_t default_head_dim;      // head_dim absent: this many; 0 = hidden_size / num_attention_heads
  const HfTensorNames* names;
  // The block (cfg.block, the biases) and the per-layer sliding windows from the file; cfg's sizes
  // (num_layers, head_dim, ...) are read already.
  void (*read_block)(const FieldReader& r, const std::string& source, ModelConfig& cfg);
  // partial_rotary_factor < 1 (the leading dims of each head rotate) is this family's (Phi-3); refused
  // elsewhere, where transformers' attention rotates the whole head.
  bool partial_rotary = false;
  // eos_token_id absent: this id when default_bos_eos (LlamaConfig: 2; Phi3Config: 32000).
  int64_t default_eos = 2;
  // bos_token_id absent: this id when default_bos_eos (LlamaConfig: 1; Gemma2Config: 2).
  int64_t default_bos = 1;
  // The family's own spelling of the sizes (BLOOM: n_layer, n_head, n_embed; no intermediate_size): reads
  // vocab, hidden, intermediate, layers, heads, kv heads, head_dim, max positions, the norm epsilon and tying
  // instead of the shared reader. nullptr: the shared (Llama) keys.
  void (*read_sizes)(const FieldReader& r, const std::string& source, ModelConfig& cfg) = nullptr;
  // The checkpoint's fused query_key_value rows are interleaved per head, [H, 3, HD] (BLOOM), where the
  // engine holds [3, H, HD] (q rows, then k, then v): model/hf_layout.h converts at the HF boundary.
  bool qkv_interleaved_per_head = false;
  // The family's own RoPE keys (Gemma 3: a local and a global RoPE) instead of the shared reader's.
  void (*read_rope)(const FieldReader& r, const std::string& source, ModelConfig& cfg) = nullptr;
};

// Every registered architecture, in the order they are listed to users.
std::span<const ArchitectureDef* const> architectures();
const ArchitectureDef& architecture_def(Architecture arch);
// "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM" / "llama, qwen2, mistral".
std::string supported_class_names();
std::string supported_model_types();

// The HF names shared by the Llama family (Llama, Qwen2, Mistral, Qwen3; Phi-3 with its fused names).
extern const HfTensorNames kLlamaTensorNames;
// Gemma 2's names (sandwich norms, pre_feedforward_layernorm), also Gemma 3's.
extern const HfTensorNames kGemma2TensorNames;
// hidden_act of a gated MLP: "silu" is SwiGLU; GELU variants are GeGLU (refused until its op lands).
MlpKind gated_mlp_from_hidden_act(const FieldReader& r, const std::string& source);

extern const ArchitectureDef kLlamaArchitecture;
extern const ArchitectureDef kQwen2Architecture;
extern const ArchitectureDef kMistralArchitecture;
extern const ArchitectureDef kQwen3Architecture;
extern const ArchitectureDef kPhi3Architecture;
extern const ArchitectureDef kGemma2Architecture;
extern const ArchitectureDef kBloomArchitecture;
extern const ArchitectureDef kGemma3Architecture;

// Qwen2Config's (and Qwen3Config's) sliding windows: use_sliding_window, then layer_types or
// max_window_layers.
void read_qwen2_windows(const FieldReader& r, const std::string& source, ModelConfig& cfg);

}  // namespace lt::model
