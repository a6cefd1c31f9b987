// The safetensors header checks, in the order the reference reader makes them: length word, header size
// limit, header inside the file, UTF-8, leading '{', JSON (here also: no duplicate keys), entry fields,
// then the data layout (sorted by offset: starts at 0, contiguous, sizes match shapes, ends at end of file).
#include "io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "core/json_read.h"

namespace lt::io {

namespace {

using Json = nlohmann::ordered_json;

// serde_json's recursion limit; a valid header nests three levels deep.
constexpr int kMaxJsonDepth = 128;

std::string all_dtype_names() {
  std::string names;
  for (int code = 0; code <= int(StDType::F6_E3M2); ++code) {
    if (!names.empty()) names += ", ";
    names += st_dtype_name(StDType(code));
  }
  return names;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// Parses the header JSON, refusing duplicate keys at any level (nlohmann would keep the last one silently,
// the reference reader's serde types refuse them) and absurd nesting.
Json parse_json(const std::string& path, const char* text, size_t size) {
  struct Frame {
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> frames;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        LT_CHECK(depth < kMaxJsonDepth, "safetensors {}: header JSON nests deeper than {} levels", path,
                 kMaxJsonDepth);
        if (event == Json::parse_event_t::object_start) frames.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        Frame& frame = frames.back();
        if (!frame.keys.insert(key).second) {
          if (frames.size() == 1) {
            LT_FAIL("safetensors {}: duplicate tensor name '{}' in the header (each name must appear once)",
                    path, key);
          }
          LT_FAIL("safetensors {}: key '{}' appears twice inside '{}' in the header", path, key,
                  frames[frames.size() - 2].last_key);
        }
        frame.last_key = key;
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text, text + size, callback);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    size_t close = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && close != std::string::npos) what = what.substr(close + 2);
    LT_FAIL("safetensors {}: header is not valid JSON (byte {} of the header): {}", path, e.byte, what);
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range (out_of_range 406), ...
    LT_FAIL("safetensors {}: header is not valid JSON: {}", path, json_error_detail(e));
  }
}

uint64_t get_offset(const std::string& path, const std::string& name, const Json& value, int which) {
  LT_CHECK(value.is_number_unsigned(),
           "safetensors {}: tensor '{}' has data_offsets[{}] = {}, expected a non-negative integer", path,
           name, which, value.dump());
  return value.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const Json& value) {
  LT_CHECK(value.is_object(),
           "safetensors {}: tensor '{}' is described by a JSON {}, expected an object with dtype, shape and "
           "data_offsets",
           path, name, value.type_name());
  SafetensorsEntry entry;
  entry.name = name;

  auto dtype_it = value.find("dtype");
  LT_CHECK(dtype_it != value.end(), "safetensors {}: tensor '{}' has no 'dtype' field", path, name);
  LT_CHECK(dtype_it->is_string(), "safetensors {}: tensor '{}' has dtype {}, expected a string", path, name,
           dtype_it->dump());
  auto dtype = parse_st_dtype(dtype_it->get<std::string>());
  LT_CHECK(dtype.has_value(), "safetensors {}: tensor '{}' has unknown dtype '{}', expected one of {}", path,
           name, dtype_it->get<std::string>(), all_dtype_names());
  entry.dtype = *dtype;

  auto shape_it = value.find("shape");
  LT_CHECK(shape_it != value.end(), "safetensors {}: tensor '{}' has no 'shape' field", path, name);
  LT_CHECK(shape_it->is_array(),
           "safetensors {}: tensor '{}' has shape {}, expected an array of non-negative integers", path, name,
           shape_it->dump());
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const Json& dim = (*shape_it)[i];
    LT_CHECK(dim.is_number_unsigned(),
             "safetensors {}: tensor '{}' has shape[{}] = {}, expected a non-negative integer", path, name, i,
             dim.dump());
    // Shapes are int64 everywhere else in leantune; no real tensor comes near this.
    LT_CHECK(dim.get<uint64_t>() <= uint64_t(INT64_MAX),
             "safetensors {}: tensor '{}' has shape[{}] = {}, larger than the supported maximum {}", path,
             name, i, dim.dump(), INT64_MAX);
    entry.shape.push_back(int64_t(dim.get<uint64_t>()));
  }

  auto offsets_it = value.find("data_offsets");
  LT_CHECK(offsets_it != value.end(), "safetensors {}: tensor '{}' has no 'data_offsets' field", path, name);
  LT_CHECK(offsets_it->is_array() && offsets_it->size() == 2,
           "safetensors {}: tensor '{}' has data_offsets {}, expected two integers [begin, end]", path, name,
           offsets_it->dump());
  entry.begin = get_offset(path, name, (*offsets_it)[0], 0);
  entry.end = get_offset(path, name, (*offsets_it)[1], 1);
  LT_CHECK(entry.begin <= entry.end, "safetensors {}: tensor '{}' has data_offsets [{}, {}]: begin after end",
           path, name, entry.begin, entry.end);
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& value) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) return metadata;  // serde's Option accepts null
  LT_CHECK(value.is_object(), "safetensors {}: __metadata__ is a JSON {}, expected an object of strings",
           path, value.type_name());
  for (const auto& [key, item] : value.items()) {
    LT_CHECK(item.is_string(), "safetensors {}: __metadata__ key '{}' has the {} value {}, expected a string",
             path, key, item.type_name(), item.dump());
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Bytes a tensor needs, as the reference computes it: elements x bits / 8, each product checked.
uint64_t tensor_bytes(const std::string& path, const SafetensorsEntry& entry) {
  uint64_t elements = 1;
  for (int64_t dim : entry.shape) {
    LT_CHECK(!__builtin_mul_overflow(elements, uint64_t(dim), &elements),
             "safetensors {}: tensor '{}' has shape {} whose element count overflows 64 bits", path,
             entry.name, shape_string(entry.shape));
  }
  uint64_t bits = 0;
  LT_CHECK(!__builtin_mul_overflow(elements, uint64_t(st_dtype_bits(entry.dtype)), &bits),
           "safetensors {}: tensor '{}' has shape {} whose size in bits overflows 64 bits", path, entry.name,
           shape_string(entry.shape));
  LT_CHECK(bits % 8 == 0,
           "safetensors {}: tensor '{}' ({} elements of {} bits, dtype {}) is not a whole number of bytes",
           path, entry.name, elements, st_dtype_bits(entry.dtype), st_dtype_name(entry.dtype));
  return bits / 8;
}

// Sorted by offset, the tensors must tile [0, end) exactly; returns that end.
uint64_t check_layout(const std::string& path, const std::vector<SafetensorsEntry>& entries) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].begin, entries[a].end) < std::pair(entries[b].begin, entries[b].end);
  });
  uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (size_t index : order) {
    const SafetensorsEntry& entry = entries[index];
    if (entry.begin != expected) {
      if (!previous) {
        LT_FAIL("safetensors {}: tensor '{}' is first in the data but begins at offset {}, expected 0", path,
                entry.name, entry.begin);
      }
      if (entry.begin > expected) {
        LT_FAIL(
            "safetensors {}: gap of {} bytes in the data: tensor '{}' begins at offset {} but the previous "
            "tensor '{}' ends at {} (tensors must be contiguous)",
            path, entry.begin - expected, entry.name, entry.begin, previous->name, expected);
      }
      LT_FAIL("safetensors {}: tensor '{}' at [{}, {}) overlaps tensor '{}' at [{}, {})", path, entry.name,
              entry.begin, entry.end, previous->name, previous->begin, previous->end);
    }
    uint64_t bytes = tensor_bytes(path, entry);
    LT_CHECK(entry.end - entry.begin == bytes,
             "safetensors {}: tensor '{}' (dtype {}, shape {}) needs {} bytes but its data_offsets [{}, {}) "
             "span {}",
             path, entry.name, st_dtype_name(entry.dtype), shape_string(entry.shape), bytes, entry.begin,
             entry.end, entry.end - entry.begin);
    expected = entry.end;
    previous = &entry;
  }
  return expected;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* bytes, uint64_t size) {
  LT_CHECK(size >= 8, "safetensors {}: file has {} bytes, too short for the 8-byte header length", path,
           size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian u64
  LT_CHECK(n <= kMaxSafetensorsHeader, "safetensors {}: header length {} exceeds the limit of {} bytes", path,
           n, kMaxSafetensorsHeader);
  LT_CHECK(n <= size - 8,
           "safetensors {}: header length {} runs past the end of the file ({} bytes after the length)", path,
           n, size - 8);
  const uint8_t* text = bytes + 8;
  size_t bad = first_invalid_utf8(text, size_t(n));
  LT_CHECK(bad == n, "safetensors {}: header is not valid UTF-8 (byte 0x{:02x} at header offset {})", path,
           bad < n ? text[bad] : 0, bad);
  LT_CHECK(n > 0 && text[0] == '{',
           "safetensors {}: header must be a JSON object starting with '{{', found {}", path,
           n > 0 ? fmt::format("'{}'", char(text[0])) : std::string("an empty header"));

  Json root = parse_json(path, reinterpret_cast<const char*>(text), size_t(n));
  LT_CHECK(root.is_object(), "safetensors {}: header is a JSON {}, expected an object", path,
           root.type_name());

  SafetensorsHeader header;
  header.header_size = n;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      header.metadata = parse_metadata(path, value);
    } else {
      header.entries.push_back(parse_entry(path, name, value));
    }
  }
  uint64_t data_end = check_layout(path, header.entries);
  uint64_t data_size = size - 8 - n;
  LT_CHECK(data_end <= data_size,
           "safetensors {}: file is truncated: the tensors need {} bytes of data but the file holds {}", path,
           data_end, data_size);
  LT_CHECK(data_end == data_size,
           "safetensors {}: {} trailing bytes after the tensor data (data ends at {}, the file's data "
           "section has {} "
           "bytes)",
           path, data_size - data_end, data_end, data_size);
  return header;
}

}  // namespace lt::io
