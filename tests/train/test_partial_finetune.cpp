// Partial fine-tuning: only the chosen tensors change; frozen ones stay bit-identical and get neither a
// gradient nor optimizer state.
#include <gtest/gtest.h>

#include "support/test_context.h"
#include "support/test_support.h"
#include "train/run_setup.h"
#include "train/train_test_util.h"
#include "train/trainable.h"
#include "train/trainer.h"

namespace lt::train {
namespace {

struct Case {
  std::vector<std::string> trainable;
  std::string layers;
  std::vector<std::string> expected;  // substrings of the HF names that must train
};

class PartialFinetune : public ::testing::TestWithParam<Case> {};

TEST_P(PartialFinetune, FrozenTensorsStayIdenticalAndHoldNoGradient) {
  const Case& k = GetParam();
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 8);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.finetune = lt::model::Finetune::Partial;
  c.trainable = k.trainable;
  c.trainable_layers = k.layers;
  c.max_steps = 2;
  c.save_steps = 0;
  validate(c);

  LoadedModel model = load_model(ctx, c.base_model, DType::F64, true, 3);
  std::map<std::string, std::vector<double>> before;
  for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
    const Tensor& t = model::weight_of(model.weights, spec);
    before[spec.hf_name].assign(t.ptr<double>(), t.ptr<double>() + t.numel());
  }
  std::vector<data::Example> examples;
  data::Dataset d = load_examples(c.data_path, nullptr, model.config, dataset_options(c, c.base_model));
  Trainer trainer(c, model, d.examples, {}, 0);
  auto trains = [&](const std::string& name) {
    for (const std::string& s : k.expected)
      if (name.find(s) != std::string::npos) return true;
    return false;
  };
  size_t expected_count = 0, grad_elems = 0;
  for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
    const Tensor& g = model::weight_of(trainer.grads(), spec);
    EXPECT_EQ(g.empty(), !trains(spec.hf_name)) << spec.hf_name;
    expected_count += trains(spec.hf_name);
    grad_elems += g.empty() ? 0 : size_t(g.numel());
  }
  ASSERT_EQ(trainer.trainable().size(), expected_count);
  EXPECT_LE(trainer.grads_bytes(), grad_elems * sizeof(double) + 256 * expected_count + 1);
  trainer.run({.quiet = true});

  for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
    const Tensor& t = model::weight_of(model.weights, spec);
    std::vector<double> after(t.ptr<double>(), t.ptr<double>() + t.numel());
    if (trains(spec.hf_name))
      EXPECT_NE(after, before[spec.hf_name]) << spec.hf_name << " should have trained";
    else
      EXPECT_EQ(after, before[spec.hf_name]) << spec.hf_name << " is frozen";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Groups, PartialFinetune,
    ::testing::Values(Case{{"attention", "mlp"}, "last:1", {"layers.1.self_attn", "layers.1.mlp"}},
                      Case{{"norms"}, "all", {"layernorm", "model.norm"}},
                      Case{{"lm_head"}, "all", {"lm_head"}}, Case{{"mlp"}, "0", {"layers.0.mlp"}}));

}  // namespace
}  // namespace lt::train
