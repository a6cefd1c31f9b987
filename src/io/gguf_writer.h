// GGUF files (llama.cpp's model format, version 3; the spec: ggml's docs/gguf.md, written as gguf-py's
// GGUFWriter writes them). Layout, all little-endian:
//   "GGUF", u32 version 3, u64 tensor count, u64 key/value count,
//   key/value pairs: string key, u32 value type, value (strings: u64 length + UTF-8 bytes; arrays: u32
//   element type, u64 count, elements),
//   tensor infos: string name, u32 dims, u64 ne[dims] (innermost first: the reverse of a row-major
//   shape), u32 ggml type, u64 offset of its data from the start of the data section,
//   padding to the alignment (32), then every tensor's data, each padded to the alignment.
// Key/value pairs and tensors are written in the order they were added, as GGUFWriter does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lt::io {

// ggml's tensor types that leantune writes (ggml.h's enum ggml_type values).
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30 };
// "f32", "f16", "bf16", "q8_0".
const char* ggml_type_name(GgmlType type);

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_i32(const std::string& key, int32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_f32_array(const std::string& key, const std::vector<float>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);

  // `shape` is row-major (numpy's), `data` the tensor's bytes in `type` (Q8_0: 34-byte blocks of 32).
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                  std::string data);

  // The whole file, written atomically (io/atomic_file.h).
  void write(const std::string& path) const;

 private:
  struct TensorEntry {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    std::string data;
  };
  std::string header_;  // the encoded key/value pairs
  uint64_t kv_count_ = 0;
  std::vector<TensorEntry> tensors_;
};

}  // namespace lt::io
