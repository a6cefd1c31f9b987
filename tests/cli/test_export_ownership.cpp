// `leantune export` and the ownership rule (io/output_dir.h): every refused or completed export leaves the
// user's files byte-identical (a tree snapshot before and after), whatever --output_dir points at.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.h"
#include "support/test_support.h"
#include "support/tree_snapshot.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

const std::string kGolden = "tests/model/golden/peft_llama";

// X/model and X/adapter (copies of the PEFT golden), and the user's own files beside them.
void write_user_tree(const std::string& x) {
  fs::create_directories(x);
  fs::copy(test::source_path(kGolden + "/base"), x + "/model", fs::copy_options::recursive);
  fs::copy(test::source_path(kGolden + "/adapter"), x + "/adapter", fs::copy_options::recursive);
  fs::create_directories(x + "/adapter/checkpoint-3");
  std::ofstream(x + "/adapter/checkpoint-3/trainer_state.json") << "{}";
  std::ofstream(x + "/notes.txt") << "the user's notes";
}

test::CliResult export_to(const std::string& x, const std::string& out, bool overwrite = false) {
  std::vector<std::string> args = {"export",       "--base_model", x + "/model",   "--adapter",
                                   x + "/adapter", "--merge",      "--output_dir", out};
  if (overwrite) args.push_back("--overwrite_output_dir");
  return test::run_cli(args);
}

TEST(ExportOwnership, RefusesAnOutputDirectoryThatHoldsOrIsInsideItsInputs) {
  test::TempDir tmp;
  const std::string x = tmp.file("x");
  write_user_tree(x);
  const test::TreeSnapshot before = test::snapshot_tree(tmp.path());
  for (bool overwrite : {false, true}) {
    test::CliResult r = export_to(x, x, overwrite);  // the directory holding the base model and adapter
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find("contains the input directory --base_model"), std::string::npos) << r.err;
    EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(tmp.path())), "");

    r = export_to(x, x + "/model", overwrite);  // the base model's own directory
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("which is the input directory --base_model"), std::string::npos) << r.err;
    r = export_to(x, x + "/adapter/merged", overwrite);  // inside the adapter
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("is inside the input directory --adapter"), std::string::npos) << r.err;
    EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(tmp.path())), "");
  }
}

TEST(ExportOwnership, AUsersDirectoryIsRefusedAndWithOverwriteKeepsEveryFile) {
  test::TempDir tmp;
  const std::string x = tmp.file("x"), y = tmp.file("y");
  write_user_tree(x);
  fs::create_directories(y + "/sub");
  std::ofstream(y + "/notes.txt") << "keep me";
  std::ofstream(y + "/sub/a.bin") << "A";
  std::ofstream(y + "/model-00001-of-00002.safetensors") << "the user's shard";
  std::ofstream(y + "/model.safetensors.index.json") << "{\"weight_map\": {}}";
  const test::TreeSnapshot before = test::snapshot_tree(tmp.path());

  test::CliResult r = export_to(x, y);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find(y), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("overwrite_output_dir"), std::string::npos) << r.err;
  EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(tmp.path())), "");

  r = export_to(x, y, /*overwrite=*/true);
  ASSERT_EQ(r.code, 0) << r.err;
  const test::TreeSnapshot after = test::snapshot_tree(tmp.path());
  EXPECT_EQ(test::tree_changes(before, after, /*only_lost=*/true), "") << "no file of the user's changed";
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json", ".leantune"})
    EXPECT_TRUE(fs::is_regular_file(y + "/" + f)) << f;
  for (const auto& [path, what] : after)
    EXPECT_EQ(path.find("leantune-staging"), std::string::npos) << "staging left behind: " << path;
}

TEST(ExportOwnership, ANewDirectoryIsWrittenThroughStagingAndMayBeExportedIntoAgain) {
  test::TempDir tmp;
  const std::string x = tmp.file("x"), y = tmp.file("new/y");
  write_user_tree(x);
  ASSERT_EQ(export_to(x, y).code, 0);
  const test::TreeSnapshot first = test::snapshot_tree(y);
  EXPECT_EQ(first.count(".leantune"), 1u);
  test::CliResult r = export_to(x, y);  // its own directory: written again, the same bytes
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(test::tree_changes(first, test::snapshot_tree(y)), "");

  // In shards, then in one file again: the shards leantune wrote go, a shard-like file of the user's stays.
  std::ofstream(y + "/model-00009-of-00009.safetensors") << "the user's";
  r = test::run_cli({"export", "--base_model", x + "/model", "--adapter", x + "/adapter", "--merge",
                     "--output_dir", y, "--max_shard_gb", "0.00001"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(y + "/model.safetensors.index.json"));
  int shards = 0;
  for (const auto& [path, what] : test::snapshot_tree(y)) shards += path.rfind("model-00001-of-", 0) == 0;
  EXPECT_EQ(shards, 1) << "a first shard of several";
  ASSERT_EQ(export_to(x, y).code, 0);
  test::TreeSnapshot last = test::snapshot_tree(y);
  EXPECT_EQ(last.erase("model-00009-of-00009.safetensors"), 1u);
  EXPECT_EQ(test::tree_changes(first, last), "") << "the earlier shards and index are removed";
}

TEST(ExportOwnership, ALinkInTheOutputDirectoryIsRefusedAndItsTargetKept) {
  test::TempDir tmp;
  const std::string x = tmp.file("x"), y = tmp.file("y");
  write_user_tree(x);
  ASSERT_EQ(export_to(x, y).code, 0);
  std::ofstream(tmp.file("elsewhere.json")) << "the user's file";
  fs::remove(y + "/generation_config.json");
  fs::create_symlink(tmp.file("elsewhere.json"), y + "/generation_config.json");
  const test::TreeSnapshot before = test::snapshot_tree(tmp.path());
  for (bool overwrite : {false, true}) {
    test::CliResult r = export_to(x, y, overwrite);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find(y + "/generation_config.json is a symbolic link"), std::string::npos) << r.err;
    EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(tmp.path())), "");
  }
}

}  // namespace
}  // namespace lt
