// The model's parameters in one compute dtype, as views into an Arena, and the table that names each one
// (its HF tensor name, its shape). The same ModelWeights type holds the gradients: a gradient tensor exists
// only for a trainable weight, an empty Tensor marks a frozen one (ops skip empty optional outputs), so full
// and partial fine-tuning share one decoder. LoRA adapters will sit beside these (model/lora.h), not in them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/config.h"
#include "ops/context.h"

namespace lt::model {

// One weight of a decoder layer or of the model; biases are their own kinds (present as the config says).
enum class WeightKind : uint8_t {
  Embed,
  AttnNorm,
  AttnQ,
  AttnQBias,
  AttnK,
  AttnKBias,
  AttnV,
  AttnVBias,
  AttnO,
  AttnOBias,
  AttnQNorm,
  AttnKNorm,
  FfnNorm,
  FfnGate,
  FfnGateBias,
  FfnUp,
  FfnUpBias,
  FfnDown,
  FfnDownBias,
  FinalNorm,
  LmHead,
  AttnQkv,    // BlockSpec::fused_qkv: q, k and v as one weight (their LayerWeights tensors are its rows)
  FfnGateUp,  // BlockSpec::fused_gate_up: gate and up as one weight
  // LayerNorm with bias (NormKind::LayerNormBias): the norms' biases, and BlockSpec::embedding_norm's pair.
  AttnNormBias,
  FfnNormBias,
  FinalNormBias,
  EmbedNorm,
  EmbedNormBias,
  AttnQkvBias,   // fused_qkv with qkv biases: q, k and v's biases as one (their LayerWeights biases are its
                 // rows)
  AttnPostNorm,  // BlockSpec::post_norms: the norm of the attention output (Gemma's post_attention_layernorm)
  FfnPostNorm,   // and of the MLP output (post_feedforward_layernorm)
};

struct Nf4Layer;  // model/nf4_weights.h

struct LayerWeights {
  Tensor attn_norm;       // (D)
  Tensor attn_norm_bias;  // (D) LayerNorm's bias, else empty
  Tensor attn_q;          // (H*HD, D)
  Tensor attn_q_bias;     // (H*HD) or empty
  Tensor attn_k;          // (KVH*HD, D)
  Tensor attn_k_bias;     // (KVH*HD) or empty
  Tensor attn_v;          // (KVH*HD, D)
  Tensor attn_v_bias;     // (KVH*HD) or empty
  Tensor attn_o;          // (D, H*HD)
  Tensor attn_o_bias;     // (D) or empty
  Tensor attn_q_norm;     // (HD) per-head q norm (BlockSpec::qk_norm), else empty
  Tensor attn_k_norm;     // (HD) per-head k norm, else empty
  Tensor ffn_norm;        // (D)
  Tensor ffn_norm_bias;   // (D) LayerNorm's bias, else empty
  Tensor ffn_gate;        // (F, D)
  Tensor ffn_gate_bias;   // (F) or empty
  Tensor ffn_up;          // (F, D)
  Tensor ffn_up_bias;     // (F) or empty
  Tensor ffn_down;        // (D, F)
  Tensor ffn_down_bias;   // (D) or empty
  Tensor attn_post_norm;  // (D) BlockSpec::post_norms, else empty
  Tensor ffn_post_norm;   // (D) BlockSpec::post_norms, else empty
  // Fused checkpoints (BlockSpec::fused_qkv / fused_gate_up) hold these and the weight table lists them under
  // their HF names; attn_q/k/v and ffn_gate/up above are then views of their row blocks, so block code,
  // loading and saving see one layout each. Empty otherwise.
  Tensor attn_qkv;       // (H*HD + 2*KVH*HD, D): rows q, then k, then v
  Tensor attn_qkv_bias;  // (H*HD + 2*KVH*HD) with qkv biases, else empty
  Tensor ffn_gate_up;    // (2F, D): rows gate, then up
  // QLoRA: the layer's projection matrices held in 4 bits (their tensors above are then empty); proj.h
  // dequantizes each right before its GEMM. nullptr: dense (and always for gradients).
  const Nf4Layer* nf4 = nullptr;
};

struct ModelWeights {
  DType dtype = DType::F32;
  Tensor embed;                      // (V, D)
  std::vector<LayerWeights> layers;  // L
  Tensor final_norm;                 // (D)
  Tensor final_norm_bias;            // (D) LayerNorm's bias, else empty
  Tensor embed_norm;                 // (D) BlockSpec::embedding_norm's weight, else empty
  Tensor embed_norm_bias;            // (D) and its bias
  Tensor lm_head;                    // (V, D); empty when the embeddings are tied
};

// The LM head's matrix (V, D): lm_head, or the embedding when the config ties them. For gradients, where
// the head's gradient goes (empty when that tensor is frozen).
const Tensor& head_weight(const ModelConfig& config, const ModelWeights& weights);

// One row of the weight table: which tensor, of which layer (-1 for model-level), its HF name and shape.
struct WeightSpec {
  WeightKind kind;
  int64_t layer;
  std::string hf_name;  // "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// Every tensor of the model for this config, in a fixed order (embed, layers in order, norm, lm_head), and
// only those the config has (biases as configured, no lm_head when tied).
std::vector<WeightSpec> weight_specs(const ModelConfig& config);

// `data` (host memory) seen as a tensor of the spec's shape in `dtype`.
Tensor spec_view(const WeightSpec& spec, void* data, DType dtype);

// The tensor of `weights` that `spec` names (an empty Tensor for a frozen gradient).
Tensor& weight_of(ModelWeights& weights, const WeightSpec& spec);
const Tensor& weight_of(const ModelWeights& weights, const WeightSpec& spec);

// Decides which weights train; the default trains everything (full fine-tuning). Also the `present`
// filter of the weights' allocation (QLoRA holds the projections elsewhere, in 4 bits).
using TrainableFn = std::function<bool(const WeightSpec&)>;
bool train_all(const WeightSpec& spec);

// Bytes that allocate_weights takes from an arena (each tensor aligned to 256 bytes, as Arena does).
size_t weights_bytes(const ModelConfig& config, DType dtype, const TrainableFn& present = train_all);
// Refuses, before anything is allocated, weights of `config` in `dtype` larger than the memory of `device`
// (the host: its physical memory; a GPU: its total memory), naming `source` (the model directory) and the
// sizes that make them.
void check_weights_fit(const ModelConfig& config, DType dtype, Device device, const std::string& source);
// The weights of `config` that `present` selects (all by default) in `dtype`, uninitialized; the others are
// empty tensors.
ModelWeights allocate_weights(const ModelConfig& config, DType dtype, Arena& arena,
                              const TrainableFn& present = train_all);

// Points the part tensors of fused weights (attn_q/k/v, ffn_gate/up) at the row blocks of attn_qkv /
// ffn_gate_up, for the layers where those are allocated; allocate_weights and allocate_grads call it, and so
// must anything that sets the fused tensors itself.
void bind_fused_parts(const ModelConfig& config, ModelWeights& weights);

size_t grads_bytes(const ModelConfig& config, DType dtype, const TrainableFn& trainable = train_all);
// Gradient tensors for the trainable weights (zeroed), empty Tensors for the frozen ones.
ModelWeights allocate_grads(const ops::Context& ctx, const ModelConfig& config, DType dtype, Arena& arena,
                            const TrainableFn& trainable = train_all);
// Sets every present gradient to zero (on its device).
void zero_grads(const ops::Context& ctx, const ModelConfig& config, ModelWeights& grads);

// HF's initialization from a seed: linear weights and embeddings ~ N(0, initializer_range) (config.json's
// initializer_range, default 0.02), biases 0, norm weights 1. Tensor i of weight_specs() draws from Philox
// stream i, so each tensor's values depend only on (seed, its index) (not on the thread count). Host memory.
// `streamed` (when given) draws the tensors it does not hold one at a time, see StreamedWeights.
struct StreamedWeights;
void init_random(const ops::Context& ctx, const ModelConfig& config, ModelWeights& weights, uint64_t seed,
                 const StreamedWeights* streamed = nullptr);

// Weights read one at a time instead of held whole: `held` selects the tensors that stay in ModelWeights
// (allocated with it as the `present` filter); each other tensor is drawn or read into one reused host
// buffer of `dtype` and handed to `consume` (QLoRA quantizes each projection there, so a 70B-shaped model
// never exists in host memory in 16 or 32 bits).
struct StreamedWeights {
  TrainableFn held;
  DType dtype = DType::F32;
  // Where init_random draws them (a GPU draws a 70B-shaped model's projections in a second; see
  // ops::init_normal for the rare last-ulp difference); load_hf_weights reads into host memory only.
  Device device = Device::CPU;
  std::function<void(const WeightSpec&, const Tensor&)> consume;
};

}  // namespace lt::model
