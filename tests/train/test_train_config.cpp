// TrainConfig: defaults, YAML and command-line parsing, every refusal naming its key, and the YAML round
// trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "ops/device.h"
#include "support/test_support.h"
#include "train/run_setup.h"
#include "train/train_config.h"

namespace lt::train {
namespace {

// The two required keys, valid on CPU.
TrainConfig base() {
  TrainConfig c;
  c.base_model = "models/tiny";
  c.data_path = "data/alpaca.json";
  c.device = lt::Device::CPU;
  c.precision = lt::train::Precision::Fp32;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Applies the overrides to a valid config and expects validation (or parsing) to fail with a message that
// contains every `needle`.
void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& needles) {
  std::string msg = error_of([&] {
    TrainConfig c = base();
    apply_overrides(c, args);
    validate(c);
  });
  ASSERT_FALSE(msg.empty()) << "accepted: " << fmt::format("{}", fmt::join(args, " "));
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

// alpaca-lora's keys keep alpaca-lora's defaults, except the two a newcomer trips over (issue #21): no
// validation split and no warmup unless asked, as HF TrainingArguments.
TEST(TrainConfig, DefaultsFollowAlpacaLoraAndHfTrainer) {
  TrainConfig c;
  EXPECT_EQ(c.batch_size, 128);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.num_epochs, 3);
  EXPECT_EQ(c.learning_rate, 3e-4);
  EXPECT_EQ(c.cutoff_len, 256);
  EXPECT_EQ(c.val_set_size, 0);
  EXPECT_EQ(c.lora_r, 8);
  EXPECT_EQ(c.lora_alpha, 16);
  EXPECT_EQ(c.lora_dropout, 0.05);
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_TRUE(c.train_on_inputs);
  EXPECT_FALSE(c.group_by_length);
  TrainConfig v = base();
  validate(v);
  EXPECT_EQ(v.warmup_steps, 0);  // TrainingArguments(warmup_steps=0, warmup_ratio=0)
}

// device and precision default to auto and resolve from the machine: a CPU-only build (or no visible GPU)
// trains on the CPU in fp32 with no flag; explicit values stay as given.
TEST(TrainConfig, AutoDeviceAndPrecisionResolveFromTheMachine) {
  TrainConfig c;
  EXPECT_EQ(c.device, lt::Device::Auto);
  EXPECT_EQ(c.precision, Precision::Auto);
  c.base_model = "m";
  c.data_path = "d";
  validate(c);
  const bool gpu = ops::cuda_available();
  EXPECT_EQ(c.device, gpu ? lt::Device::CUDA : lt::Device::CPU);
  EXPECT_EQ(c.precision, gpu ? Precision::Bf16 : Precision::Fp32);
  lt::Device device = lt::Device::CPU;
  Precision precision = Precision::Auto;
  resolve_auto_device(device, precision);
  EXPECT_EQ(precision, Precision::Fp32);
  device = lt::Device::CPU;
  precision = Precision::Fp64;
  resolve_auto_device(device, precision);
  EXPECT_EQ(precision, Precision::Fp64);
}

// Lists come space- or comma-separated; PEFT's all-linear names every projection.
TEST(TrainConfig, ListsAsHfUsersTypeThemAndAllLinear) {
  TrainConfig c = base();
  apply_overrides(c, {"--lora_target_modules", "q_proj", "v_proj", "k_proj", "--lora_r", "4"});
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "v_proj", "k_proj"}));
  EXPECT_EQ(c.lora_r, 4);
  apply_overrides(c, {"--lora_target_modules", "o_proj,up_proj"});
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"o_proj", "up_proj"}));
  apply_overrides(c, {"--lora_target_modules", "all-linear"});
  validate(c);
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj",
                                                             "gate_proj", "up_proj", "down_proj"}));
}

// val_set_size takes a fraction (HF's test_size) or a whole count; neither a fractional count nor a
// negative value.
TEST(TrainConfig, ValSetSizeIsAFractionOrACount) {
  TrainConfig c = base();
  apply_overrides(c, {"--val_set_size", "0.1"});
  validate(c);
  EXPECT_EQ(c.val_set_size, 0.1);
  apply_overrides(c, {"--val_set_size", "20"});
  validate(c);
  EXPECT_EQ(c.val_set_size, 20);
  expect_refused({"--val_set_size", "2.5"}, {"val_set_size", "2.5", "whole number"});
}

TEST(TrainConfig, ParsesYamlOfEveryKind) {
  auto c = parse_train_config_yaml(R"(
base_model: /models/llama
data_path: data.json
batch_size: 32
micro_batch_size: 8
num_epochs: 1.5
learning_rate: 2e-5
lora_target_modules: [q_proj, k_proj, v_proj]
train_on_inputs: false
lora_rank_pattern: {"layers\\.0\\..*": 4, down_proj: 2}
lora_alpha_pattern:
  q_proj: 3.5
warmup_ratio: 0.03
memory_limit: 24GiB
device: cpu
precision: fp64
)",
                                   "cfg.yaml");
  EXPECT_EQ(c.base_model, "/models/llama");
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_EQ(c.num_epochs, 1.5);
  EXPECT_EQ(c.learning_rate, 2e-5);
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj"}));
  EXPECT_FALSE(c.train_on_inputs);
  ASSERT_EQ(c.lora_rank_pattern.size(), 2u);
  EXPECT_EQ(c.lora_rank_pattern[0],
            (std::pair<std::string, int64_t>{"layers\\.0\\..*", 4}));  // file order kept
  EXPECT_EQ(c.lora_rank_pattern[1].first, "down_proj");
  EXPECT_EQ(c.lora_alpha_pattern[0].second, 3.5);
  EXPECT_EQ(c.warmup_ratio, 0.03);
  EXPECT_EQ(c.memory_limit, int64_t(24) << 30);
  validate(c);
  EXPECT_FALSE(c.warmup_steps.has_value());  // the default 100 applies only without a ratio
  // A comma-list string works for lists too.
  EXPECT_EQ(parse_train_config_yaml("lora_target_modules: q_proj, o_proj", "x").lora_target_modules,
            (std::vector<std::string>{"q_proj", "o_proj"}));
}

TEST(TrainConfig, YamlRoundTripIsIdentical) {
  TrainConfig c = base();
  c.base_model = "/path with spaces/model: v2";
  c.data_path = "yes";  // would be a boolean if written unquoted
  c.output_dir = "~";   // would be null if written unquoted
  c.resume = "";
  c.init_adapter = "/adapters/#1";
  c.num_epochs = 0.1 + 0.2;  // not a short decimal
  c.learning_rate = 1.0 / 3.0;
  c.lora_alpha = 7.25;
  c.lora_target_modules = {"q_proj", "down_proj"};
  c.lora_rank_pattern = {{"z_proj", 2}, {"layers\\.1\\.q_proj", 4}};
  c.lora_alpha_pattern = {{"v_proj", 0.5}};
  c.use_rslora = true;
  c.warmup_ratio = 0.07;
  c.memory_limit = 123456789;
  c.lr_scheduler_type = lt::train::LrScheduleType::Cosine;
  validate(c);
  std::string yaml = to_yaml(c);
  TrainConfig back = parse_train_config_yaml(yaml, "saved");
  validate(back);
  EXPECT_EQ(back, c) << yaml;
  EXPECT_EQ(to_yaml(back), yaml);
  // Through a file as well.
  test::TempDir tmp;
  save_train_config(tmp.file("config.yaml"), c);
  EXPECT_EQ(load_train_config(tmp.file("config.yaml"), {}), c);
  // A full fine-tuning run's saved config (all LoRA keys at their defaults) loads back too.
  TrainConfig full = base();
  full.finetune = lt::model::Finetune::Full;
  validate(full);
  EXPECT_EQ(parse_train_config_yaml(to_yaml(full), "saved"), full);
}

TEST(TrainConfig, CommandLineOverrides) {
  TrainConfig c = base();
  apply_overrides(c, {"--batch_size",
                      "64",
                      "--micro-batch-size=16",
                      "--group_by_length",
                      "--lora_target_modules",
                      "[q_proj,v_proj,o_proj]",
                      "--train_on_inputs",
                      "false",
                      "--lr_scheduler_type",
                      "cosine",
                      "--lora_alpha_pattern",
                      "{v_proj: 4}",
                      "--warmup_steps",
                      "null",
                      "--warmup_ratio",
                      "0.1",
                      "--resume",
                      "no",
                      "--memory_limit",
                      "1.5GB"});
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.micro_batch_size, 16);
  EXPECT_TRUE(c.group_by_length);  // a lone boolean flag means true
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"q_proj", "v_proj", "o_proj"}));
  EXPECT_FALSE(c.train_on_inputs);
  EXPECT_EQ(c.lr_scheduler_type, LrScheduleType::Cosine);
  EXPECT_EQ(c.lora_alpha_pattern.size(), 1u);
  EXPECT_FALSE(c.warmup_steps.has_value());
  EXPECT_EQ(c.warmup_ratio, 0.1);
  EXPECT_EQ(c.resume, "no");  // a string key takes the text as given
  EXPECT_EQ(c.memory_limit, 1500000000);
  apply_overrides(c, {"--lora_target_modules", "k_proj,up_proj"});
  EXPECT_EQ(c.lora_target_modules, (std::vector<std::string>{"k_proj", "up_proj"}));
  validate(c);
}

TEST(TrainConfig, FileThenOverrides) {
  test::TempDir tmp;
  std::ofstream(tmp.file("c.yaml"))
      << "base_model: m\ndata_path: d\ndevice: cpu\nprecision: fp32\nlora_r: 4\n";
  TrainConfig c = load_train_config(tmp.file("c.yaml"), {"--lora_r", "16"});
  EXPECT_EQ(c.lora_r, 16);
  EXPECT_NE(error_of([&] { load_train_config(tmp.file("missing.yaml"), {}); }).find("missing.yaml"),
            std::string::npos);
}

TEST(TrainConfig, UnknownKeysSuggestTheNearest) {
  std::string m =
      error_of([] { parse_train_config_yaml("base_model: m\nlearning_rat: 1e-4\n", "cfg.yaml"); });
  EXPECT_NE(m.find("cfg.yaml line 2"), std::string::npos) << m;
  EXPECT_NE(m.find("'learning_rat'"), std::string::npos) << m;
  EXPECT_NE(m.find("did you mean 'learning_rate'"), std::string::npos) << m;
  m = error_of([] {
    TrainConfig c;
    apply_overrides(c, {"--lr", "1e-4"});
  });
  EXPECT_NE(m.find("did you mean 'learning_rate'"), std::string::npos) << m;
  m = error_of([] {
    TrainConfig c;
    apply_overrides(c, {"--micro_batchsize", "4"});
  });
  EXPECT_NE(m.find("'micro_batch_size'"), std::string::npos) << m;
  m = error_of([] { parse_train_config_yaml("zzzzzzzzzzzz: 1", "cfg.yaml"); });
  EXPECT_NE(m.find("unknown key 'zzzzzzzzzzzz'"), std::string::npos) << m;
}

TEST(TrainConfig, WrongTypesNameKeyAndValue) {
  struct Case {
    std::string yaml, key, value;
  };
  for (const Case& k : std::vector<Case>{
           {"batch_size: abc", "batch_size", "abc"},
           {"batch_size: 12.5", "batch_size", "12.5"},
           {"learning_rate: fast", "learning_rate", "fast"},
           {"train_on_inputs: maybe", "train_on_inputs", "maybe"},
           {"finetune: qlora4", "finetune", "qlora4"},
           {"precision: fp8", "precision", "fp8"},
           {"lora_dropout: [1, 2]", "lora_dropout", "[1, 2]"},
           {"lora_target_modules: {a: 1}", "lora_target_modules", "a: 1"},
           {"lora_rank_pattern: {q_proj: big}", "q_proj", "big"},
           {"memory_limit: 12 parsecs", "memory_limit", "12 parsecs"},
           {"warmup_steps: 1.5", "warmup_steps", "1.5"},
           {"lr_scheduler_type: cosine_with_restarts", "lr_scheduler_type", "cosine_with_restarts"}}) {
    std::string m = error_of([&] { parse_train_config_yaml(k.yaml, "cfg.yaml"); });
    EXPECT_NE(m.find(k.key), std::string::npos) << k.yaml << " -> " << m;
    EXPECT_NE(m.find(k.value), std::string::npos) << k.yaml << " -> " << m;
    EXPECT_NE(m.find("expected"), std::string::npos) << k.yaml << " -> " << m;
  }
  EXPECT_NE(error_of([] { parse_train_config_yaml("batch_size: 1\nbatch_size: 2", "c"); }).find("twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_train_config_yaml("a: [1, 2", "c"); }).find("not valid YAML"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_train_config_yaml("- 1\n- 2", "c"); }).find("top level"), std::string::npos);
  EXPECT_NE(error_of([] {
              TrainConfig c;
              apply_overrides(c, {"--batch_size"});
            }).find("missing value"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              TrainConfig c;
              apply_overrides(c, {"batch_size", "3"});
            }).find("not an option"),
            std::string::npos);
}

TEST(TrainConfig, RefusesOutOfRangeValues) {
  expect_refused({"--batch_size", "0"}, {"batch_size", "0"});
  expect_refused({"--micro_batch_size", "-2"}, {"micro_batch_size", "-2"});
  expect_refused({"--ddp_timeout", "0"}, {"ddp_timeout", "0", "positive number of seconds"});
  expect_refused({"--ddp_timeout", "-5"}, {"ddp_timeout", "-5"});
  expect_refused({"--num_epochs", "0"}, {"num_epochs"});
  expect_refused({"--learning_rate", "-1e-4"}, {"learning_rate", "-0.0001"});
  expect_refused({"--cutoff_len", "0"}, {"cutoff_len"});
  expect_refused({"--val_set_size", "-1"}, {"val_set_size", "-1"});
  expect_refused({"--max_steps", "-1"}, {"max_steps", "-1", ">= 0"});
  expect_refused({"--weight_decay", "-0.1"}, {"weight_decay"});
  expect_refused({"--adam_beta1", "1"}, {"adam_beta1", "[0, 1)"});
  expect_refused({"--adam_beta2", "1.5"}, {"adam_beta2", "1.5"});
  expect_refused({"--adam_epsilon", "0"}, {"adam_epsilon"});
  expect_refused({"--max_grad_norm", "-1"}, {"max_grad_norm"});
  expect_refused({"--warmup_ratio", "1"}, {"warmup_ratio", "[0, 1)"});
  expect_refused({"--warmup_ratio", "-0.1"}, {"warmup_ratio"});
  expect_refused({"--warmup_steps", "-5"}, {"warmup_steps", "-5"});
  expect_refused({"--lora_r", "0"}, {"lora_r"});
  expect_refused({"--lora_alpha", "0"}, {"lora_alpha"});
  expect_refused({"--lora_dropout", "1"}, {"lora_dropout"});
  expect_refused({"--lora_target_modules", "q_proj,qkv"}, {"lora_target_modules", "qkv"});
  expect_refused({"--lora_rank_pattern", "{q_proj: 0}"}, {"lora_rank_pattern", "q_proj"});
  expect_refused({"--lora_alpha_pattern", "{q_proj: -2}"}, {"lora_alpha_pattern", "q_proj"});
  expect_refused({"--chunk_size", "-128"}, {"chunk_size"});
  expect_refused({"--save_steps", "-1"}, {"save_steps"});
  expect_refused({"--logging_steps", "0"}, {"logging_steps"});
  expect_refused({"--seed", "-3"}, {"seed"});
  expect_refused({"--base_model", ""}, {"base_model", "required"});
  expect_refused({"--data_path", ""}, {"data_path", "required"});
  expect_refused({"--prompt_template", ""}, {"prompt_template"});
}

TEST(TrainConfig, RefusesImpossibleCombinations) {
  expect_refused({"--batch_size", "30", "--micro_batch_size", "4"},
                 {"batch_size", "30", "micro_batch_size", "4"});
  expect_refused({"--warmup_steps", "10", "--warmup_ratio", "0.1"}, {"warmup_steps", "warmup_ratio"});
  expect_refused({"--precision", "bf16"}, {"precision", "bf16", "cpu"});
  expect_refused({"--precision", "fp16"}, {"precision", "fp16", "cpu"});
  expect_refused({"--finetune", "full", "--lora_r", "16"}, {"lora_r", "finetune", "full"});
  expect_refused({"--finetune", "full", "--lora_target_modules", "q_proj"}, {"lora_target_modules", "full"});
  expect_refused({"--finetune", "full", "--use_rslora"}, {"use_rslora", "full"});
  expect_refused({"--finetune", "partial", "--trainable", "norms", "--init_adapter", "a"},
                 {"init_adapter", "partial"});
  expect_refused({"--finetune", "full", "--adapter", "qlora"}, {"adapter", "full"});
  expect_refused({"--finetune", "partial"}, {"trainable", "partial"});
  expect_refused({"--tf32", "true"}, {"tf32", "cpu", "cuda", "fp32"});
  expect_refused({"--offload_activations", "true", "--chunk_size", "256", "--recompute", "selective"},
                 {"offload_activations", "chunk_size 256", "recompute selective", "full"});
  expect_refused({"--offload_activations", "true", "--chunk_size", "256", "--recompute", "none"},
                 {"offload_activations", "recompute none"});
  expect_refused({"--offload_activations", "true", "--chunk_size", "256", "--recompute", "elementwise"},
                 {"offload_activations", "recompute elementwise", "full"});
  expect_refused({"--offload_activations", "true", "--chunk_size", "256", "--recompute", "norms"},
                 {"offload_activations", "recompute norms", "full"});
  expect_refused({"--recompute", "half"}, {"recompute", "half"});
  expect_refused({"--trainable", "norms"}, {"trainable", "norms", "lora"});
  expect_refused({"--trainable_layers", "last:4"}, {"trainable_layers", "last:4", "partial"});
  expect_refused({"--finetune", "partial", "--trainable", "norms,head"}, {"trainable", "head"});
  expect_refused({"--finetune", "partial", "--trainable", "mlp", "--trainable_layers", "last:x"},
                 {"trainable_layers", "last:x"});
  expect_refused({"--finetune", "partial", "--trainable", "mlp", "--trainable_layers", "3-1"},
                 {"trainable_layers", "3-1"});
  // The valid neighbours of these are accepted.
  TrainConfig c = base();
  apply_overrides(
      c, {"--finetune", "partial", "--trainable", "[norms, lm_head]", "--trainable_layers", "0-3,10"});
  validate(c);
  c = base();
  apply_overrides(c, {"--device", "cuda", "--precision", "bf16", "--finetune", "full"});
  validate(c);
  for (const char* recompute : {"auto", "full"}) {  // chunked training offloads its checkpoints
    c = base();
    apply_overrides(c, {"--offload_activations", "true", "--chunk_size", "256", "--recompute", recompute});
    EXPECT_NO_THROW(validate(c)) << recompute;
  }
  // Every policy by its name, whole-sequence with and without offload (elementwise and norms included).
  for (const char* recompute : {"none", "full", "selective", "elementwise", "norms"})
    for (const char* offload : {"false", "true"}) {
      c = base();
      apply_overrides(c, {"--offload_activations", offload, "--recompute", recompute});
      EXPECT_NO_THROW(validate(c)) << recompute << " offload " << offload;
      const std::optional<model::Recompute> policy = c.recompute;
      ASSERT_TRUE(policy.has_value()) << recompute;
      EXPECT_EQ(model::recompute_name(*policy), recompute);
    }
}

// One concept, one key: the base weights' bits. transformers' load_in_4bit and the older adapter: qlora are
// read as bits: 4 (and their defaults as nothing); a saved configuration writes bits alone and loads back.
TEST(TrainConfig, BitsAliasesAreReadAsBits) {
  for (const std::string& yaml :
       {std::string("bits: 4\n"), std::string("load_in_4bit: true\n"), std::string("adapter: qlora\n")}) {
    const TrainConfig c = parse_train_config_yaml("base_model: m\ndata_path: d\n" + yaml, "t.yaml");
    EXPECT_EQ(c.bits, 4) << yaml;
    const std::string saved = to_yaml(c);
    EXPECT_EQ(saved.find("load_in_4bit"), std::string::npos) << saved;
    EXPECT_EQ(saved.find("\nadapter:"), std::string::npos) << saved;
    EXPECT_EQ(parse_train_config_yaml(saved, "saved.yaml"), c);
  }
  TrainConfig c = base();
  apply_overrides(c, {"--adapter", "lora", "--load_in_4bit", "false"});
  EXPECT_EQ(c.bits, 16);
  apply_overrides(c, {"--load_in_4bit"});  // a lone boolean flag
  EXPECT_EQ(c.bits, 4);
  expect_refused({"--adapter", "qlora4"}, {"adapter", "qlora4", "lora, qlora"});
  expect_refused({"--bits", "8"}, {"bits", "8", "16 or 4"});
  expect_refused({"--finetune", "partial", "--trainable", "norms", "--load_in_4bit"},
                 {"bits", "load_in_4bit", "partial"});
  const std::vector<std::string> keys = train_config_keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "adapter"), 0);
  EXPECT_NE(train_config_help().find("  load_in_4bit "), std::string::npos);
}

TEST(TrainConfig, StochasticRoundingIsForBf16) {
  expect_refused({"--stochastic_rounding", "true"}, {"stochastic_rounding", "true", "fp32", "bf16"});
  expect_refused({"--stochastic_rounding", "sometimes"}, {"stochastic_rounding", "sometimes", "auto"});
  TrainConfig c = base();
  apply_overrides(c, {"--stochastic_rounding", "false"});
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(parse_train_config_yaml(to_yaml(c), "saved.yaml"), c);
}

TEST(TrainConfig, TrainableLayers) {
  EXPECT_EQ(resolve_trainable_layers("all", 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(resolve_trainable_layers("last:2", 5), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(resolve_trainable_layers("first:2", 5), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(resolve_trainable_layers("0-2,4,1", 6), (std::vector<int64_t>{0, 1, 2, 4}));
  EXPECT_NE(error_of([] { resolve_trainable_layers("0-3,10", 8); }).find("layer 10"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_trainable_layers("last:9", 8); }).find("8 layers"), std::string::npos);
  EXPECT_THROW(resolve_trainable_layers("1,,2", 8), Error);
}

TEST(TrainConfig, CheckPaths) {
  test::TempDir tmp;
  std::filesystem::create_directories(tmp.file("model"));
  std::ofstream(tmp.file("data.json")) << "[]";
  TrainConfig c = base();
  c.base_model = tmp.file("model");
  c.data_path = tmp.file("data.json");
  check_paths(c);
  c.resume = "latest";
  check_paths(c);
  c.resume = tmp.file("nope");
  EXPECT_NE(error_of([&] { check_paths(c); }).find("'resume'"), std::string::npos);
  c.resume = "";
  c.init_adapter = tmp.file("model");
  EXPECT_NE(error_of([&] { check_paths(c); }).find("adapter_config.json"), std::string::npos);
  c.init_adapter = "";
  c.data_path = tmp.file("other.json");
  EXPECT_NE(error_of([&] { check_paths(c); }).find("'data_path'"), std::string::npos);
}

TEST(TrainConfig, HelpListsEveryKeyWithItsDefault) {
  std::string help = train_config_help();
  for (const auto& k : train_config_keys()) EXPECT_NE(help.find("  " + k + " "), std::string::npos) << k;
  EXPECT_NE(help.find("(default 128)"), std::string::npos);
  EXPECT_GE(train_config_keys().size(), 49u);
}

}  // namespace
}  // namespace lt::train
