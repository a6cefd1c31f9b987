// `leantune train` end to end on a tiny random-init model, and its refusals: every invalid setting stops
// the command before any work, with a non-zero exit and a message naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.h"
#include "support/test_support.h"
#include "train/train_test_util.h"

namespace lt::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> tiny_args(const test::TempDir& dir) {
  return {"train",
          "--base_model",
          dir.file("model"),
          "--data_path",
          dir.file("data.jsonl"),
          "--output_dir",
          dir.file("out"),
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
          "4",
          "--learning_rate",
          "0.01",
          "--warmup_steps",
          "2",
          "--save_steps",
          "10",
          "--eval_steps",
          "10",
          "--logging_steps",
          "5"};
}

TEST(TrainCommand, TrainsFromYamlAndOverridesAndLowersTheLoss) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 24);
  std::ofstream(dir.file("run.yaml")) << "num_epochs: 5\nseed: 11\nsave_total_limit: 1\n";
  std::vector<std::string> args = tiny_args(dir);
  args.insert(args.begin() + 1, dir.file("run.yaml"));
  test::CliResult r = test::run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step 1/25"), std::string::npos)
      << r.out;  // 20 train examples / 4 = 5 steps x 5 epochs
  EXPECT_NE(r.out.find("step 25/25"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final model written"), std::string::npos) << r.out;
  // Eval loss falls: the data follows a simple rule the model can learn.
  std::ifstream metrics(dir.file("out/metrics.jsonl"));
  std::vector<double> evals;
  int train_lines = 0;
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "eval") evals.push_back(j["eval_loss"].get<double>());
    if (j["type"] == "train") {
      ++train_lines;
      for (const char* key : {"step", "epoch", "loss", "lr", "grad_norm", "tokens", "tokens_per_s",
                              "forward_s", "backward_s", "optimizer_s", "peak_memory_bytes"})
        EXPECT_TRUE(j.contains(key)) << key << " in " << line;
    }
  }
  EXPECT_EQ(train_lines, 25);
  ASSERT_EQ(evals.size(), 3u);  // steps 10, 20 and the end
  EXPECT_LT(evals.back(), evals.front());
  EXPECT_EQ(test::read_checkpoint_f64(dir.file("out")).size(), 21u);
  // TensorBoard: one event file with the same scalars.
  std::vector<std::string> events;
  for (const auto& e : fs::directory_iterator(dir.file("out/runs"))) events.push_back(e.path().string());
  ASSERT_EQ(events.size(), 1u);
  std::ifstream in(events[0], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* tag :
       {"brain.Event:2", "train/loss", "train/learning_rate", "train/grad_norm", "eval/loss"})
    EXPECT_NE(bytes.find(tag), std::string::npos) << tag;  // 9 per layer x 2 + embed, norm, head
}

// eval_data_path: the whole data_path trains and the other file evaluates (no split); both reported.
TEST(TrainCommand, EvaluatesOnASeparateFile) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  test::write_tiny_dataset(dir.file("eval.jsonl"), 3);
  std::vector<std::string> args = tiny_args(dir);
  args.insert(args.end(),
              {"--val_set_size", "0", "--eval_data_path", dir.file("eval.jsonl"), "--max_steps", "2"});
  test::CliResult r = test::run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("12 train / 3 validation examples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eval data " + dir.file("eval.jsonl") + ": 3 records"), std::string::npos) << r.out;
  // The end-of-run summary.
  EXPECT_NE(r.out.find("done: steps 1-2 of 2 in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eval loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model (config.json, safetensors): " + dir.file("out")), std::string::npos) << r.out;
  std::ifstream metrics(dir.file("out/metrics.jsonl"));
  int evals = 0;
  for (std::string line; std::getline(metrics, line);) evals += nlohmann::json::parse(line)["type"] == "eval";
  EXPECT_EQ(evals, 1);
}

// resume: auto starts fresh without a checkpoint and continues from the latest one with it: the same
// command line restarts a preempted job.
TEST(TrainCommand, ResumeAutoContinuesWhenACheckpointExists) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  std::vector<std::string> args = tiny_args(dir);
  args.insert(args.end(), {"--max_steps", "2", "--save_steps", "1", "--resume", "auto"});
  test::CliResult first = test::run_cli(args);
  ASSERT_EQ(first.code, 0) << first.err << first.out;
  EXPECT_NE(first.out.find("resume: auto: no checkpoint in output_dir, starting fresh"), std::string::npos)
      << first.out;
  test::CliResult second = test::run_cli(args);
  EXPECT_NE(second.out.find("resume: auto: continuing from output_dir's latest checkpoint"),
            std::string::npos)
      << second.out << second.err;
}

// No warmup by default (HF's default), and a warmup that covers the whole run is said, once, on stderr.
TEST(TrainCommand, WarnsWhenTheWarmupCoversTheWholeRun) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  std::vector<std::string> args = tiny_args(dir);
  const auto warmup = std::find(args.begin(), args.end(), "--warmup_steps");  // tiny_args' own: left out
  ASSERT_NE(warmup, args.end());
  args.erase(warmup, warmup + 2);
  args.insert(args.end(), {"--max_steps", "2"});
  test::CliResult plain = test::run_cli(args);
  ASSERT_EQ(plain.code, 0) << plain.err << plain.out;
  EXPECT_NE(plain.out.find("after 0 warmup steps"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.err.find("warning: the warmup"), std::string::npos) << plain.err;
  args.insert(args.end(), {"--warmup_steps", "5", "--output_dir", dir.file("out2")});
  test::CliResult covered = test::run_cli(args);
  ASSERT_EQ(covered.code, 0) << covered.err << covered.out;
  EXPECT_NE(covered.err.find("warning: the warmup (5 steps) covers the whole run (2 steps)"),
            std::string::npos)
      << covered.err;
}

struct Refusal {
  std::vector<std::string> extra;
  std::string key;  // must appear in the message
};

class TrainRefusals : public ::testing::TestWithParam<Refusal> {};

TEST_P(TrainRefusals, NonZeroExitNamingTheKey) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  std::vector<std::string> args = tiny_args(dir);
  for (const std::string& a : GetParam().extra) args.push_back(a);
  test::CliResult r = test::run_cli(args);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(GetParam().key), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("out/metrics.jsonl"))) << "refused before any work";
}

INSTANTIATE_TEST_SUITE_P(
    Keys, TrainRefusals,
    ::testing::Values(
        Refusal{{"--device", "cuda"}, "'device'"}, Refusal{{"--precision", "bf16"}, "precision"},
        Refusal{{"--learning_rate", "-1"}, "learning_rate"},
        Refusal{{"--micro_batch_size", "3"}, "micro_batch_size"},
        Refusal{{"--no_such_key", "1"}, "no_such_key"},
        Refusal{{"--finetune", "lora", "--adapter", "qlora", "--bnb_4bit_compute_dtype", "float16"},
                "'bnb_4bit_compute_dtype'"},
        Refusal{{"--finetune", "lora", "--init_adapter", "no/such/dir"}, "init_adapter"},
        Refusal{{"--finetune", "lora", "--lora_target_modules", "qkv"}, "lora_target_modules"},
        Refusal{{"--lora_r", "4"}, "lora_r"},
        Refusal{{"--finetune", "partial", "--trainable", "mlp", "--trainable_layers", "last:9"},
                "trainable_layers"},
        Refusal{{"--resume", "latest"}, "'resume'"}, Refusal{{"--val_set_size", "12"}, "val_set_size"},
        Refusal{{"--eval_data_path", "no/such.jsonl"}, "eval_data_path"},
        Refusal{{"--lr_scheduler_type", "step"}, "lr_scheduler_type"}));

TEST(TrainCommand, MissingPathsAreNamed) {
  test::TempDir dir;
  test::CliResult r =
      test::run_cli({"train", "--base_model", dir.file("nope"), "--data_path", dir.file("none.jsonl"),
                     "--device", "cpu", "--precision", "fp32", "--finetune", "full"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("base_model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt::cli
