#include "train/run_setup.h"

#include <filesystem>

#include "core/error.h"
#include "data/dataset_load.h"
#include "data/dataset_mix.h"
#include "data/dataset_pretokenized.h"
#include "data/model_template.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/peft_adapter.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "train/config_enums.h"
#include "train/qlora_model.h"

namespace lt::train {

namespace fs = std::filesystem;

void resolve_auto_device(Device& device, Precision& precision) {
  if (device == Device::Auto) device = ops::cuda_available() ? Device::CUDA : Device::CPU;
  if (precision == Precision::Auto) precision = device == Device::CUDA ? Precision::Bf16 : Precision::Fp32;
}

void check_device_precision(Device device, Precision precision, const std::string& who) {
  const char* precision_name = name_of(kPrecisionRequestNames, precision);
  if (device == Device::CUDA) {
    LT_CHECK(ops::cuda_available(), "{}: 'device' is cuda, but {}; set --device cpu", who,
#if defined(LT_HAVE_CUDA)
             "no GPU is visible (driver, CUDA_VISIBLE_DEVICES?)"
#else
             "this build has no CUDA backend (build it with `make cuda`)"
#endif
    );
    LT_CHECK(
        precision != Precision::Fp64,
        "{}: 'precision' is '{}' with device cuda; the GPU engine computes in bf16, fp16 or fp32 (fp64 is "
        "the CPU's)",
        who, precision_name);
    return;
  }
  LT_CHECK(precision == Precision::Fp64 || precision == Precision::Fp32,
           "{}: 'precision' is '{}', but on device cpu the engine computes in fp64 or fp32", who,
           precision_name);
}

void check_engine_settings(const TrainConfig& c) {
  check_device_precision(c.device, c.precision, "config");
  // QLoRA (train/qlora_model.h) trains adapters over a frozen 4-bit base; validate() refused bits 4 with
  // another finetune. Its keys are checked here, before any work.
  if (is_qlora(c)) qlora_options(c);
}

std::unique_ptr<io::OutputDir> claim_output_dir(const TrainConfig& c) {
  std::vector<io::OutputInput> inputs = {{"base_model", c.base_model}};
  for (const std::string& path : dataset_paths(c))
    inputs.push_back({c.datasets.empty() ? "data_path" : "datasets", path});
  if (!c.eval_data_path.empty()) inputs.push_back({"eval_data_path", c.eval_data_path});
  if (!c.init_adapter.empty()) inputs.push_back({"init_adapter", c.init_adapter});
  if (!c.resume.empty() && c.resume != "latest" && c.resume != "auto") {
    std::error_code ec;
    const fs::path out = fs::weakly_canonical(fs::absolute(c.output_dir), ec);
    const fs::path parent = fs::weakly_canonical(fs::absolute(c.resume), ec).parent_path();
    if (parent != out) inputs.push_back({"resume", c.resume});
  }
  return std::make_unique<io::OutputDir>(
      c.output_dir,
      io::OutputDirOptions{
          .who = "config: 'output_dir'", .inputs = inputs, .overwrite = c.overwrite_output_dir});
}

DType compute_dtype(const std::string& precision) {
  return compute_dtype(parse_precision(precision, "config"));
}

DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::Fp64:
      return DType::F64;
    case Precision::Fp32:
      return DType::F32;
    case Precision::Bf16:
      return DType::BF16;
    case Precision::Fp16:
      return DType::F16;
    case Precision::Auto:
      break;  // resolve_auto_device picks a concrete precision first
  }
  LT_FAIL("config: 'precision' is {}, expected a resolved precision (fp64, fp32, bf16 or fp16)",
          name_of(kPrecisionRequestNames, precision));
}

DType master_dtype(DType compute) {
  return is_half_float(compute) ? DType::F32 : compute;
}

DType wide_master_dtype(DType compute) {
  LT_CHECK(is_half_float(compute) || compute == DType::F32,
           "master weights: compute dtype {} has no wider master dtype", dtype_name(compute));
  return is_half_float(compute) ? DType::F32 : DType::F64;
}

bool keeps_master_weights(const TrainConfig& c) {
  return c.finetune != Finetune::Lora && (c.master_weights || c.precision == Precision::Fp16);
}

void check_not_adapter_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  LT_CHECK(!(fs::exists(fs::path(model_dir) / "adapter_config.json") &&
             !fs::exists(fs::path(model_dir) / "config.json")),
           "{} is a PEFT adapter directory (adapter_config.json, no config.json), not a model: give the base "
           "model as the model and this directory as the adapter (--adapter {})",
           model_dir, model_dir);
}

LoadedModel load_model(const std::string& model_dir, DType dtype, bool random_init, uint64_t seed,
                       Device device) {
  check_not_adapter_dir(model_dir);
  LoadedModel m;
  // A 4-bit checkpoint (bitsandbytes' layout) is read dequantized: each projection's code * absmax in f32
  // rounded once to `dtype`, the values QLoRA training computes with (model/nf4_weights.h).
  const bool four_bit = !random_init && io::read_bnb4_quantization(model_dir).has_value();
  m.config = four_bit ? io::load_bnb4_model_config(model_dir) : model::load_model_config(model_dir);
  m.dtype = dtype;
  m.device = device;
  const bool drawn_on_device = random_init && device != Device::CPU;
  if (!drawn_on_device) model::check_weights_fit(m.config, dtype, Device::CPU, model_dir);
  if (device != Device::CPU) model::check_weights_fit(m.config, dtype, device, model_dir);
  // A GPU run's random weights are drawn where they live: an 8B model's draws take minutes on the host
  // (ops::init_normal: the same Philox values, rare last-bit differences from the host's f64 log and cos).
  if (drawn_on_device) {
    m.arena = std::make_unique<Arena>("weights", ops::memory_resource(device),
                                      model::weights_bytes(m.config, dtype));
    m.weights = model::allocate_weights(m.config, dtype, *m.arena);
    model::init_random(m.config, m.weights, seed);
    return m;
  }
  // Read (or drawn) on the host in the compute dtype; a GPU run uploads that and frees the host copy.
  auto host =
      std::make_unique<Arena>("weights", HostMemory::instance(), model::weights_bytes(m.config, dtype));
  model::ModelWeights host_weights = model::allocate_weights(m.config, dtype, *host);
  if (random_init)
    model::init_random(m.config, host_weights, seed);
  else if (four_bit)
    io::load_bnb4_checkpoint(model_dir, m.config, host_weights, /*dequantize=*/true);
  else
    io::load_hf_weights(model_dir, m.config, host_weights);
  m.arena = std::move(host);
  m.weights = host_weights;
  return device == Device::CPU ? std::move(m) : to_device(std::move(m), dtype, device);
}

LoadedModel to_device(LoadedModel model, DType dtype, Device device) {
  LoadedModel m;
  m.config = model.config;
  m.dtype = dtype;
  m.device = device;
  m.arena =
      std::make_unique<Arena>("weights", ops::memory_resource(device), model::weights_bytes(m.config, dtype));
  m.weights = model::allocate_weights(m.config, dtype, *m.arena);
  model::copy_weights(m.config, m.weights, model.weights);
  return m;
}

LoadedAdapter load_adapter(const std::string& adapter_dir, const model::ModelConfig& model, DType dtype,
                           Device device) {
  LT_CHECK(fs::exists(fs::path(adapter_dir) / io::kAdapterConfigFile),
           "adapter '{}': no {} there; expected a PEFT LoRA adapter directory", adapter_dir,
           io::kAdapterConfigFile);
  LoadedAdapter a;
  a.config = io::read_adapter_config(adapter_dir);
  const std::vector<model::LoraSpec> specs = io::lora_specs(model, a.config);
  auto host = std::make_unique<Arena>("adapter", HostMemory::instance(), model::lora_bytes(specs, dtype));
  model::LoraWeights host_weights = model::allocate_lora(model, specs, dtype, *host);
  io::load_peft_adapter_weights(adapter_dir, model, a.config, host_weights);
  if (device == Device::CPU) {
    a.arena = std::move(host);
    a.weights = host_weights;
    return a;
  }
  a.arena = std::make_unique<Arena>("adapter", ops::memory_resource(device), model::lora_bytes(specs, dtype));
  a.weights = model::allocate_lora(model, specs, dtype, *a.arena);
  model::copy_lora(a.weights, host_weights);
  return a;
}

std::unique_ptr<data::Tokenizer> load_model_tokenizer(const std::string& model_dir, bool required,
                                                      int64_t model_vocab) {
  const fs::path dir(model_dir);
  const bool any = fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tokenizer.model") ||
                   fs::exists(dir / "vocab.json");
  if (!any && !required) return nullptr;
  LT_CHECK(
      any,
      "{}: no tokenizer (tokenizer.json, tokenizer.model or vocab.json + merges.txt); this data needs one",
      model_dir);
  std::unique_ptr<data::Tokenizer> tokenizer = data::load_tokenizer(model_dir);
  LT_CHECK(tokenizer->vocab_size() <= model_vocab,
           "{}: the tokenizer has {} tokens but config.json's vocab_size is {}: its ids past {} have no "
           "embedding row; expected a tokenizer that fits the model",
           model_dir, tokenizer->vocab_size(), model_vocab, model_vocab - 1);
  return tokenizer;
}

data::DatasetOptions dataset_options(const TrainConfig& c, const std::string& model_dir) {
  data::DatasetOptions o;
  o.format = c.dataset_format;
  if (!c.chat_template.empty()) {
    o.model_template = data::load_template_file(c.chat_template);
  } else if (c.prompt_template == "auto") {
    o.model_template = data::load_model_template(model_dir);
  }
  if (c.prompt_template != "auto") {
    o.prompt_template = data::template_from_name(c.prompt_template);
  } else if (!o.model_template) {
    o.prompt_template = data::detect_template(model_dir);  // no template: alpaca
  } else {
    // Chat, instruction and conversational prompt/completion records go through the model's template;
    // the built-in kind (when the template is one it knows) is what the remaining formats use.
    try {
      o.prompt_template = data::detect_template(model_dir);
    } catch (const Error&) {
      o.prompt_template = data::TemplateKind::alpaca;
    }
  }
  o.cutoff_len = c.cutoff_len;
  o.train_on_inputs = c.train_on_inputs;
  o.train_on_all_turns = c.train_on_all_turns;
  o.keep_empty_examples = c.keep_empty_examples;
  o.on_bad_record = c.on_bad_record;
  return o;
}

data::Dataset load_examples(const std::string& path, const data::Tokenizer* tokenizer,
                            const model::ModelConfig& model, const data::DatasetOptions& options) {
  data::DataFormat format =
      options.format == data::DataFormat::auto_detect ? data::detect_data_format(path) : options.format;
  if (format == data::DataFormat::pretokenized && tokenizer == nullptr) {
    data::Dataset dataset = data::load_pretokenized(path, model.vocab_size, options);
    dataset.format = format;
    data::drop_examples_without_targets(dataset, options);
    return dataset;
  }
  LT_CHECK(tokenizer != nullptr,
           "{}: a {} dataset needs the model's tokenizer, and the model directory has none", path,
           data::data_format_name(format));
  data::DatasetOptions o = options;
  o.format = format;
  return data::load_dataset(path, *tokenizer, o);
}

}  // namespace lt::train

namespace lt::train {

data::Dataset load_training_data(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                 const model::ModelConfig& model) {
  const data::DatasetOptions options = dataset_options(c, c.base_model);
  if (c.datasets.empty()) return load_examples(c.data_path, tokenizer, model, options);
  std::vector<data::WeightedDataset> parts;
  for (const std::string& path : c.datasets) {
    double weight = 1.0;
    for (const auto& [file, w] : c.dataset_weights)
      if (file == path) weight = w;
    parts.push_back({load_examples(path, tokenizer, model, options), weight});
  }
  return data::mix_datasets(std::move(parts), uint64_t(c.seed));
}

}  // namespace lt::train
