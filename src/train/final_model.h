// The trained (or merged) model in OUTPUT_DIR itself, as `from_pretrained(OUTPUT_DIR)` expects it, beside
// the checkpoints, metrics and TensorBoard files that live there too.
#pragma once

#include <functional>
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
// `model_card`, when not empty, is written as README.md (train/model_card.h).
std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const model::ModelConfig& model, const model::ModelWeights& weights,
                                          const io::HfSaveOptions& options,
                                          const std::string& model_card = "");

// The same with the model files written by `write_model(staging directory)`, which returns their names (a
// 4-bit checkpoint: io::save_bnb4_checkpoint).
using ModelWriter = std::function<std::vector<std::string>(const std::string& staging)>;
std::vector<std::string> save_final_model(io::OutputDir& out, const std::string& base_model,
                                          const ModelWriter& write_model, const std::string& model_card = "");

// Copies base_model's tokenizer files, generation defaults and chat template (those it has) into `dir`;
// writes `model_card` as README.md when not empty. Returns the names written.
std::vector<std::string> write_companion_files(const std::string& dir, const std::string& base_model,
                                               const std::string& model_card);

}  // namespace lt::train
