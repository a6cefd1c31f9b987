// `leantune verify chunked`: random trials comparing chunked sequence training with whole-sequence
// training (loss and every trainable gradient) on tiny random models or a given model directory.
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void register_verify_command(CLI::App& app);

}  // namespace lt::cli
