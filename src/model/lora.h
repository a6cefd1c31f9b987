// LoRA adapters beside the base weights (PEFT's LoraLayer on nn.Linear): any of the seven projections of any
// layer gets A (r, in) and B (out, r), and its output becomes
//   y = x W^T + b + scaling * dropout(x) A^T B^T,   scaling = alpha / r (alpha / sqrt(r) with rsLoRA).
// Which modules get adapters, with which rank and alpha, is a LoraRule (io/peft_adapter.h builds one from
// adapter_config.json with PEFT's target and pattern matching). Like ModelWeights, one LoraWeights type holds
// the adapters and their gradients. On CPU adapters are in the compute dtype (f32/f64).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/proj_id.h"
#include "ops/context.h"

namespace lt::model {

// The seven projections of a decoder layer, in the order of their HF names (model/proj_id.h): an adapter's
// module is its projection.
using LoraModule = ProjId;
inline constexpr int kLoraModuleCount = kProjCount;

std::string_view lora_module_name(LoraModule m);  // "q_proj", ..., "down_proj"
std::optional<LoraModule> lora_module_from_name(std::string_view name);
// The module's name inside the HF model, from the architecture's tensor names (model/arch): for Llama
// "model.layers.3.self_attn.q_proj", "model.layers.3.mlp.up_proj".
// A fused projection's parts share their module: "model.layers.3.self_attn.qkv_proj" for q, k and v.
std::string lora_module_path(const ModelConfig& config, int64_t layer, LoraModule m);
// The projections one PEFT module computes, from m on: {m} for a plain projection; {Q, K, V} for Q and
// {Gate, Up} for Gate when the block fuses them (BlockSpec::fused_qkv / fused_gate_up); empty for K, V and Up
// there (parts of a module that starts before them).
std::vector<LoraModule> lora_module_parts(const ModelConfig& config, LoraModule m);
// The model's LoRA target names, comma separated: "q_proj, k_proj, ..., down_proj" or, fused (Phi-3),
// "qkv_proj, o_proj, gate_up_proj, down_proj".
std::string lora_target_list(const ModelConfig& config);
int64_t lora_in_features(const ModelConfig& config, LoraModule m);  // nn.Linear in_features
// nn.Linear out_features of the module starting at m: the sum over its parts' outputs (q + k + v for a
// fused qkv_proj), else the projection's own.
int64_t lora_out_features(const ModelConfig& config, LoraModule m);
// The output features of projection m alone (a part of a fused module: its rows of the module's B).
int64_t lora_part_out_features(const ModelConfig& config, LoraModule m);

// One module's rank and alpha, as adapter_config.json resolves them (patterns applied).
struct LoraModuleSetting {
  int64_t rank = 0;  // r > 0
  double alpha = 0;
  bool use_rslora = false;
};
// Which modules get adapters: nullopt for a module without one. Called with lora_module_path().
using LoraRule = std::function<std::optional<LoraModuleSetting>(const std::string& module_path)>;

// alpha / r, or alpha / sqrt(r) with rsLoRA (PEFT's LoraLayer.update_layer).
double lora_scaling(const LoraModuleSetting& setting);

// One adapter of the model.
struct LoraSpec {
  int64_t layer = 0;
  LoraModule module = LoraModule::Q;
  int64_t rank = 0;  // r
  double alpha = 0;
  double scaling = 0;  // lora_scaling()
  int64_t in = 0;      // A is (r, in)
  int64_t out = 0;     // B is (out, r)
  std::string module_path;
};
// Every adapter the rule asks for, layer by layer, modules in LoraModule order. Throws if it asks for none
// or gives a rank < 1.
std::vector<LoraSpec> lora_specs(const ModelConfig& config, const LoraRule& rule);

enum class LoraMatrix : uint8_t { A, B };
// PEFT's key in adapter_model.safetensors: "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
std::string lora_tensor_name(const LoraSpec& spec, LoraMatrix which);

// A fused module (PEFT's LoRA on Phi-3's qkv_proj / gate_up_proj) is ONE adapter held at its first
// projection: A (r, in) shared by the parts and B (out_1 + out_2 [+ out_3], r), whose row blocks are the
// parts' B's (part_out says how many rows each); the other parts hold none. Its t = x A^T is computed once
// and A's gradient sums the parts' contributions, as one nn.Linear would (lora_layer.h).
struct LoraAdapter {
  int64_t rank = 0;  // 0: this module has no adapter
  double scaling = 0;
  Tensor a;                           // (r, in); empty for a frozen gradient
  Tensor b;                           // (out, r)
  int parts = 1;                      // projections its B covers, from its own on
  std::array<int64_t, 3> part_out{};  // rows of B per part (parts > 1)
  bool present() const { return rank > 0; }
};

struct LayerLora {
  std::array<LoraAdapter, kLoraModuleCount> adapters;  // indexed by LoraModule
  LoraAdapter& operator[](LoraModule m) { return adapters[size_t(m)]; }
  const LoraAdapter& operator[](LoraModule m) const { return adapters[size_t(m)]; }
};

struct LoraWeights {
  DType dtype = DType::F32;
  std::vector<LoraSpec> specs;    // the adapters that exist
  std::vector<LayerLora> layers;  // L

  LoraAdapter& adapter(const LoraSpec& spec) { return layers[size_t(spec.layer)][spec.module]; }
  const LoraAdapter& adapter(const LoraSpec& spec) const { return layers[size_t(spec.layer)][spec.module]; }
  Tensor& matrix(const LoraSpec& spec, LoraMatrix which);
  const Tensor& matrix(const LoraSpec& spec, LoraMatrix which) const;
};

// Bytes allocate_lora takes from an arena (each tensor aligned to 256 bytes, as Arena does).
size_t lora_bytes(const std::vector<LoraSpec>& specs, DType dtype);
// The adapters of `specs` in `dtype` (uninitialized); also what holds their gradients (then zero_lora them).
LoraWeights allocate_lora(const ModelConfig& config, const std::vector<LoraSpec>& specs, DType dtype,
                          Arena& arena);
// Sets every present tensor to zero (on its device).
void zero_lora(const ops::Context& ctx, LoraWeights& weights);

// PEFT's init_lora_weights: true = A kaiming-uniform as nn.Linear's default (bound 1/sqrt(in)), B zero;
// gaussian = A ~ N(0, 1/r^2) (std 1/r), B zero; false = A and B both as nn.Linear's default (B bound
// 1/sqrt(r)), so the adapter starts non-zero.
enum class LoraInit : uint8_t { Default, Gaussian, NoInit };
std::optional<LoraInit> lora_init_from_name(std::string_view name);  // "true", "gaussian", "false"
// Adapter i of weights.specs draws A from Philox stream 2i and B from 2i + 1 under `seed`, so each value
// depends only on (seed, the adapter's index, the element). Host memory.
void init_lora(LoraWeights& weights, LoraInit init, uint64_t seed);

// (PEFT name, adapter tensor, its gradient) for every A and B, in specs order: what the optimizer updates.
struct LoraTensor {
  std::string name;
  Tensor param;
  Tensor grad;
};
std::vector<LoraTensor> lora_tensors(LoraWeights& weights, LoraWeights& grads);

// Dropout on the adapter's input (nn.Dropout: keep with probability 1 - p, kept values scaled by 1/(1-p)).
// The mask of element j of the token at absolute position t (the chunk's q_offset + i) of row `row` is
// philox_uniform(seed, stream, t * in + j) >= p, with the stream derived from (step, micro_batch, layer,
// module, row): a resumed run and a chunked run draw exactly the same masks. p == 0: no dropout (evaluation).
struct LoraDropout {
  double p = 0;
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t micro_batch = 0;
};
uint64_t lora_dropout_stream(const LoraDropout& dropout, int64_t layer, LoraModule m, int64_t row);
// Whether element `index` (t * in + j) of a stream survives: philox_uniform(seed, stream, index) >= p.
bool lora_dropout_keeps(const LoraDropout& dropout, uint64_t stream, uint64_t index);

}  // namespace lt::model
