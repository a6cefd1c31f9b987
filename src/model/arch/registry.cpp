#include <fmt/core.h>
#include <fmt/ranges.h>

#include <vector>

#include "model/arch/architecture.h"

namespace lt::model {

namespace {
constexpr const ArchitectureDef* kRegistry[] = {
    &kLlamaArchitecture, &kQwen2Architecture,  &kMistralArchitecture, &kQwen3Architecture,
    &kPhi3Architecture,  &kGemma2Architecture, &kBloomArchitecture,   &kGemma3Architecture};
}  // namespace

std::span<const ArchitectureDef* const> architectures() {
  return kRegistry;
}

const ArchitectureDef& architecture_def(Architecture arch) {
  for (const ArchitectureDef* def : kRegistry)
    if (def->arch == arch) return *def;
  LT_FAIL("unknown architecture enum value {}", int(arch));
}

std::string supported_class_names() {
  std::vector<std::string> names;
  for (const ArchitectureDef* def : kRegistry) names.emplace_back(def->class_name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string supported_model_types() {
  std::vector<std::string> names;
  for (const ArchitectureDef* def : kRegistry) names.emplace_back(def->model_type);
  return fmt::format("{}", fmt::join(names, ", "));
}

const HfTensorNames kLlamaTensorNames = {
    .embed = "model.embed_tokens.weight",
    .layer_prefix = "model.layers.",
    .attn_norm = "input_layernorm",
    .ffn_norm = "post_attention_layernorm",
    .q_norm = "self_attn.q_norm",
    .k_norm = "self_attn.k_norm",
    .proj = {{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
              "mlp.up_proj", "mlp.down_proj"}},
    .qkv = "self_attn.qkv_proj",
    .gate_up = "mlp.gate_up_proj",
    .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
};

MlpKind gated_mlp_from_hidden_act(const FieldReader& r, const std::string& source) {
  const std::string act = r.string_or("hidden_act", "silu");
  if (act == "silu") return MlpKind::SwiGlu;
  LT_CHECK(act == "gelu" || act == "gelu_pytorch_tanh" || act == "gelu_new",
           "{}: field 'hidden_act' is \"{}\": only \"silu\" (SwiGLU MLP) is supported", source, act);
  LT_FAIL(
      "{}: field 'hidden_act' is \"{}\": the GeGLU MLP is not supported yet; only \"silu\" (SwiGLU MLP) is "
      "supported",
      source, act);
}

}  // namespace lt::model
