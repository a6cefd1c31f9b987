// zero3 over several ranks without the whole model on any rank (train/zero3_layers.h): the model-level
// tensors (embedding, final norm, LM head) are loaded whole, and each layer tensor zero3 shards (the trained
// ones, and the frozen ones of a dense base: a LoRA run's, a partial run's untrained ones) is read from the
// safetensors files (or drawn, random_init) alone into one reused staging buffer (model::StreamedWeights)
// from which this rank's slice is copied; the trainer's Zero3Layers takes the slices over and its gradients
// are made as slices (train/layer_gradient_shards.h). The slices are the bytes the whole load's cut gives, so
// both loads train alike bit for bit.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/weights.h"
#include "ops/context.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {

// Whether a run of `config` on `world` ranks loads sliced: sharding zero3, several ranks, a dense base (a
// QLoRA run's 4-bit base stays whole: zero3 does not shard it).
bool loads_zero3_slices(const TrainConfig& config, const model::ModelConfig& model, int world);

// The layer tensors a sliced load slices: those `trainable` selects, and (`frozen`: zero3 shards the dense
// base's frozen layer tensors too) every other layer tensor; the model-level ones are loaded whole.
bool zero3_sliced(const model::WeightSpec& spec, const model::TrainableFn& trainable, bool frozen);

// base_model (config.json and safetensors, or random_init's draws from `seed`, as load_model draws them)
// with the layer tensors zero3_sliced selects as this rank's slices (LoadedModel::zero3_slices: the trained
// ones in `slices`, the frozen ones in `frozen`; their tensors in `weights` are empty). Host memory holds
// the whole model-level tensors and one layer tensor at a time.
LoadedModel load_zero3_sliced_model(const ops::Context& ctx, const std::string& model_dir, DType dtype,
                                    bool random_init, uint64_t seed, Device device,
                                    const model::TrainableFn& trainable, bool frozen, int world, int rank);

}  // namespace lt::train
