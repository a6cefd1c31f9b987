// `leantune info MODEL_DIR`: what a model is (architecture, sizes, parameter counts by kind, dtype on disk)
// and the memory full fine-tuning and LoRA would need at a sequence length and batch.
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void register_info_command(CLI::App& app);

}  // namespace lt::cli
