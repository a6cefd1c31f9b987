#include "train/run_setup.h"

#include <filesystem>

#include "core/error.h"
#include "data/dataset_load.h"
#include "data/dataset_pretokenized.h"
#include "io/hf_checkpoint.h"
#include "io/peft_adapter.h"

namespace lt::train {

namespace fs = std::filesystem;

void check_engine_settings(const TrainConfig& c) {
  LT_CHECK(c.device == "cpu",
           "config: 'device' is '{}': this build has no CUDA backend yet; expected cpu (set --device cpu)",
           c.device);
  LT_CHECK(c.precision == "fp64" || c.precision == "fp32",
           "config: 'precision' is '{}', but on device cpu the trainer computes in fp64 or fp32",
           c.precision);
  LT_CHECK(c.finetune != "lora" || c.adapter == "lora",
           "config: 'adapter' is '{}': the CPU trainer has no NF4 base weights; expected lora", c.adapter);
  LT_CHECK(c.recompute == "none",
           "config: 'recompute' is '{}': the CPU trainer keeps all activations; expected none", c.recompute);
}

DType compute_dtype(const std::string& precision) {
  if (precision == "fp64") return DType::F64;
  if (precision == "fp32") return DType::F32;
  LT_FAIL("config: 'precision' is '{}', expected fp64 or fp32 on CPU", precision);
}

LoadedModel load_model(const std::string& model_dir, DType dtype, bool random_init, uint64_t seed) {
  LoadedModel m;
  m.config = model::load_model_config(model_dir);
  m.dtype = dtype;
  m.arena = std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(m.config, dtype));
  m.weights = model::allocate_weights(m.config, dtype, *m.arena);
  if (random_init)
    model::init_random(m.config, m.weights, seed);
  else
    io::load_hf_weights(model_dir, m.config, m.weights);
  return m;
}

LoadedAdapter load_adapter(const std::string& adapter_dir, const model::ModelConfig& model, DType dtype) {
  LT_CHECK(fs::exists(fs::path(adapter_dir) / io::kAdapterConfigFile),
           "adapter '{}': no {} there; expected a PEFT LoRA adapter directory", adapter_dir,
           io::kAdapterConfigFile);
  LoadedAdapter a;
  a.config = io::read_adapter_config(adapter_dir);
  const std::vector<model::LoraSpec> specs = io::lora_specs(model, a.config);
  a.arena = std::make_unique<Arena>("adapter", HostMemory::instance(), model::lora_bytes(specs, dtype));
  a.weights = model::allocate_lora(model, specs, dtype, *a.arena);
  io::load_peft_adapter_weights(adapter_dir, model, a.config, a.weights);
  return a;
}

std::unique_ptr<data::Tokenizer> load_model_tokenizer(const std::string& model_dir, bool required) {
  const fs::path dir(model_dir);
  const bool any = fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tokenizer.model") ||
                   fs::exists(dir / "vocab.json");
  if (!any && !required) return nullptr;
  LT_CHECK(
      any,
      "{}: no tokenizer (tokenizer.json, tokenizer.model or vocab.json + merges.txt); this data needs one",
      model_dir);
  return data::load_tokenizer(model_dir);
}

data::DatasetOptions dataset_options(const TrainConfig& c, const std::string& model_dir) {
  data::DatasetOptions o;
  o.format = data::data_format_from_name(c.dataset_format);
  o.prompt_template = c.prompt_template == "auto" ? data::detect_template(model_dir)
                                                  : data::template_from_name(c.prompt_template);
  o.cutoff_len = c.cutoff_len;
  o.train_on_inputs = c.train_on_inputs;
  o.on_bad_record = data::on_bad_record_from_name(c.on_bad_record);
  return o;
}

data::Dataset load_examples(const std::string& path, const data::Tokenizer* tokenizer,
                            const model::ModelConfig& model, const data::DatasetOptions& options) {
  data::DataFormat format =
      options.format == data::DataFormat::auto_detect ? data::detect_data_format(path) : options.format;
  if (format == data::DataFormat::pretokenized && tokenizer == nullptr)
    return data::load_pretokenized(path, model.vocab_size, options);
  LT_CHECK(tokenizer != nullptr,
           "{}: a {} dataset needs the model's tokenizer, and the model directory has none", path,
           data::data_format_name(format));
  data::DatasetOptions o = options;
  o.format = format;
  return data::load_dataset(path, *tokenizer, o);
}

}  // namespace lt::train
