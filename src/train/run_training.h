// A whole run from a validated TrainConfig: engine checks, model, tokenizer, data, split, Trainer.
#pragma once

#include "train/trainer.h"

namespace lt::train {

// Everything `leantune train` does after parsing the configuration. Every setting is checked (and every
// file opened) before the first step.
TrainResult run_training(const TrainConfig& config, const TrainerHooks& hooks = {});

}  // namespace lt::train
