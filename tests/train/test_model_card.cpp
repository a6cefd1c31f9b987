// The README.md model card (train/model_card.h): the Hub id from config.json's _name_or_path when it is one,
// else the absolute base path; front matter and body for an adapter and a full model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/test_support.h"
#include "train/model_card.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

void write_config(const std::string& dir, const std::string& name_or_path) {
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "llama", "_name_or_path": ")" << name_or_path << "\"}";
}

TEST(ModelCard, NamesTheHubIdOrTheAbsolutePath) {
  test::TempDir dir;
  const std::string model = dir.file("model");
  write_config(model, "Qwen/Qwen2-1.5B-Instruct");
  EXPECT_EQ(base_model_reference(model), "Qwen/Qwen2-1.5B-Instruct");
  const std::string absolute = fs::absolute(model).lexically_normal().string();
  for (const char* local : {"/data/models/x", "./rel/dir", "gpt2", "a/b/c", "../up/x", "org/na me"}) {
    write_config(model, local);
    EXPECT_EQ(base_model_reference(model), absolute) << local;
  }
  fs::remove(model + "/config.json");
  EXPECT_EQ(base_model_reference(model), absolute);
}

TEST(ModelCard, AdapterAndFullModelCards) {
  test::TempDir dir;
  TrainConfig c;
  c.base_model = dir.file("model");
  write_config(c.base_model, "meta-llama/Llama-3.2-1B");
  c.datasets = {"a.jsonl", "b.csv"};
  c.lora_r = 16;
  TrainingCard card;
  card.config = &c;
  card.adapter = true;
  card.steps = 25;
  card.first_train_loss = 2.5;
  card.final_train_loss = 1.25;
  std::string text = training_model_card(card);
  EXPECT_EQ(text.rfind("---\nbase_model: \"meta-llama/Llama-3.2-1B\"\nlibrary_name: peft\n", 0), 0u) << text;
  EXPECT_NE(text.find("# LoRA adapter of meta-llama/Llama-3.2-1B"), std::string::npos);
  EXPECT_NE(text.find("(lora fine-tuning, 25 steps)"), std::string::npos);
  EXPECT_NE(text.find("- `a.jsonl`\n- `b.csv`\n"), std::string::npos);
  EXPECT_NE(text.find("| train, first step | 2.5000 |\n| train, last step | 1.2500 |\n| eval | - |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lora_r: 16"), std::string::npos);
  EXPECT_NE(text.find("AutoPeftModelForCausalLM"), std::string::npos);
  card.adapter = false;
  card.final_eval_loss = 1.5;
  card.final_eval_step = 20;
  text = training_model_card(card);
  EXPECT_EQ(text.find("library_name: peft"), std::string::npos);
  EXPECT_NE(text.find("| eval (step 20) | 1.5000 |"), std::string::npos) << text;
  EXPECT_NE(text.find("AutoModelForCausalLM.from_pretrained"), std::string::npos);
}

}  // namespace
}  // namespace lt::train
