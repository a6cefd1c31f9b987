#include "io/gguf_writer.h"

#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"

namespace lt::io {
namespace {

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kAlignment = 32;  // general.alignment's default

// gguf_type: the value types of key/value pairs.
enum ValueType : uint32_t {
  kInt32 = 5,
  kUint32 = 4,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
};

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void pad(std::string& out, uint64_t alignment) {
  out.append((alignment - out.size() % alignment) % alignment, '\0');
}

uint64_t padded(uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

const char* ggml_type_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return "f32";
    case GgmlType::F16:
      return "f16";
    case GgmlType::Q8_0:
      return "q8_0";
    case GgmlType::BF16:
      return "bf16";
  }
  return "?";
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  put_string(header_, key);
  put<uint32_t>(header_, kString);
  put_string(header_, value);
  ++kv_count_;
}

void GgufWriter::add_u32(const std::string& key, uint32_t value) {
  put_string(header_, key);
  put<uint32_t>(header_, kUint32);
  put<uint32_t>(header_, value);
  ++kv_count_;
}

void GgufWriter::add_i32(const std::string& key, int32_t value) {
  put_string(header_, key);
  put<uint32_t>(header_, kInt32);
  put<int32_t>(header_, value);
  ++kv_count_;
}

void GgufWriter::add_f32(const std::string& key, float value) {
  put_string(header_, key);
  put<uint32_t>(header_, kFloat32);
  put<float>(header_, value);
  ++kv_count_;
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  put_string(header_, key);
  put<uint32_t>(header_, kBool);
  put<uint8_t>(header_, value ? 1 : 0);
  ++kv_count_;
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  put_string(header_, key);
  put<uint32_t>(header_, kArray);
  put<uint32_t>(header_, kString);
  put<uint64_t>(header_, values.size());
  for (const std::string& v : values) put_string(header_, v);
  ++kv_count_;
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& values) {
  put_string(header_, key);
  put<uint32_t>(header_, kArray);
  put<uint32_t>(header_, kFloat32);
  put<uint64_t>(header_, values.size());
  for (float v : values) put<float>(header_, v);
  ++kv_count_;
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  put_string(header_, key);
  put<uint32_t>(header_, kArray);
  put<uint32_t>(header_, kInt32);
  put<uint64_t>(header_, values.size());
  for (int32_t v : values) put<int32_t>(header_, v);
  ++kv_count_;
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                            std::string data) {
  LT_CHECK(!shape.empty() && shape.size() <= 4, "GGUF tensor {}: {} dimensions, expected 1 to 4", name,
           shape.size());
  tensors_.push_back({name, shape, type, std::move(data)});
}

void GgufWriter::write(const std::string& path) const {
  std::string head;
  head += "GGUF";
  put<uint32_t>(head, kGgufVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_count_);
  head += header_;
  uint64_t offset = 0;
  for (const TensorEntry& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(head, uint64_t(*it));
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offset += padded(t.data.size());
  }
  pad(head, kAlignment);
  AtomicFileWriter out(path);
  out.write(head.data(), head.size());
  static const char zeros[kAlignment] = {};
  for (const TensorEntry& t : tensors_) {
    out.write(t.data.data(), t.data.size());
    out.write(zeros, padded(t.data.size()) - t.data.size());
  }
  out.commit();
}

}  // namespace lt::io
