#include "io/peft_adapter.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"

namespace lt::io {
namespace fs = std::filesystem;
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// B of the fused query_key_value: its rows in the checkpoint's order (model/hf_layout.h).
bool interleaved_b(const model::ModelConfig& m, const model::LoraSpec& s, model::LoraMatrix which) {
  return which == model::LoraMatrix::B && s.module == model::LoraModule::Q &&
         model::qkv_interleaved_per_head(m);
}

// Every module path of the model's projections.
std::vector<std::string> projection_paths(const model::ModelConfig& m) {
  std::vector<std::string> paths;
  for (int64_t l = 0; l < m.num_layers; ++l)
    for (int i = 0; i < model::kLoraModuleCount; ++i)
      if (!model::lora_module_parts(m, model::LoraModule(i))
               .empty())  // a later part of a fused module, or none
        paths.push_back(model::lora_module_path(m, l, model::LoraModule(i)));
  return paths;
}

}  // namespace

std::vector<model::LoraSpec> lora_specs(const model::ModelConfig& m, const LoraAdapterConfig& config) {
  const std::vector<std::string> paths = projection_paths(m);
  for (const std::string& target : config.target_modules) {
    bool found = false;
    for (const std::string& p : paths) found = found || p == target || p.ends_with("." + target);
    LT_CHECK(found,
             "adapter config: target module '{}' is none of the model's projections; leantune puts LoRA on "
             "{}",
             target, model::lora_target_list(m));
  }
  model::LoraRule rule = [&config](const std::string& path) -> std::optional<model::LoraModuleSetting> {
    if (!config.targets(path)) return std::nullopt;
    return model::LoraModuleSetting{
        .rank = config.rank_for(path), .alpha = config.alpha_for(path), .use_rslora = config.use_rslora};
  };
  return model::lora_specs(m, rule);
}

std::vector<std::string> save_peft_adapter(const std::string& dir, const model::ModelConfig& m,
                                           const LoraAdapterConfig& config, const model::LoraWeights& lora,
                                           DType file_dtype) {
  LT_CHECK(file_dtype == DType::F32 || file_dtype == DType::F64,
           "saving adapter {}: file dtype {}, expected F32 or F64", dir, dtype_name(file_dtype));
  const std::vector<model::LoraSpec> expected = lora_specs(m, config);
  LT_CHECK(expected.size() == lora.specs.size(), "saving adapter {}: {} adapters, the config describes {}",
           dir, lora.specs.size(), expected.size());
  std::vector<std::vector<uint8_t>> storage;  // one copy per tensor in file_dtype
  std::vector<NamedTensor> tensors;
  storage.reserve(2 * expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const model::LoraSpec& s = expected[i];
    LT_CHECK(lora.specs[i].module_path == s.module_path && lora.adapter(s).rank == s.rank,
             "saving adapter {}: adapter {} is {} of rank {}, the config says {} of rank {}", dir, i,
             lora.specs[i].module_path, lora.adapter(s).rank, s.module_path, s.rank);
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      const Tensor& t = lora.matrix(s, which);
      LT_CHECK(t.device == Device::CPU, "saving adapter {}: {} is not in host memory", dir, s.module_path);
      std::vector<uint8_t>& f = storage.emplace_back(size_t(t.numel()) * dtype_size(file_dtype));
      convert_elements(f.data(), file_dtype, t.data, t.dtype, size_t(t.numel()));
      Tensor view(f.data(), file_dtype, {t.dim(0), t.dim(1)});
      if (interleaved_b(m, s, which)) model::qkv_rows_to_hf(m, view);
      tensors.push_back({model::lora_tensor_name(s, which), view});
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  LT_CHECK(!ec, "cannot create adapter directory '{}': {}", dir, ec.message());
  const std::string weights_path = dir + "/" + kAdapterWeightsFile;
  const std::string config_path = dir + "/" + kAdapterConfigFile;
  write_safetensors(weights_path, tensors);
  write_file_atomic(config_path, adapter_config_json(config));
  return {weights_path, config_path};
}

void load_peft_adapter_weights(const std::string& dir, const model::ModelConfig& m,
                               const LoraAdapterConfig& config, model::LoraWeights& lora) {
  const std::string path = dir + "/" + kAdapterWeightsFile;
  if (!fs::exists(path)) {
    LT_CHECK(
        !fs::exists(dir + "/adapter_model.bin"),
        "adapter {}: only adapter_model.bin (a pickle) is there; leantune reads adapter_model.safetensors "
        "(save the adapter with safe_serialization=True)",
        dir);
    LT_FAIL("adapter {}: {} is missing", dir, kAdapterWeightsFile);
  }
  const std::vector<model::LoraSpec> expected = lora_specs(m, config);
  LT_CHECK(expected.size() == lora.specs.size(), "adapter {}: {} adapters allocated, the config describes {}",
           dir, lora.specs.size(), expected.size());
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(path);
  std::vector<std::string> wanted;
  for (size_t i = 0; i < expected.size(); ++i) {
    const model::LoraSpec& s = expected[i];
    LT_CHECK(lora.specs[i].module_path == s.module_path && lora.adapter(s).rank == s.rank,
             "adapter {}: allocated adapter {} is {} of rank {}, the config says {} of rank {}", dir, i,
             lora.specs[i].module_path, lora.adapter(s).rank, s.module_path, s.rank);
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      const std::string name = model::lora_tensor_name(s, which);
      const std::vector<int64_t> shape = which == model::LoraMatrix::A ? std::vector<int64_t>{s.rank, s.in}
                                                                       : std::vector<int64_t>{s.out, s.rank};
      wanted.push_back(name);
      const SafetensorsEntry* e = file->find(name);
      LT_CHECK(e != nullptr, "adapter {}: tensor '{}' is missing, expected shape {} (r = {} from the config)",
               path, name, shape_text(shape), s.rank);
      LT_CHECK(e->shape == shape,
               "adapter {}: tensor '{}' has shape {}, expected {} (r = {} from the config)", path, name,
               shape_text(e->shape), shape_text(shape), s.rank);
      std::optional<DType> dt = to_dtype(e->dtype);
      LT_CHECK(dt && (*dt == DType::F32 || *dt == DType::F64 || *dt == DType::BF16 || *dt == DType::F16),
               "adapter {}: tensor '{}' is {}, expected a floating dtype (F32, F64, BF16, F16)", path, name,
               st_dtype_name(e->dtype));
      Tensor& dst = lora.matrix(s, which);
      LT_CHECK(dst.device == Device::CPU, "adapter {}: destination of '{}' is not in host memory", path,
               name);
      convert_elements(dst.data, dst.dtype, e->data, *dt, size_t(e->numel()));
      if (interleaved_b(m, s, which)) model::qkv_rows_from_hf(m, dst);
    }
  }
  std::vector<std::string> unexpected;
  for (const SafetensorsEntry& e : file->entries())
    if (std::find(wanted.begin(), wanted.end(), e.name) == wanted.end()) unexpected.push_back(e.name);
  if (!unexpected.empty()) {
    const size_t shown = std::min<size_t>(unexpected.size(), 5);
    LT_FAIL(
        "adapter {}: {} tensor(s) that adapter_config.json does not explain: {}{} (expected only "
        "lora_A/lora_B "
        "of the targeted modules, e.g. '{}')",
        path, unexpected.size(), fmt::join(unexpected.begin(), unexpected.begin() + long(shown), ", "),
        unexpected.size() > shown ? ", ..." : "", wanted.front());
  }
}

}  // namespace lt::io
