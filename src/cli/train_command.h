#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

// leantune train [CONFIG.yaml] [--key value ...]: every TrainConfig key can be given on the command line.
void add_train_command(CLI::App& app);

}  // namespace lt::cli
