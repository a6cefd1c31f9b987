#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

// leantune preview [CONFIG.yaml] [--key value ...] [--num_examples N]: the training data exactly as
// `train` with the same configuration would see it (format, template, cutoff_len, masking, dropped
// examples), the data report line, and the first N examples with the trained tokens marked [[like this]]
// (axolotl's preprocess --debug). Reads the model's config.json and tokenizer, never its weights.
void add_preview_command(CLI::App& app);

}  // namespace lt::cli
