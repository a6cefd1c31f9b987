// safetensors: memory-mapped reader that enforces every rule of the reference reader (FORMATS.md), a
// writer (header padded to 8 with spaces, format: pt metadata, atomic), and a checkpoint reader that
// spans model.safetensors or the shards of model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lt::io {

// Every dtype the format defines; only the floating ones convert to compute dtypes.
enum class StDType : uint8_t {
  BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, C64,
  F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4, F6_E2M3, F6_E3M2
};
std::optional<StDType> parse_st_dtype(const std::string& name);
std::string st_dtype_name(StDType dtype);
int st_dtype_bits(StDType dtype);                // 4 for F4, 6 for F6_*, 8 * bytes otherwise
std::optional<DType> to_dtype(StDType dtype);    // F64/F32/BF16/F16/I64/I32/U8 -> DType
StDType from_dtype(DType dtype);

struct SafetensorsEntry {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;    // offsets into the data buffer
  const uint8_t* data = nullptr;  // into the mapping
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header; throws lt::Error naming the file and the broken rule.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in header order
  const SafetensorsEntry* find(const std::string& name) const;               // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: host memory, any DType.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes atomically (temporary file in the same directory, fsync, rename). Adds format: pt to metadata.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A checkpoint: a single .safetensors file, or a directory with model.safetensors or
// model.safetensors.index.json (+ shards).
class CheckpointReader {
 public:
  static std::unique_ptr<CheckpointReader> open(const std::string& path_or_dir);

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const;  // throws naming the tensor and checkpoint
  // Copies tensor `name` into `dst` (host), converting F64/F32/BF16/F16 to dst's dtype; the element
  // count and shape must match (throws naming the tensor, its shape and the expected one).
  void read_into(const std::string& name, Tensor dst) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsEntry*> by_name_;
};

}  // namespace lt::io
