// Saving ModelWeights as an HF checkpoint. The directory is assembled under a temporary sibling name and
// renamed into place (io::AtomicDirectory: a previous one that leantune wrote is moved aside first and
// removed after; any other is refused), so an interrupted save leaves either the old checkpoint or the new
// one, never a mix.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/atomic_file.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"

namespace lt::io {
namespace fs = std::filesystem;

std::optional<DType> dtype_from_torch_name(const std::string& name) {
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  if (name == "float32") return DType::F32;
  if (name == "float64") return DType::F64;
  return std::nullopt;
}

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    case DType::F32:
      return "float32";
    case DType::F64:
      return "float64";
    default:
      LT_FAIL("checkpoint dtype {} is not a floating dtype", dtype_name(dtype));
  }
}

namespace {

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  LT_CHECK(out.good(), "cannot create {}", path);
  out << text;
  out.close();
  LT_CHECK(out.good(), "writing {} failed (disk full?)", path);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

struct Shard {
  std::vector<NamedTensor> tensors;
  uint64_t bytes = 0;
};

}  // namespace

std::vector<std::string> save_hf_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                            const model::ModelWeights& weights,
                                            const HfSaveOptions& options) {
  DType dtype = weights.dtype;
  if (options.dtype) {
    dtype = *options.dtype;
  } else if (auto declared = dtype_from_torch_name(config.dtype_name)) {
    dtype = *declared;
  }
  LT_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F64,
           "saving {}: dtype {} cannot be stored in a checkpoint (f32, bf16, f16 or f64)", dir,
           dtype_name(dtype));

  // Converted copies of every tensor, in the model's order.
  std::vector<std::vector<char>> storage;
  std::vector<NamedTensor> tensors;
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  storage.reserve(specs.size());
  for (const model::WeightSpec& spec : specs) {
    const Tensor& src = model::weight_of(weights, spec);
    LT_CHECK(!src.empty() && src.device == Device::CPU, "saving {}: weight '{}' is not in host memory", dir,
             spec.hf_name);
    LT_CHECK(src.numel() == spec.numel(), "saving {}: weight '{}' has shape {}, expected {} elements", dir,
             spec.hf_name, src.shape_string(), spec.numel());
    Tensor t = src;
    t.dtype = dtype;
    storage.emplace_back(t.bytes());
    t.data = storage.back().data();
    convert_elements(t.data, dtype, src.data, src.dtype, size_t(src.numel()));
    if (model::has_hf_row_order(config, spec)) model::qkv_rows_to_hf(config, t);
    tensors.push_back({spec.hf_name, t});
  }
  return write_hf_directory(dir, hf_config_json(config, dtype), tensors, options.max_shard_bytes);
}

nlohmann::json hf_config_json(const model::ModelConfig& config, DType dtype) {
  return model::model_config_json(config, torch_dtype_name(dtype));
}

std::vector<std::string> write_hf_directory(const std::string& dir, const nlohmann::json& config_json,
                                            const std::vector<NamedTensor>& tensors,
                                            uint64_t max_shard_bytes) {
  LT_CHECK(max_shard_bytes > 0, "saving {}: max shard size must be positive", dir);
  // Greedy shards in the given order; a tensor larger than the limit gets a shard of its own.
  std::vector<Shard> shards(1);
  uint64_t total_bytes = 0;
  for (const NamedTensor& t : tensors) {
    if (!shards.back().tensors.empty() && shards.back().bytes + t.tensor.bytes() > max_shard_bytes)
      shards.emplace_back();
    shards.back().tensors.push_back(t);
    shards.back().bytes += t.tensor.bytes();
    total_bytes += t.tensor.bytes();
  }

  std::error_code ec;
  const fs::path parent = fs::absolute(fs::path(dir)).lexically_normal().parent_path();
  fs::create_directories(parent, ec);
  LT_CHECK(!ec, "saving {}: cannot create {}: {}", dir, parent.string(), ec.message());
  AtomicDirectory out(dir);
  const fs::path staging(out.path());

  std::vector<std::string> written{"config.json"};
  write_text_file((staging / "config.json").string(), config_json.dump(2) + "\n");

  if (shards.size() == 1) {
    write_safetensors((staging / "model.safetensors").string(), shards[0].tensors);
    written.push_back("model.safetensors");
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      write_safetensors((staging / file).string(), shards[i].tensors);
      for (const NamedTensor& t : shards[i].tensors) weight_map[t.name] = file;
      written.push_back(file);
    }
    nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    write_text_file((staging / "model.safetensors.index.json").string(), index.dump(2) + "\n");
    written.push_back("model.safetensors.index.json");
  }

  out.commit();
  return written;
}

}  // namespace lt::io
