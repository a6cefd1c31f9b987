// The trained model in OUTPUT_DIR itself, as `from_pretrained(OUTPUT_DIR)` expects it, beside the
// checkpoints, metrics and TensorBoard files that live there too.
#pragma once

#include <string>

#include "model/config.h"
#include "model/weights.h"

namespace lt::train {

// Writes config.json and the safetensors file(s) of `weights` (in their compute dtype) into output_dir:
// built in a staging subdirectory, then each file renamed into place; model files of an earlier save
// that this one does not write (other shard counts) are removed. Tokenizer files of base_model are copied,
// so output_dir works as a model directory for `leantune generate` and transformers.
void save_final_model(const std::string& output_dir, const std::string& base_model,
                      const model::ModelConfig& model, const model::ModelWeights& weights);

}  // namespace lt::train
