// README.md beside a trained adapter or model (and a merged export): a Hugging Face model card, its YAML
// front matter as the Hub reads it (base_model, library_name, tags, datasets) and a body with the training
// settings, the data, the final losses and the leantune version, so the directory explains itself when
// shared.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace lt::train {

// The base model as a model card names it: config.json's `_name_or_path` when it is a Hub id ("org/name",
// not a local path), else the absolute path of the directory.
std::string base_model_reference(const std::string& base_model_dir);

struct TrainingCard {
  const TrainConfig* config = nullptr;
  bool adapter = false;  // a PEFT LoRA adapter (library_name: peft), else a full model
  int64_t steps = 0;
  std::optional<double> first_train_loss, final_train_loss, final_eval_loss;
  int64_t final_eval_step = 0;
};

std::string training_model_card(const TrainingCard& card);

// A merged export (`leantune export --merge`): the base model, the adapter merged into it and its dtype.
std::string merged_model_card(const std::string& base_model_dir, const std::string& adapter_dir,
                              const std::string& dtype);

}  // namespace lt::train
