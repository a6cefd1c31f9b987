// What every GGUF family writer shares: llama.cpp's general.file_type, tensor data in a GGML type as gguf-py
// encodes it (f32, f16, bf16, q8_0 with gguf-py's rounding; 1-D tensors always f32; q8_0 rows not a
// multiple of 32 in f16), tokenizer_config.json's fields and the special-token keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/gguf_writer.h"
#include "model/config.h"

namespace lt::cli {

uint32_t file_type_of(io::GgmlType type);

// Adds tensors to a writer, each encoded in the writer's type (with the fallbacks above).
class TensorAdder {
 public:
  TensorAdder(io::GgufWriter& writer, io::GgmlType type) : writer_(writer), type_(type) {}
  void add(const std::string& name, const Tensor& t);
  void add(const std::string& name, const float* x, const std::vector<int64_t>& shape);

 private:
  io::GgufWriter& writer_;
  io::GgmlType type_;
};

// tokenizer_config.json's fields, when the file exists (else an empty object).
nlohmann::json tokenizer_config(const std::string& model_dir);

// The special ids config.json gives (as the converter's SpecialVocab reads them), then
// tokenizer_config.json's add_bos_token / add_eos_token and chat_template.
void add_special_tokens(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config);

}  // namespace lt::cli
