// write_safetensors: header JSON padded with spaces to a multiple of 8, tensors laid out by element size
// descending (then name) so that each begins aligned to its element size, written atomically.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace lt::io {

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const NamedTensor& t : tensors) {
    LT_CHECK(t.name != "__metadata__", "safetensors {}: '__metadata__' cannot name a tensor", path);
    LT_CHECK(seen.insert(t.name).second, "safetensors {}: tensor name '{}' given twice", path, t.name);
    LT_CHECK(t.tensor.device == Device::CPU, "safetensors {}: tensor '{}' is on {}, expected host memory",
             path, t.name, device_name(t.tensor.device));
    LT_CHECK(t.tensor.numel() == 0 || t.tensor.data != nullptr, "safetensors {}: tensor '{}' has no data",
             path, t.name);
  }

  // Offsets are multiples of every later element size because sizes are powers of two taken in
  // descending order, and the data buffer starts at 8 + N with N a multiple of 8.
  std::vector<const NamedTensor*> order;
  for (const NamedTensor& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    size_t sa = dtype_size(a->tensor.dtype), sb = dtype_size(b->tensor.dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "pt";  // transformers refuses files without it; a caller's value below takes precedence
  for (const auto& [key, value] : metadata) meta[key] = value;
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const NamedTensor* t : order) {
    nlohmann::ordered_json entry;
    entry["dtype"] = st_dtype_name(from_dtype(t->tensor.dtype));
    entry["shape"] = nlohmann::ordered_json::array();
    for (int d = 0; d < t->tensor.ndim; ++d) entry["shape"].push_back(t->tensor.shape[size_t(d)]);
    entry["data_offsets"] = {offset, offset + t->tensor.bytes()};
    offset += t->tensor.bytes();
    header[t->name] = entry;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    LT_FAIL("safetensors {}: cannot write the header (tensor names and metadata must be UTF-8): {}", path,
            e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = uint8_t(uint64_t(text.size()) >> (8 * i));  // little-endian u64
  AtomicFileWriter writer(path);
  writer.write(length, sizeof(length));
  writer.write(text.data(), text.size());
  for (const NamedTensor* t : order) writer.write(t->tensor.data, t->tensor.bytes());
  writer.commit();
}

}  // namespace lt::io
