// Which tensors an optimizer step updates. The trainer works on a flat list of (name, param, grad) — AdamW's
// ParamGroup — so that full fine-tuning, partial fine-tuning and LoRA adapters differ only in the list:
// LoRA appends its A/B tensors to it (lora_param_groups) and marks every base weight frozen.
// A frozen weight gets an empty gradient tensor (model/weights.h), so it costs neither gradient nor
// optimizer memory.
#pragma once

#include <vector>

#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "train/adamw.h"
#include "train/train_config.h"

namespace lt::train {

// finetune full: every weight; lora: none (the adapters train instead); partial: the groups of `trainable`
// (embed_tokens, attention, mlp, norms, lm_head) restricted to `trainable_layers` for per-layer weights.
// Model-level weights (embeddings, final norm, LM head) are not in any layer, so trainable_layers does not
// restrict them. With tied embeddings the LM head is the embedding: either group trains it.
model::TrainableFn trainable_fn(const TrainConfig& config, const model::ModelConfig& model);

// (HF name, weight, gradient) for every weight whose gradient exists, in weight_specs order. copies
// (optional): the working weights the model computes with when `weights` are wider masters; each trained
// tensor's becomes its ParamGroup's compute_copy.
std::vector<ParamGroup> trainable_tensors(const model::ModelConfig& model, model::ModelWeights& weights,
                                          model::ModelWeights& grads, model::ModelWeights* copies = nullptr);

// (PEFT tensor name, adapter, its gradient) for every A and B of `lora`, in specs order; copies (optional):
// the adapters' compute copies (same specs, a narrower dtype), each its ParamGroup's compute_copy.
std::vector<ParamGroup> lora_param_groups(model::LoraWeights& lora, model::LoraWeights& grads,
                                          model::LoraWeights* copies = nullptr);

}  // namespace lt::train
