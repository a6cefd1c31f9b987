// write_file_atomic, AtomicDirectory, read_json_file / write_json_file_atomic.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "st_test_util.h"

namespace lt::io {
namespace {

namespace fs = std::filesystem;
using test::fails_with;
using test::TempDir;

size_t entries_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesAndReplaces) {
  TempDir dir;
  std::string path = dir.file("f.txt");
  write_file_atomic(path, "first");
  EXPECT_EQ(test::read_bytes(path), "first");
  write_file_atomic(path, std::string("sec\0nd", 6));
  EXPECT_EQ(test::read_bytes(path), std::string("sec\0nd", 6));
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(AtomicFile, UncommittedWriterLeavesNothing) {
  TempDir dir;
  std::string path = dir.file("f.txt");
  write_file_atomic(path, "old");
  {
    AtomicFileWriter writer(path);
    writer.write("new", 3);
    EXPECT_TRUE(fs::exists(writer.temp_path()));
    EXPECT_EQ(fs::path(writer.temp_path()).parent_path(), fs::path(path).parent_path());
  }
  EXPECT_EQ(test::read_bytes(path), "old");
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(AtomicFile, UnwritableDirectoryNamed) {
  TempDir dir;
  std::string path = dir.file("no/such/dir/f.txt");
  EXPECT_TRUE(fails_with([&] { write_file_atomic(path, "x"); }, {path, "cannot create"}));
}

TEST(AtomicDirectory, CommitRenamesAndReplaces) {
  TempDir root;
  std::string final_dir = root.file("ckpt");
  {
    AtomicDirectory staged(final_dir);
    EXPECT_NE(staged.path(), final_dir);
    write_file_atomic(staged.file("a.txt"), "A1");
    fs::create_directory(staged.file("sub"));
    write_file_atomic(staged.file("sub/b.txt"), "B1");
    EXPECT_FALSE(fs::exists(final_dir));
    staged.commit();
  }
  EXPECT_EQ(test::read_bytes(final_dir + "/a.txt"), "A1");
  EXPECT_EQ(test::read_bytes(final_dir + "/sub/b.txt"), "B1");
  {
    AtomicDirectory staged(final_dir);
    write_file_atomic(staged.file("a.txt"), "A2");
    staged.commit();
  }
  EXPECT_EQ(test::read_bytes(final_dir + "/a.txt"), "A2");
  EXPECT_FALSE(fs::exists(final_dir + "/sub")) << "the previous directory is replaced, not merged";
  EXPECT_EQ(entries_in(root.path()), 1u) << "no .tmp- or .old- directory left behind";
}

TEST(AtomicDirectory, UncommittedIsRemoved) {
  TempDir root;
  std::string temp;
  {
    AtomicDirectory staged(root.file("ckpt"));
    temp = staged.path();
    write_file_atomic(staged.file("a.txt"), "A");
    EXPECT_TRUE(fs::is_directory(temp));
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(root.file("ckpt")));
  EXPECT_EQ(entries_in(root.path()), 0u);
}

TEST(JsonFile, RoundTripWithIndent) {
  TempDir dir;
  std::string path = dir.file("c.json");
  nlohmann::json value = {{"r", 16}, {"alpha", 32.5}, {"modules", {"q_proj", "v_proj"}}, {"name", "\u00e9"}};
  write_json_file_atomic(path, value, 2);
  std::string text = test::read_bytes(path);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("\n  \"alpha\": 32.5"), std::string::npos) << text;
  EXPECT_EQ(read_json_file(path), value);

  nlohmann::ordered_json ordered;
  ordered["z"] = 1;
  ordered["a"] = 2;
  write_json_file_atomic(path, ordered, -1);
  EXPECT_EQ(test::read_bytes(path), "{\"z\":1,\"a\":2}\n");
  EXPECT_EQ(read_ordered_json_file(path).begin().key(), "z");
}

TEST(JsonFile, ParseErrorNamesFileAndPosition) {
  TempDir dir;
  std::string path = dir.file("bad.json");
  test::write_bytes(path, "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  EXPECT_TRUE(
      fails_with([&] { read_json_file(path); }, {path, "line 3, column 8", "byte 20", "unexpected ']'"}));
  test::write_bytes(path, "");
  EXPECT_TRUE(fails_with([&] { read_json_file(path); }, {path, "invalid JSON", "line 1"}));
  EXPECT_TRUE(fails_with([&] { read_json_file(dir.file("absent.json")); }, {"absent.json", "cannot open"}));
  EXPECT_TRUE(fails_with([&] { read_json_file(dir.path()); }, {dir.path(), "is a directory"}));
}

TEST(JsonFile, WriteRefusesInvalidUtf8) {
  TempDir dir;
  std::string path = dir.file("x.json");
  nlohmann::json value = {{"k", std::string("\xff")}};
  EXPECT_TRUE(fails_with([&] { write_json_file_atomic(path, value); }, {path, "cannot serialize"}));
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace lt::io
