// TensorBoard event files: CRC32C check value, the golden Event bytes of FORMATS.md, record framing, and a
// written file read back record by record. tools/check_tensorboard.py additionally has TensorBoard's own
// EventAccumulator read the file written by WriterFileReadsBack (LT_TENSORBOARD_DEMO_DIR).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/tensorboard.h"
#include "support/test_support.h"

namespace lt::io {
namespace {

std::string hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

TEST(TensorBoard, Crc32cCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // The mask rotates right by 15 and adds the constant.
  uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, GoldenScalarEvent) {
  EXPECT_EQ(hex(encode_scalar_event(1.0, 7, "loss", 2.5f)),
            "09000000000000f03f10072a0d0a0b0a046c6f73731500002040");
}

TEST(TensorBoard, FileVersionEventAndLargeSteps) {
  // wall_time 1.0, then field 3 (string) "brain.Event:2".
  EXPECT_EQ(hex(encode_file_version_event(1.0)), "09000000000000f03f1a0d627261696e2e4576656e743a32");
  // Step 300 is a two-byte varint (ac 02); step 0 is omitted like proto3 does.
  EXPECT_NE(hex(encode_scalar_event(1.0, 300, "a", 1.0f)).find("10ac02"), std::string::npos);
  EXPECT_EQ(hex(encode_scalar_event(1.0, 0, "a", 1.0f)).substr(18, 2), "2a");  // summary follows wall_time
}

TEST(TensorBoard, RecordFraming) {
  std::string data = "hello";
  std::string r = frame_record(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  uint64_t len;
  std::memcpy(&len, r.data(), 8);
  EXPECT_EQ(len, data.size());
  uint32_t len_crc, data_crc;
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 12 + data.size(), 4);
  EXPECT_EQ(len_crc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(data_crc, masked_crc32c(data.data(), data.size()));
  EXPECT_EQ(r.substr(12, data.size()), data);
}

// Splits a file into its records, checking every CRC.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_LE(pos + 12, bytes.size());
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, bytes.data() + pos, 8);
    std::memcpy(&len_crc, bytes.data() + pos + 8, 4);
    EXPECT_EQ(len_crc, masked_crc32c(bytes.data() + pos, 8));
    std::string data = bytes.substr(pos + 12, len);
    std::memcpy(&data_crc, bytes.data() + pos + 12 + len, 4);
    EXPECT_EQ(data_crc, masked_crc32c(data.data(), data.size()));
    out.push_back(data);
    pos += 12 + len + 4;
  }
  EXPECT_EQ(pos, bytes.size());
  return out;
}

TEST(TensorBoard, WriterFileReadsBack) {
  test::TempDir tmp;
  const char* demo = std::getenv("LT_TENSORBOARD_DEMO_DIR");
  std::string dir = demo ? std::string(demo) : tmp.file("runs");
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    for (int step = 1; step <= 5; ++step) {
      w.add_scalar("train/loss", 3.0 / step, step, 1000.0 + step);
      w.add_scalar("train/lr", 1e-4 * step, step, 1000.0 + step);
    }
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  auto records = read_records(path);
  ASSERT_EQ(records.size(), 11u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(records[1], encode_scalar_event(1001.0, 1, "train/loss", 3.0f));
  EXPECT_EQ(records[10], encode_scalar_event(1005.0, 5, "train/lr", float(5e-4)));
  // A second writer in the same second gets its own file.
  TensorBoardWriter second(dir);
  EXPECT_NE(second.path(), path);
}

TEST(TensorBoard, UnwritableDirectoryIsAnError) {
  test::TempDir tmp;
  std::ofstream(tmp.file("plainfile")) << "x";
  try {
    TensorBoardWriter w(tmp.file("plainfile") + "/runs");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plainfile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt::io
