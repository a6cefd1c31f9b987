// A whole run from a validated TrainConfig: engine checks, model, tokenizer, data, split, Trainer.
#pragma once

#include "train/trainer.h"

namespace lt::train {

// Everything `leantune train` does after parsing the configuration. Every setting is checked (and every
// file opened) before the first step. `comm`: the processes of the run (nullptr: this one alone; a process
// started by a multi-process launcher is refused, since training over several is not wired yet).
TrainResult run_training(const TrainConfig& config, const TrainerHooks& hooks = {},
                         dist::Communicator* comm = nullptr);

}  // namespace lt::train
