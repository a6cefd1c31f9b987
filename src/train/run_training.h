// A whole run from a validated TrainConfig: engine checks, model, tokenizer, data, split, Trainer.
#pragma once

#include "dist/launch.h"
#include "train/trainer.h"

namespace lt::train {

// The communicator of a process started by a launcher (dist/launch.h): NCCL for a CUDA run started by any
// launcher (world size 1 included), MPI for a CPU run of several processes started by mpirun, nullptr for
// one process started alone (the trainer's SingleCommunicator). A CPU run of several processes that MPI
// did not start (torchrun-style variables, a build without MPI) is refused, naming the launch.
std::unique_ptr<dist::Communicator> join_processes(const dist::Launch& launch, Device device,
                                                   double timeout_s);

// Everything `leantune train` does after parsing the configuration. Every setting is checked (and every
// file opened) before the first step. `comm`: the processes of the run (nullptr: join_processes of this
// process's launch). With several ranks, each trains on its share of every step's micro-batches and rank 0
// alone prints and writes into output_dir.
TrainResult run_training(const TrainConfig& config, const TrainerHooks& hooks = {},
                         dist::Communicator* comm = nullptr);

}  // namespace lt::train
