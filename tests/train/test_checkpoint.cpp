// Checkpoint contents, atomicity (a failed write leaves no checkpoint-STEP) and save_total_limit rotation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "support/test_support.h"
#include "train/checkpoint.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Checkpoint, HoldsWeightsOptimizerStateDataPositionAndConfig) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 2;
  c.save_steps = 1;
  c.save_total_limit = 0;
  validate(c);
  TrainResult r = run_training(c, {.quiet = true});
  const std::string ckpt = c.output_dir + "/checkpoint-1";
  EXPECT_EQ(entries_of(ckpt),
            (std::vector<std::string>{".leantune", "config.json", "model.safetensors",
                                      "optimizer.safetensors", "train_config.yaml", "trainer_state.json"}));
  TrainerState s = read_trainer_state(ckpt);
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(s.data_epoch, 0);
  EXPECT_EQ(s.data_index, 2);  // two micro-batches of 2 rows per step
  EXPECT_EQ(s.rng_seed, 3u);
  EXPECT_EQ(s.last_lr, 0.0);  // step 1 is the warmup step: HF's schedule starts at 0
  EXPECT_EQ(read_trainer_state(c.output_dir + "/checkpoint-2").last_lr,
            LrSchedule(LrScheduleType::Linear, c.learning_rate, 1, 2).lr(1));
  EXPECT_EQ(load_train_config(ckpt + "/train_config.yaml", {}), c);

  auto optimizer = io::SafetensorsFile::open(ckpt + "/optimizer.safetensors");
  auto model = io::CheckpointReader::open(ckpt);
  ASSERT_NE(optimizer->find("step"), nullptr);
  EXPECT_EQ(*reinterpret_cast<const double*>(optimizer->find("step")->data), 1.0);
  for (const std::string& name : model->names()) {
    const io::SafetensorsEntry* m = optimizer->find(name + ".exp_avg");
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->shape, model->entry(name).shape);
    EXPECT_EQ(m->dtype, io::StDType::F64);  // fp64 runs keep fp64 moments
    EXPECT_NE(optimizer->find(name + ".exp_avg_sq"), nullptr) << name;
    EXPECT_EQ(model->entry(name).dtype, io::StDType::F64);  // weights in the compute dtype: resume is exact
  }
  EXPECT_EQ(r.last_checkpoint, c.output_dir + "/checkpoint-2");
  // The final model sits in output_dir itself, beside the run's logs.
  for (const char* f : {"config.json", "model.safetensors", "metrics.jsonl", "runs"})
    EXPECT_TRUE(fs::exists(c.output_dir + "/" + f)) << f;
}

TEST(Checkpoint, KeepsOnlyTheLastSaveTotalLimit) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 5;
  c.save_steps = 1;
  c.save_total_limit = 2;
  run_training(c, {.quiet = true});
  auto all = list_checkpoints(c.output_dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 4);
  EXPECT_EQ(all[1].first, 5);
  EXPECT_EQ(resolve_resume_dir("latest", c.output_dir), c.output_dir + "/checkpoint-5");
}

TEST(Checkpoint, RotationInterruptedBetweenRenameAndDeleteLeavesNoListedPartialCheckpoint) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 3;
  c.save_steps = 1;
  c.save_total_limit = 1;
  TrainerHooks hooks{.quiet = true};
  std::string doomed;
  hooks.between_rename_and_delete = [&](const std::string& path) {
    doomed = path;
    fs::remove(path + "/model.safetensors");  // the kill came mid-delete: half of it is gone
    LT_FAIL("killed (simulated) while deleting {}", path);
  };
  EXPECT_THROW(run_training(c, hooks), Error);
  EXPECT_EQ(doomed.rfind(c.output_dir + "/checkpoint-1.deleting-", 0), 0u) << doomed;
  EXPECT_TRUE(fs::is_directory(doomed));
  auto all = list_checkpoints(c.output_dir);
  ASSERT_EQ(all.size(), 1u) << "the half-deleted checkpoint is not listed";
  EXPECT_EQ(all[0].first, 2);
  // The next run on this directory removes the leftover, then continues from checkpoint-2.
  c.resume = "latest";
  TrainResult r = run_training(c, {.quiet = true});
  EXPECT_EQ(r.start_step, 2);
  EXPECT_EQ(r.final_step, 3);
  EXPECT_FALSE(fs::exists(doomed));
  EXPECT_EQ(
      entries_of(c.output_dir),
      (std::vector<std::string>{".leantune", "README.md", "checkpoint-3", "config.json", "metrics.jsonl",
                                "model.safetensors", "runs"}));  // README.md: the model card
}

TEST(Checkpoint, FailedWriteLeavesNoCheckpointDirectory) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 3;
  c.save_steps = 1;
  TrainerHooks hooks{.quiet = true};
  hooks.write_extra = [](const std::string& tmp) {
    EXPECT_TRUE(fs::exists(tmp + "/optimizer.safetensors"));  // the failure comes after most files
    if (tmp.find("checkpoint-2") != std::string::npos) LT_FAIL("disk full (simulated) while writing {}", tmp);
  };
  EXPECT_THROW(run_training(c, hooks), Error);
  EXPECT_EQ(entries_of(c.output_dir),
            (std::vector<std::string>{".leantune", "checkpoint-1", "metrics.jsonl", "runs"}))
      << "neither checkpoint-2 nor a temporary directory may remain";
  // The run can continue from the last complete checkpoint.
  c.resume = "latest";
  TrainResult r = run_training(c, {.quiet = true});
  EXPECT_EQ(r.start_step, 1);
  EXPECT_EQ(r.final_step, 3);
}

TEST(Checkpoint, ResumeRefusesAChangedDataOrder) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 1;
  run_training(c, test::quiet_hooks());
  c.resume = "latest";
  c.max_steps = 2;
  c.micro_batch_size = 1;
  try {
    run_training(c, test::quiet_hooks());
    FAIL() << "a different micro_batch_size must be refused on resume";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'micro_batch_size'"), std::string::npos) << e.what();
  }
  c.micro_batch_size = 2;
  EXPECT_EQ(run_training(c, test::quiet_hooks()).final_step, 2);
  // A fresh run into the same output_dir is refused: it would mix two runs' checkpoints.
  c.resume = "";
  try {
    run_training(c, test::quiet_hooks());
    FAIL() << "a fresh run among old checkpoints must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'output_dir'"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ResumeErrorsNameTheKey) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 10);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.resume = "latest";
  try {
    run_training(c, {.quiet = true});
    FAIL() << "resume latest without checkpoints must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'resume' is latest"), std::string::npos) << e.what();
  }
}

// A trainer_state.json with a field missing or of another type is refused naming the file and the field, in
// leantune's words (not nlohmann's exception text); a step above int64's range does not wrap.
TEST(Checkpoint, TrainerStateFieldsAreCheckedByName) {
  test::TempDir dir;
  const nlohmann::json good = {{"global_step", 2},
                               {"epoch", 0.5},
                               {"data", {{"epoch", 0}, {"index", 4}}},
                               {"rng", {{"seed", 3}, {"offset", 7}}},
                               {"scheduler", {{"last_lr", 1e-3}, {"total_steps", 8}}}};
  auto write = [&](const nlohmann::json& j) { std::ofstream(dir.file("trainer_state.json")) << j.dump(); };
  write(good);
  EXPECT_EQ(read_trainer_state(dir.path()).data_index, 4);
  struct Case {
    nlohmann::json state;
    const char* field;
  };
  nlohmann::json text_step = good, no_index = good, huge_step = good, negative_seed = good;
  text_step["global_step"] = "two";
  no_index["data"].erase("index");
  huge_step["global_step"] = uint64_t(1) << 63;
  negative_seed["rng"]["seed"] = -3;
  for (const Case& c : {Case{text_step, "'global_step'"}, Case{no_index, "'data.index'"},
                        Case{huge_step, "'global_step'"}, Case{negative_seed, "'rng.seed'"}}) {
    write(c.state);
    try {
      read_trainer_state(dir.path());
      ADD_FAILURE() << "accepted " << c.state.dump();
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("trainer_state.json"), std::string::npos) << what;
      EXPECT_NE(what.find(c.field), std::string::npos) << what;
      EXPECT_EQ(what.find("json.exception"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace lt::train
