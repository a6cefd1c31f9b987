#include "io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lt::io {
namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: varint, fixed64/fixed32 little endian, length-delimited.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}
void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (field << 3) | wire_type);
}
void put_fixed(std::string& out, const void* bytes, size_t n) {
  // Host order is little endian on every platform leantune builds for (x86-64, aarch64).
  out.append(static_cast<const char*>(bytes), n);
}
void put_double(std::string& out, uint32_t field, double v) {
  put_tag(out, field, 1);
  put_fixed(out, &v, 8);
}
void put_float(std::string& out, uint32_t field, float v) {
  put_tag(out, field, 5);
  put_fixed(out, &v, 4);
}
void put_bytes(std::string& out, uint32_t field, const std::string& v) {
  put_tag(out, field, 2);
  put_varint(out, v.size());
  out += v;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string encode_file_version_event(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string summary_value;  // Summary.Value{tag = 1, simple_value = 2}
  put_bytes(summary_value, 1, tag);
  put_float(summary_value, 2, value);
  std::string summary;  // Summary{repeated value = 1}
  put_bytes(summary, 1, summary_value);
  std::string event;  // Event{wall_time = 1, step = 2, summary = 5}
  put_double(event, 1, wall_time);
  if (step != 0) {
    put_tag(event, 2, 0);
    put_varint(event, uint64_t(step));  // int64: negative values take ten bytes, as protobuf writes them
  }
  put_bytes(event, 5, summary);
  return event;
}

std::string frame_record(const std::string& data) {
  std::string out;
  uint64_t length = data.size();
  put_fixed(out, &length, 8);
  uint32_t length_crc = masked_crc32c(&length, 8);
  put_fixed(out, &length_crc, 4);
  out += data;
  uint32_t data_crc = masked_crc32c(data.data(), data.size());
  put_fixed(out, &data_crc, 4);
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LT_CHECK(!ec, "tensorboard: cannot create directory '{}': {}", dir, ec.message());
  const double start = now_seconds();
  const std::string base = fmt::format("{}/events.out.tfevents.{}.{}", dir, int64_t(start), host_name());
  path_ = base;
  for (int n = 1; std::filesystem::exists(path_); ++n) path_ = fmt::format("{}.{}", base, n);
  file_ = std::fopen(path_.c_str(), "wb");
  LT_CHECK(file_ != nullptr, "tensorboard: cannot create '{}': {}", path_, std::strerror(errno));
  write_record(encode_file_version_event(start));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  LT_CHECK(!tag.empty(), "tensorboard: empty tag for a scalar at step {}", step);
  write_record(encode_scalar_event(wall_time < 0 ? now_seconds() : wall_time, step, tag, float(value)));
}

void TensorBoardWriter::write_record(const std::string& data) {
  const std::string record = frame_record(data);
  const bool ok =
      std::fwrite(record.data(), 1, record.size(), file_) == record.size() && std::fflush(file_) == 0;
  LT_CHECK(ok, "tensorboard: cannot write to '{}': {}", path_, std::strerror(errno));
}

}  // namespace lt::io
