// One test per rule of the reference reader: each hostile file gives one lt::Error naming the problem.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/safetensors.h"
#include "st_test_util.h"

namespace lt::io {
namespace {

using test::fails_with;
using test::TempDir;
using test::write_image;

// Tries to open `header` + `data` and expects an error naming the file and containing `parts`.
::testing::AssertionResult open_fails(const std::string& header, const std::string& data,
                                      std::initializer_list<std::string> parts,
                                      std::optional<uint64_t> declared = std::nullopt) {
  TempDir dir;
  std::string path = write_image(dir, "bad.safetensors", header, data, declared);
  std::vector<std::string> all(parts);
  all.push_back(path);
  try {
    SafetensorsFile::open(path);
  } catch (const lt::Error& e) {
    std::string message = e.what();
    for (const std::string& part : all) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "opened without error";
}

// (fmt rather than string operator+, which trips GCC 12's -Wrestrict false positive at -O3)
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return fmt::format("\"{}\":{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}", name, dtype, shape,
                     begin, end);
}

// A header object from its members.
std::string obj(std::initializer_list<std::string> members) {
  return fmt::format("{{{}}}", fmt::join(members, ","));
}

const std::string kEightBytes(8, '\x01');

TEST(SafetensorsMalformed, FileShorterThanLengthWord) {
  TempDir dir;
  std::string path = dir.file("short.safetensors");
  test::write_bytes(path, std::string("\x05\x00\x00", 3));
  EXPECT_TRUE(fails_with([&] { SafetensorsFile::open(path); }, {path, "3 bytes", "too short"}));
  test::write_bytes(path, "");
  EXPECT_TRUE(fails_with([&] { SafetensorsFile::open(path); }, {path, "0 bytes", "too short"}));
}

TEST(SafetensorsMalformed, DataShorterThanDeclared) {
  EXPECT_TRUE(open_fails(obj({entry("w", "F32", "[4]", 0, 16)}), kEightBytes,
                         {"truncated", "need 16 bytes", "holds 8"}));
}

TEST(SafetensorsMalformed, HeaderLengthPastEndOfFile) {
  EXPECT_TRUE(open_fails("{}", "", {"header length 1000", "past the end"}, 1000));
}

TEST(SafetensorsMalformed, HugeHeaderLength) {
  EXPECT_TRUE(
      open_fails("{}", "", {"header length 100000001", "exceeds the limit of 100000000"}, 100'000'001));
  EXPECT_TRUE(open_fails("{}", "", {"exceeds the limit"}, UINT64_MAX));
}

TEST(SafetensorsMalformed, OverlappingOffsets) {
  std::string header = obj({entry("a", "F32", "[2]", 0, 8), entry("b", "F32", "[2]", 4, 12)});
  EXPECT_TRUE(
      open_fails(header, std::string(12, '\0'), {"tensor 'b' at [4, 12) overlaps tensor 'a' at [0, 8)"}));
}

TEST(SafetensorsMalformed, GappedOffsets) {
  std::string header = obj({entry("a", "F32", "[2]", 0, 8), entry("b", "F32", "[2]", 12, 20)});
  EXPECT_TRUE(open_fails(header, std::string(20, '\0'),
                         {"gap of 4 bytes", "'b' begins at offset 12", "'a' ends at 8"}));
}

TEST(SafetensorsMalformed, OffsetsOutOfOrder) {
  // end before begin: no sorting can make this range valid
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[2]", 8, 0)}), kEightBytes,
                         {"tensor 'a'", "data_offsets [8, 0]", "begin after end"}));
}

TEST(SafetensorsMalformed, FirstOffsetNotZero) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[2]", 4, 12)}), std::string(12, '\0'),
                         {"tensor 'a'", "begins at offset 4, expected 0"}));
}

TEST(SafetensorsMalformed, TrailingBytesAfterData) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[2]", 0, 8)}), fmt::format("{}xyz", kEightBytes),
                         {"3 trailing bytes", "data ends at 8"}));
}

TEST(SafetensorsMalformed, UnknownDtype) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F128", "[1]", 0, 16)}), std::string(16, '\0'),
                         {"tensor 'a'", "unknown dtype 'F128'", "BF16"}));
}

TEST(SafetensorsMalformed, ShapeDoesNotMatchByteSize) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[3]", 0, 8)}), kEightBytes,
                         {"tensor 'a'", "shape (3)", "needs 12 bytes", "span 8"}));
}

TEST(SafetensorsMalformed, ShapeProductOverflows) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[4294967296,4294967296,2]", 0, 8)}), kEightBytes,
                         {"tensor 'a'", "element count overflows"}));
  // elements fit in 64 bits, their size in bits does not
  EXPECT_TRUE(open_fails(obj({entry("a", "F64", "[2305843009213693952]", 0, 8)}), kEightBytes,
                         {"tensor 'a'", "size in bits overflows"}));
}

TEST(SafetensorsMalformed, SubByteDtypeNotWholeBytes) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F4", "[3]", 0, 2)}), "ab",
                         {"tensor 'a'", "3 elements of 4 bits", "not a whole number of bytes"}));
  EXPECT_TRUE(open_fails(obj({entry("a", "F6_E2M3", "[5]", 0, 4)}), "abcd", {"not a whole number of bytes"}));
}

TEST(SafetensorsMalformed, HeaderNotUtf8) {
  EXPECT_TRUE(open_fails("{\"a\xff\":1}", "", {"not valid UTF-8", "0xff", "offset 3"}));
  EXPECT_TRUE(open_fails("{\"\xc0\xaf\":1}", "", {"not valid UTF-8", "0xc0"}));      // overlong '/'
  EXPECT_TRUE(open_fails("{\"\xed\xa0\x80\":1}", "", {"not valid UTF-8", "0xed"}));  // surrogate
  EXPECT_TRUE(open_fails("{\"\xe2\x82\":1}", "", {"not valid UTF-8"}));              // cut short
}

TEST(SafetensorsMalformed, InvalidJson) {
  EXPECT_TRUE(open_fails("{\"a\": {", "", {"not valid JSON"}));
  EXPECT_TRUE(open_fails("{} {}", "", {"not valid JSON"}));
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
  EXPECT_TRUE(open_fails("[1, 2]", "", {"must be a JSON object starting with '{'", "found '['"}));
  EXPECT_TRUE(open_fails(" {}", "", {"starting with '{'", "found ' '"}));
  EXPECT_TRUE(open_fails("", "", {"starting with '{'", "empty header"}));
}

TEST(SafetensorsMalformed, DuplicateTensorNames) {
  std::string header = obj({entry("a", "F32", "[2]", 0, 8), entry("a", "F32", "[2]", 8, 16)});
  EXPECT_TRUE(open_fails(header, std::string(16, '\0'), {"duplicate tensor name 'a'"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                         std::string(4, '\0'), {"key 'dtype' appears twice inside 'a'"}));
}

TEST(SafetensorsMalformed, MetadataNotStringMap) {
  EXPECT_TRUE(open_fails("{\"__metadata__\":{\"format\":\"pt\",\"step\":3}}", "",
                         {"__metadata__ key 'step'", "3", "expected a string"}));
  EXPECT_TRUE(
      open_fails("{\"__metadata__\":[\"pt\"]}", "", {"__metadata__ is a JSON array", "object of strings"}));
}

TEST(SafetensorsMalformed, NegativeOrNonIntegerShape) {
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[-1]", 0, 0)}), "",
                         {"tensor 'a'", "shape[0] = -1", "non-negative integer"}));
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[2.5]", 0, 0)}), "", {"shape[0] = 2.5"}));
  EXPECT_TRUE(open_fails(obj({entry("a", "F32", "[0,9223372036854775808]", 0, 0)}), "",
                         {"shape[1] = 9223372036854775808", "supported maximum"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}",
                         std::string(4, '\0'), {"tensor 'a' has shape 3", "array"}));
}

TEST(SafetensorsMalformed, BadDataOffsets) {
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
                         std::string(4, '\0'), {"tensor 'a'", "[0,4,8]", "two integers"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", "",
                         {"data_offsets[0] = -4"}));
}

TEST(SafetensorsMalformed, MissingFieldsAndWrongTypes) {
  EXPECT_TRUE(open_fails("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0'),
                         {"tensor 'a' has no 'dtype' field"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", std::string(4, '\0'),
                         {"tensor 'a' has no 'shape' field"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", std::string(4, '\0'),
                         {"tensor 'a' has no 'data_offsets' field"}));
  EXPECT_TRUE(open_fails("{\"a\":7}", "", {"tensor 'a' is described by a JSON number"}));
  EXPECT_TRUE(open_fails("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, '\0'),
                         {"tensor 'a' has dtype 5"}));
}

TEST(SafetensorsMalformed, DeepNestingRefused) {
  std::string deep = fmt::format("{{\"a\":{}{}}}", std::string(200, '['), std::string(200, ']'));
  EXPECT_TRUE(open_fails(deep, "", {"nests deeper than 128"}));
}

TEST(SafetensorsMalformed, NotARegularFile) {
  TempDir dir;
  EXPECT_TRUE(fails_with([&] { SafetensorsFile::open(dir.path()); }, {dir.path(), "not a regular file"}));
  EXPECT_TRUE(fails_with([&] { SafetensorsFile::open(dir.file("absent.safetensors")); },
                         {"absent.safetensors", "cannot open"}));
}

// Every truncation and many single-byte corruptions of a valid file: each opens or throws lt::Error.
TEST(SafetensorsMalformed, MutationsNeverCrash) {
  std::string header = obj({"\"__metadata__\":{\"format\":\"pt\"}", entry("a", "F32", "[2]", 0, 8),
                            entry("b", "BF16", "[1,2]", 8, 12)});
  std::string image = test::safetensors_image(header, std::string(12, '\x3f'));
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  int opened = 0, refused = 0;
  auto attempt = [&](const std::string& bytes) {
    // Unlink rather than truncate: ext4 flushes a truncated-and-rewritten file on close (auto_da_alloc).
    std::remove(path.c_str());
    test::write_bytes(path, bytes);
    try {
      SafetensorsFile::open(path);
      ++opened;
    } catch (const lt::Error&) {
      ++refused;
    }
  };
  for (size_t len = 0; len < image.size(); ++len) attempt(image.substr(0, len));
  EXPECT_EQ(opened, 0);  // no strict prefix of a valid file is valid
  const char replacements[] = {'\0', '\xff', '"', '9', '{', ' '};
  for (size_t i = 0; i < image.size(); ++i) {
    for (char r : replacements) {
      std::string mutated = image;
      mutated[i] = r;
      attempt(mutated);
    }
  }
  EXPECT_GT(refused, int(image.size()));
  EXPECT_GT(opened, 0);  // mutations of the data bytes stay valid
}

}  // namespace
}  // namespace lt::io
