// `leantune train` and the ownership rule (io/output_dir.h): a run refused or completed leaves every file
// it did not write byte-identical (a tree snapshot before and after): links, a user's model shards and
// checkpoint-like folders, the base model's directory; stale staging of an interrupted run is removed, and
// a resumed state that this data cannot reach is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.h"
#include "io/json_file.h"
#include "io/output_dir.h"
#include "support/test_support.h"
#include "support/tree_snapshot.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

namespace fs = std::filesystem;

// 16 train examples, 4 per step: 4 steps per epoch; a checkpoint every step, the last one kept (unless
// `extra` sets max_steps or save_total_limit).
test::CliResult train(const test::TempDir& dir, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train",
                                   "--base_model",
                                   dir.file("model"),
                                   "--data_path",
                                   dir.file("data.jsonl"),
                                   "--output_dir",
                                   out,
                                   "--random_init",
                                   "--finetune",
                                   "full",
                                   "--device",
                                   "cpu",
                                   "--precision",
                                   "fp32",
                                   "--batch_size",
                                   "4",
                                   "--micro_batch_size",
                                   "2",
                                   "--val_set_size",
                                   "0",
                                   "--save_steps",
                                   "1",
                                   "--logging_steps",
                                   "10"};
  auto set = [&](const char* key, const char* value) {
    if (std::find(extra.begin(), extra.end(), key) == extra.end()) args.insert(args.end(), {key, value});
  };
  set("--max_steps", "3");
  set("--save_total_limit", "1");
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_cli(args);
}

void write_inputs(const test::TempDir& dir) {
  test::write_tiny_model_dir(dir.file("model"));
  std::ofstream(dir.file("model/generation_config.json")) << "{\"bos_token_id\": 1}";
  test::write_tiny_dataset(dir.file("data.jsonl"), 16);
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(TrainOwnership, TheBaseModelDirectoryAndDirectoriesAroundInputsAreRefused) {
  test::TempDir dir;
  write_inputs(dir);
  const test::TreeSnapshot before = test::snapshot_tree(dir.path());
  for (const char* extra : {"", "--overwrite_output_dir"}) {
    std::vector<std::string> more;
    if (*extra) more.push_back(extra);
    test::CliResult r = train(dir, dir.file("model"), more);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find("which is the input directory base_model"), std::string::npos) << r.err;
    r = train(dir, dir.path(), more);  // holds the model and the data
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find("contains the input directory base_model"), std::string::npos) << r.err;
    r = train(dir, dir.file("data.jsonl"), more);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find("which is the input file data_path"), std::string::npos) << r.err;
    r = train(dir, dir.file("model/out"), more);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find("is inside the input directory base_model"), std::string::npos) << r.err;
    EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path())), "");
  }
}

// A directory of the user's: links to files elsewhere, model shards, checkpoint-like folders.
void write_users_output_dir(const test::TempDir& dir, const std::string& out) {
  write_file(dir.file("elsewhere/tok.model"), "the user's tokenizer");
  write_file(dir.file("elsewhere/gen.json"), "{\"user\": true}");
  write_file(out + "/model-00001-of-00002.safetensors", "the user's shard");
  write_file(out + "/model.safetensors.index.json", "{\"weight_map\": {}}");
  write_file(out + "/checkpoint-2/notes.txt", "the user's folder");
  write_file(out + "/checkpoint-0001/trainer_state.json", "{}");  // a backup of a leantune checkpoint
  write_file(out + "/checkpoint-0001/.leantune", "{}");
}

TEST(TrainOwnership, LinksInTheOutputDirectoryAreRefusedAndTheirTargetsKept) {
  test::TempDir dir;
  write_inputs(dir);
  const std::string out = dir.file("out");
  write_users_output_dir(dir, out);
  fs::create_symlink(dir.file("elsewhere/tok.model"), out + "/tokenizer.model");
  fs::create_symlink(dir.file("elsewhere/gen.json"), out + "/generation_config.json");
  const test::TreeSnapshot before = test::snapshot_tree(dir.path());
  test::CliResult r = train(dir, out);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path())), "");
  r = train(dir, out, {"--overwrite_output_dir"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path())), "");
}

TEST(TrainOwnership, AUsersDirectoryIsRefusedAndWithOverwriteKeepsEveryFile) {
  test::TempDir dir;
  write_inputs(dir);
  const std::string out = dir.file("out");
  write_users_output_dir(dir, out);
  fs::remove_all(out + "/checkpoint-2");  // this one would collide with step 2 (next test)
  write_file(out + "/checkpoint-7/trainer_state.json", "{}");
  const test::TreeSnapshot before = test::snapshot_tree(dir.path());
  test::CliResult r = train(dir, out);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("overwrite_output_dir"), std::string::npos) << r.err;
  EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path())), "");

  // Claimed: the run saves checkpoints 1..3 and rotates (save_total_limit 1) only its own.
  r = train(dir, out, {"--overwrite_output_dir"});
  ASSERT_EQ(r.code, 0) << r.err;
  const test::TreeSnapshot after = test::snapshot_tree(dir.path());
  EXPECT_EQ(test::tree_changes(before, after, /*only_lost=*/true), "") << "no file of the user's changed";
  EXPECT_TRUE(fs::is_regular_file(out + "/checkpoint-3/.leantune"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-1"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-2"));
  EXPECT_TRUE(fs::is_regular_file(out + "/model.safetensors"));
  std::ifstream copied(out + "/generation_config.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(copied), {}), "{\"bos_token_id\": 1}");
  for (const auto& [path, what] : after)
    EXPECT_EQ(path.find("leantune-staging"), std::string::npos) << "staging left behind: " << path;
}

TEST(TrainOwnership, AUsersFolderNamedLikeACheckpointIsNeverReplaced) {
  test::TempDir dir;
  write_inputs(dir);
  const std::string out = dir.file("out");
  write_users_output_dir(dir, out);
  const test::TreeSnapshot before = test::snapshot_tree(dir.path());
  test::CliResult r = train(dir, out, {"--overwrite_output_dir"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find(out + "/checkpoint-2 exists and leantune did not write it"), std::string::npos)
      << r.err;
  EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path()), /*only_lost=*/true), "");
}

TEST(TrainOwnership, TwoRunsCannotShareAnOutputDirectory) {
  test::TempDir dir;
  write_inputs(dir);
  const io::OutputDir held(dir.file("out"), {.who = "the other run", .inputs = {}, .overwrite = false});
  test::CliResult r = train(dir, dir.file("out"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("another leantune run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("out/checkpoint-1")));
}

TEST(TrainOwnership, StaleStagingOfThisDirectoryIsRemovedAndOnlyThat) {
  test::TempDir dir;
  write_inputs(dir);
  const std::string out = dir.file("out");
  ASSERT_EQ(train(dir, out, {"--max_steps", "2"}).code, 0);
  // An interrupted run's leftovers (leantune's names and marker) and the user's look-alikes (no marker).
  for (const char* stale : {"checkpoint-5.tmp-abc123", ".leantune-staging-00ff00",
                            "checkpoint-1.deleting-0a0b0c", "checkpoint-4.tmp-abc123.old-123456"}) {
    write_file(out + "/" + stale + "/.leantune", "{}");
    write_file(out + "/" + stale + "/model.safetensors", "partial");
  }
  write_file(out + "/checkpoint-6.tmp-abc123/notes.txt", "the user's");
  write_file(out + "/notes.tmp-abc123/notes.txt", "the user's");
  write_file(out + "/.leantune-staging-zz/notes.txt", "the user's");
  const test::TreeSnapshot users = test::snapshot_tree(out + "/checkpoint-6.tmp-abc123");
  test::CliResult r = train(dir, out, {"--resume", "latest", "--max_steps", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* stale : {"checkpoint-5.tmp-abc123", ".leantune-staging-00ff00",
                            "checkpoint-1.deleting-0a0b0c", "checkpoint-4.tmp-abc123.old-123456"})
    EXPECT_FALSE(fs::exists(out + "/" + stale)) << stale;
  EXPECT_EQ(test::tree_changes(users, test::snapshot_tree(out + "/checkpoint-6.tmp-abc123")), "");
  EXPECT_TRUE(fs::exists(out + "/notes.tmp-abc123/notes.txt"));
  EXPECT_TRUE(fs::exists(out + "/.leantune-staging-zz/notes.txt"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-3/trainer_state.json"));
}

TEST(TrainOwnership, AResumeStateThisDataCannotReachIsRefusedNamingTheField) {
  struct Case {
    const char* field;
    int64_t global_step, data_epoch, data_index;
  };
  // After 2 steps of 2 micro-batches: step 2, epoch 0, micro-batch 4 (of 8 per epoch).
  for (const Case& c : {Case{"data.index", 2, 0, 1000000000000}, Case{"data.index", 2, 0, 3},
                        Case{"global_step", 7, 0, 4}, Case{"data.epoch", 2, 5, 4}}) {
    test::TempDir dir;
    write_inputs(dir);
    const std::string out = dir.file("out");
    ASSERT_EQ(train(dir, out, {"--max_steps", "2"}).code, 0);
    const std::string state = out + "/checkpoint-2/trainer_state.json";
    nlohmann::json j = io::read_json_file(state);
    ASSERT_EQ(j["data"]["index"], 4);
    j["global_step"] = c.global_step;
    j["data"]["epoch"] = c.data_epoch;
    j["data"]["index"] = c.data_index;
    io::write_json_file_atomic(state, j);
    const test::TreeSnapshot before = test::snapshot_tree(dir.path());
    test::CliResult r = train(dir, out, {"--resume", out + "/checkpoint-2", "--max_steps", "4"});
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.err.find(state + ": " + c.field), std::string::npos) << r.err;
    EXPECT_EQ(test::tree_changes(before, test::snapshot_tree(dir.path())), "") << c.field;
  }
}

}  // namespace
}  // namespace lt::cli
