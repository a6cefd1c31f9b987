// Sharded training checkpoints (train/sharded_checkpoint.h) in one process: a zero1 run of one rank writes
// one rank file and the manifest, and a run with sharding none resumes from it bit for bit (the same
// element-wise AdamW over whole tensors). A broken manifest, a missing rank file or a tensor of another
// shape is refused with one message naming the file and the field or tensor. (Several ranks, re-sharding:
// tests/dist/mpi/test_mpi_sharded_checkpoint.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/json_file.h"
#include "support/test_support.h"
#include "train/run_training.h"
#include "train/sharded_checkpoint.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

class ShardedCheckpointOneProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_tiny_model_dir(dir_.file("model"));
    test::write_tiny_dataset(dir_.file("data.jsonl"), 16);
    straight_ = test::tiny_train_config(dir_.path());
    straight_.batch_size = 4;
    straight_.micro_batch_size = 2;
    straight_.max_steps = 4;
    straight_.save_steps = 2;
    straight_.sharding = dist::Sharding::Zero1;
    straight_.output_dir = dir_.file("straight");
    whole_ = run_training(straight_, test::quiet_hooks());
  }
  std::string checkpoint() const { return straight_.output_dir + "/checkpoint-2"; }

  // The error of resuming from a copy of checkpoint-2 that `damage` changed.
  std::string resume_error(const std::string& name, const std::function<void(const std::string&)>& damage) {
    const std::string copy = dir_.file(name + "/checkpoint-2");
    fs::create_directories(copy);
    fs::copy(checkpoint(), copy, fs::copy_options::recursive);
    damage(copy);
    TrainConfig c = straight_;
    c.output_dir = dir_.file(name + "-out");
    c.resume = copy;
    try {
      run_training(c, test::quiet_hooks());
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  // Rewrites the copy's manifest with `edit` applied.
  static void edit_manifest(const std::string& copy, const std::function<void(nlohmann::json&)>& edit) {
    const std::string path = copy + "/" + kOptimizerManifestFile;
    nlohmann::json j = io::read_json_file(path);
    edit(j);
    io::write_json_file_atomic(path, j);
  }

  test::TempDir dir_;
  TrainConfig straight_;
  TrainResult whole_;
};

TEST_F(ShardedCheckpointOneProcess, HoldsARankFileAndAManifestAndResumesUnshardedBitForBit) {
  EXPECT_TRUE(fs::is_regular_file(checkpoint() + "/" + optimizer_shard_file(0, 1)));
  EXPECT_FALSE(fs::exists(checkpoint() + "/optimizer.safetensors"));
  const nlohmann::json manifest = io::read_json_file(checkpoint() + "/" + kOptimizerManifestFile);
  EXPECT_EQ(manifest["world_size"], 1);
  EXPECT_EQ(manifest["sharding"], "zero1");
  EXPECT_EQ(manifest["step"], 2);
  ASSERT_FALSE(manifest["tensors"].empty());
  EXPECT_EQ(manifest["tensors"][0]["name"], "model.embed_tokens.weight.exp_avg");
  EXPECT_EQ(manifest["tensors"][0]["shape"], nlohmann::json({24, 16}));
  EXPECT_EQ(manifest["tensors"][0]["shards"],
            nlohmann::json::parse(R"([{"rank": 0, "begin": 0, "end": 384}])"));

  TrainConfig none = straight_;
  none.sharding = dist::Sharding::None;
  none.output_dir = dir_.file("none");
  none.resume = checkpoint();
  const TrainResult r = run_training(none, test::quiet_hooks());
  ASSERT_EQ(r.losses.size(), 2u);
  EXPECT_EQ(r.losses[0], whole_.losses[2]);
  EXPECT_EQ(r.losses[1], whole_.losses[3]);
  EXPECT_EQ(test::read_checkpoint_f64(none.output_dir), test::read_checkpoint_f64(straight_.output_dir));
}

TEST_F(ShardedCheckpointOneProcess, ABrokenManifestIsRefusedNamingTheFieldAndFile) {
  std::string e = resume_error("world", [](const std::string& copy) {
    edit_manifest(copy, [](nlohmann::json& j) { j["world_size"] = "two"; });
  });
  EXPECT_NE(e.find("optimizer.manifest.json: field 'world_size' is \"two\", expected an integer"),
            std::string::npos)
      << e;
  e = resume_error("gap", [](const std::string& copy) {
    edit_manifest(copy, [](nlohmann::json& j) { j["tensors"][1]["shards"][0]["begin"] = 5; });
  });
  EXPECT_NE(e.find("tensors[1] ('model.embed_tokens.weight.exp_avg_sq') shards[0]: [begin, end) is [5, 384), "
                   "expected to start at 0"),
            std::string::npos)
      << e;
  e = resume_error("files", [](const std::string& copy) {
    edit_manifest(copy, [](nlohmann::json& j) { j["files"][0] = "../elsewhere.safetensors"; });
  });
  EXPECT_NE(e.find("field 'files[0]' is \"../elsewhere.safetensors\", expected "
                   "\"optimizer.rank00000-of-00001.safetensors\""),
            std::string::npos)
      << e;
}

TEST_F(ShardedCheckpointOneProcess, AMissingRankFileIsRefusedNamingIt) {
  const std::string e = resume_error(
      "missing", [](const std::string& copy) { fs::remove(copy + "/" + optimizer_shard_file(0, 1)); });
  EXPECT_NE(e.find("rank file optimizer.rank00000-of-00001.safetensors is missing"), std::string::npos) << e;
}

TEST_F(ShardedCheckpointOneProcess, ATensorOfAnotherShapeIsRefusedNamingIt) {
  const std::string e = resume_error("shape", [](const std::string& copy) {
    edit_manifest(copy, [](nlohmann::json& j) { j["tensors"][0]["shape"] = {16, 24}; });
  });
  EXPECT_NE(e.find("tensor 'model.embed_tokens.weight.exp_avg' has shape [16, 24], but this run trains it "
                   "with shape [24, 16]"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace lt::train
