// TensorBoard event files without TensorFlow: TFRecord framing (length, masked CRC32C of the length, data,
// masked CRC32C of the data) around hand-encoded Event protobufs. The first record carries file_version
// "brain.Event:2"; every other record is one scalar (Event.summary.value{tag, simple_value}).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lt::io {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord's mask of it.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

// Serialized Event protobufs (proto3: a zero step is left out, as protobuf's own serializers do).
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// One TFRecord around `data`.
std::string frame_record(const std::string& data);

class TensorBoardWriter {
 public:
  // Creates <dir> if needed and <dir>/events.out.tfevents.<unix seconds>.<hostname> (with a numeric
  // suffix if that name is taken), and writes the file_version record.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one scalar and flushes, so that a live TensorBoard sees it. wall_time < 0 means now.
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace lt::io
