// CheckpointReader: one safetensors file, or a directory holding model.safetensors or
// model.safetensors.index.json and its shards (transformers prefers the single file when both exist).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "io/json_file.h"
#include "io/safetensors.h"

namespace lt::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// A shard name from the index must stay inside the checkpoint directory.
void check_shard_name(const std::string& index_path, const std::string& tensor, const std::string& shard) {
  fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute();
  for (const auto& part : p) escapes = escapes || part == "..";
  LT_CHECK(!escapes,
           "checkpoint index {}: tensor '{}' maps to '{}', expected a file name inside the directory",
           index_path, tensor, shard);
}

constexpr size_t kStagingElements = 1 << 14;

// convert_elements reads typed pointers, so unaligned mapped data goes through an aligned staging buffer.
void convert_from_disk(void* dst, DType dst_dtype, const uint8_t* src, DType src_dtype, size_t count) {
  size_t width = dtype_size(src_dtype);
  if (reinterpret_cast<uintptr_t>(src) % width == 0) {
    convert_elements(dst, dst_dtype, src, src_dtype, count);
    return;
  }
  std::vector<double> staging(kStagingElements);  // (chunk,) any dtype up to 8 bytes wide
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < count;) {
    size_t n = std::min(count - done, kStagingElements);
    std::memcpy(staging.data(), src + done * width, n * width);
    convert_elements(out + done * dtype_size(dst_dtype), dst_dtype, staging.data(), src_dtype, n);
    done += n;
  }
}

}  // namespace

std::unique_ptr<CheckpointReader> CheckpointReader::open(const std::string& path_or_dir) {
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->path_ = path_or_dir;
  std::error_code ec;
  LT_CHECK(fs::exists(path_or_dir, ec), "checkpoint {}: no such file or directory", path_or_dir);

  if (!fs::is_directory(path_or_dir, ec)) {
    reader->files_.push_back(SafetensorsFile::open(path_or_dir));
  } else if (fs::exists(fs::path(path_or_dir) / kSingleFile, ec)) {
    reader->files_.push_back(SafetensorsFile::open((fs::path(path_or_dir) / kSingleFile).string()));
  } else if (fs::exists(fs::path(path_or_dir) / kIndexFile, ec)) {
    std::string index_path = (fs::path(path_or_dir) / kIndexFile).string();
    nlohmann::json index = read_json_file(index_path);
    LT_CHECK(
        index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
        "checkpoint index {}: expected an object with a 'weight_map' object of tensor name -> shard file",
        index_path);
    std::map<std::string, size_t> shard_slot;  // shard file -> position in files_
    std::map<std::string, std::string> weight_map;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      LT_CHECK(shard.is_string(), "checkpoint index {}: tensor '{}' maps to {}, expected a shard file name",
               index_path, tensor, shard.dump());
      std::string shard_name = shard.get<std::string>();
      check_shard_name(index_path, tensor, shard_name);
      weight_map[tensor] = shard_name;
      if (shard_slot.count(shard_name)) continue;
      fs::path shard_path = fs::path(path_or_dir) / shard_name;
      LT_CHECK(fs::is_regular_file(shard_path, ec),
               "checkpoint {}: shard '{}' (holding tensor '{}' per {}) is missing", path_or_dir, shard_name,
               tensor, kIndexFile);
      shard_slot[shard_name] = reader->files_.size();
      reader->files_.push_back(SafetensorsFile::open(shard_path.string()));
    }
    for (const auto& [tensor, shard] : weight_map) {
      const SafetensorsFile& file = *reader->files_[shard_slot.at(shard)];
      const SafetensorsEntry* entry = file.find(tensor);
      LT_CHECK(entry != nullptr,
               "checkpoint {}: {} maps tensor '{}' to shard '{}', which does not contain it", path_or_dir,
               kIndexFile, tensor, shard);
      reader->by_name_[tensor] = entry;
    }
    return reader;
  } else {
    LT_FAIL("checkpoint {}: the directory holds neither {} nor {}", path_or_dir, kSingleFile, kIndexFile);
  }

  for (const SafetensorsEntry& entry : reader->files_.front()->entries())
    reader->by_name_[entry.name] = &entry;
  return reader;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : by_name_) names.push_back(name);
  return names;
}

bool CheckpointReader::contains(const std::string& name) const {
  return by_name_.count(name) > 0;
}

const SafetensorsEntry& CheckpointReader::entry(const std::string& name) const {
  auto it = by_name_.find(name);
  LT_CHECK(it != by_name_.end(), "checkpoint {}: no tensor named '{}' ({} tensors present)", path_, name,
           by_name_.size());
  return *it->second;
}

void CheckpointReader::read_into(const std::string& name, Tensor dst) const {
  const SafetensorsEntry& e = entry(name);
  LT_CHECK(dst.device == Device::CPU, "checkpoint {}: tensor '{}' must be read into host memory, not {}",
           path_, name, device_name(dst.device));
  bool same_shape = int(e.shape.size()) == dst.ndim;
  for (int d = 0; same_shape && d < dst.ndim; ++d) same_shape = e.shape[size_t(d)] == dst.shape[size_t(d)];
  LT_CHECK(same_shape, "checkpoint {}: tensor '{}' has shape {}, expected {}", path_, name,
           shape_string(e.shape), dst.shape_string());
  LT_CHECK(dst.numel() == 0 || dst.data != nullptr,
           "checkpoint {}: destination for tensor '{}' has no memory", path_, name);

  std::optional<DType> disk = to_dtype(e.dtype);
  size_t count = size_t(e.numel());
  bool converts = disk && is_floating(*disk) && is_floating(dst.dtype);
  LT_CHECK(
      converts || (disk && *disk == dst.dtype),
      "checkpoint {}: tensor '{}' is {} on disk and cannot be read into {} (integer and other dtypes are "
      "copied only into the same dtype; floating F64/F32/BF16/F16 convert to any floating dtype)",
      path_, name, st_dtype_name(e.dtype), dtype_name(dst.dtype));
  if (count == 0) return;  // no memory to touch (dst.data may be null)
  if (converts) {
    convert_from_disk(dst.data, dst.dtype, e.data, *disk, count);
    return;
  }
  std::memcpy(dst.data, e.data, count * dtype_size(dst.dtype));
}

}  // namespace lt::io
