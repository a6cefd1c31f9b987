// Several dataset files (`datasets`, `dataset_weights`): the keys read from YAML and the command line,
// refused when they contradict data_path or name a file not listed, and the training set joined in order
// with the weights (data/dataset_mix.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/test_support.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {
namespace {

std::string refusal(const std::vector<std::string>& args) {
  try {
    load_train_config("", args);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a refusal";
  return "";
}

TEST(DatasetsConfig, KeysAndTheirRefusals) {
  const std::vector<std::string> base = {"--base_model", "m", "--output_dir", "o"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return more;
  };
  test::TempDir dir;
  const std::string yaml = dir.file("c.yaml");
  std::ofstream(yaml)
      << "base_model: m\noutput_dir: o\ndatasets: [a.jsonl, b.csv]\ndataset_weights: {b.csv: 0.5}\n";
  const TrainConfig c = load_train_config(yaml, {});
  EXPECT_EQ(c.datasets, (std::vector<std::string>{"a.jsonl", "b.csv"}));
  ASSERT_EQ(c.dataset_weights.size(), 1u);
  EXPECT_EQ(c.dataset_weights[0], (std::pair<std::string, double>{"b.csv", 0.5}));
  EXPECT_EQ(dataset_paths(c), c.datasets);
  EXPECT_EQ(load_train_config(yaml, {}).datasets, parse_train_config_yaml(to_yaml(c), "round trip").datasets);

  EXPECT_NE(refusal(with({})).find("'data_path' is required"), std::string::npos);
  EXPECT_NE(refusal(with({"--data_path", "x.jsonl", "--datasets", "a.jsonl"}))
                .find("both 'data_path' and 'datasets'"),
            std::string::npos);
  EXPECT_NE(refusal(with({"--datasets", "a.jsonl", "--dataset_weights", "{c.csv: 2}"}))
                .find("'dataset_weights' names 'c.csv', which is not in 'datasets' (a.jsonl)"),
            std::string::npos);
}

TEST(DatasetsConfig, TrainingSetJoinsTheFilesWithTheirWeights) {
  test::TempDir dir;
  std::ofstream(dir.file("a.jsonl")) << "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5]}\n";
  std::ofstream(dir.file("b.jsonl")) << "{\"input_ids\": [6, 7]}\n";
  TrainConfig c;
  c.base_model = dir.path();
  c.datasets = {dir.file("a.jsonl"), dir.file("b.jsonl")};
  c.dataset_weights = {{dir.file("b.jsonl"), 3.0}};
  model::ModelConfig model;
  model.vocab_size = 10;
  const data::Dataset d = load_training_data(c, nullptr, model);
  std::vector<int32_t> firsts;
  for (const data::Example& e : d.examples) firsts.push_back(e.input_ids[0]);
  EXPECT_EQ(firsts, (std::vector<int32_t>{1, 4, 6, 6, 6}));
  EXPECT_EQ(d.source, dir.file("a.jsonl") + " + " + dir.file("b.jsonl"));
  EXPECT_EQ(d.stats.records, 3);
}

}  // namespace
}  // namespace lt::train
