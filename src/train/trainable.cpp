#include "train/trainable.h"

#include <algorithm>

#include "core/error.h"
#include "train/config_enums.h"

namespace lt::train {

namespace {

using model::WeightKind;

const char* group_of(WeightKind kind) {
  switch (kind) {
    case WeightKind::Embed:
      return "embed_tokens";
    case WeightKind::LmHead:
      return "lm_head";
    case WeightKind::AttnNorm:
    case WeightKind::AttnQNorm:
    case WeightKind::AttnKNorm:
    case WeightKind::FfnNorm:
    case WeightKind::FinalNorm:
    case WeightKind::AttnPostNorm:
    case WeightKind::FfnPostNorm:
    case WeightKind::AttnNormBias:
    case WeightKind::FfnNormBias:
    case WeightKind::FinalNormBias:
    case WeightKind::EmbedNorm:
    case WeightKind::EmbedNormBias:
      return "norms";
    case WeightKind::FfnGateUp:
    case WeightKind::FfnGate:
    case WeightKind::FfnGateBias:
    case WeightKind::FfnUp:
    case WeightKind::FfnUpBias:
    case WeightKind::FfnDown:
    case WeightKind::FfnDownBias:
      return "mlp";
    default:
      return "attention";
  }
}

}  // namespace

model::TrainableFn trainable_fn(const TrainConfig& config, const model::ModelConfig& model) {
  const Finetune finetune = config.finetune;
  if (finetune == Finetune::Full) return model::train_all;
  if (finetune == Finetune::Lora)
    return [](const model::WeightSpec&) { return false; };  // the base is frozen
  std::vector<int64_t> layers = resolve_trainable_layers(config.trainable_layers, model.num_layers);
  std::vector<std::string> groups = config.trainable;
  const bool tied = model.tie_word_embeddings;
  return [layers, groups, tied](const model::WeightSpec& spec) {
    auto has = [&](const char* g) { return std::find(groups.begin(), groups.end(), g) != groups.end(); };
    if (spec.layer >= 0 && !std::binary_search(layers.begin(), layers.end(), spec.layer)) return false;
    if (spec.kind == WeightKind::Embed && tied) return has("embed_tokens") || has("lm_head");
    return has(group_of(spec.kind));
  };
}

std::vector<ParamGroup> trainable_tensors(const model::ModelConfig& model, model::ModelWeights& weights,
                                          model::ModelWeights& grads, model::ModelWeights* copies) {
  std::vector<ParamGroup> out;
  for (const model::WeightSpec& spec : model::weight_specs(model)) {
    Tensor& g = model::weight_of(grads, spec);
    if (g.empty()) continue;
    const Tensor& w = model::weight_of(weights, spec);
    Tensor copy = copies ? model::weight_of(*copies, spec) : Tensor();
    if (copy.data == w.data) copy = Tensor();  // the model computes with the tensor itself
    out.push_back({spec.hf_name, w, g, copy, spec.layer});
  }
  return out;
}

std::vector<ParamGroup> lora_param_groups(model::LoraWeights& lora, model::LoraWeights& grads,
                                          model::LoraWeights* copies) {
  std::vector<ParamGroup> out;
  // lora_tensors gives each spec's A, then its B.
  const std::vector<model::LoraTensor> tensors = model::lora_tensors(lora, grads);
  for (size_t i = 0; i < tensors.size(); ++i)
    out.push_back({tensors[i].name, tensors[i].param, tensors[i].grad, {}, lora.specs[i / 2].layer});
  if (copies) {
    // Same specs, so the same tensors in the same order (the gradients only fill in the pairs).
    const std::vector<model::LoraTensor> c = model::lora_tensors(*copies, grads);
    LT_CHECK(c.size() == out.size(), "LoRA compute copies: {} tensors for {} adapters' tensors", c.size(),
             out.size());
    for (size_t i = 0; i < c.size(); ++i) {
      LT_CHECK(c[i].name == out[i].name, "LoRA compute copies: '{}' where '{}' was expected", c[i].name,
               out[i].name);
      out[i].compute_copy = c[i].param;
    }
  }
  return out;
}

}  // namespace lt::train
