// LoRA trainer tests: a LoRA TrainConfig on the tiny model of train_test_util.h, and adapter files read as
// double.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "train/train_test_util.h"

namespace lt::test {

// Adapters on q, v and down_proj (attention and MLP), r 4, alpha 8, dropout 0.1, weight decay on.
inline train::TrainConfig tiny_lora_config(const std::string& root, const std::string& output = "out") {
  train::TrainConfig c = tiny_train_config(root, output);
  c.finetune = lt::model::Finetune::Lora;
  c.lora_r = 4;
  c.lora_alpha = 8;
  c.lora_dropout = 0.1;
  c.lora_target_modules = {"q_proj", "v_proj", "down_proj"};
  c.learning_rate = 2e-2;
  c.weight_decay = 0.05;
  return c;
}

// Every tensor of a safetensors file, converted to double.
inline std::map<std::string, std::vector<double>> read_safetensors_f64(const std::string& path) {
  auto file = io::SafetensorsFile::open(path);
  std::map<std::string, std::vector<double>> out;
  for (const io::SafetensorsEntry& e : file->entries()) {
    std::vector<double> v(size_t(e.numel()));
    convert_elements(v.data(), DType::F64, e.data, *io::to_dtype(e.dtype), v.size());
    out[e.name] = std::move(v);
  }
  return out;
}

// Every tensor of <dir>/adapter_model.safetensors, converted to double.
inline std::map<std::string, std::vector<double>> read_adapter_f64(const std::string& dir) {
  return read_safetensors_f64(dir + "/" + io::kAdapterWeightsFile);
}

}  // namespace lt::test
