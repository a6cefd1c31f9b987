// `leantune export --base_model DIR --adapter DIR --merge --output_dir OUT`: folds a PEFT LoRA adapter into
// its base model (W += scaling * B @ A) and writes an HF checkpoint that transformers' from_pretrained
// loads: config.json, (sharded) safetensors, and the base model's tokenizer and generation files.
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void register_export_command(CLI::App& app);

}  // namespace lt::cli
