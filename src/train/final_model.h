// The trained (or merged) model in OUTPUT_DIR itself, as `from_pretrained(OUTPUT_DIR)` expects it, beside
// the checkpoints, metrics and TensorBoard files that live there too.
#pragma once

#include <string>
#include <vector>

#include "io/hf_checkpoint.h"
#include "io/output_dir.h"
#include "model/config.h"
#include "model/weights.h"

namespace lt::train {

// Writes config.json and the safetensors file(s) of `weights` into `out`, with the companion files of
// base_model (tokenizer, generation defaults, chat template), so the directory works as a model directory
// for `leantune generate` and transformers. Everything is built in a staging directory inside `out` and
// then renamed into place. Model files of an earlier save into `out` (recorded in its marker) that this one
// does not write (another shard count) are removed; nothing else in `out` is touched. Returns the names.
std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const model::ModelConfig& model, const model::ModelWeights& weights,
                                          const io::HfSaveOptions& options);

}  // namespace lt::train
