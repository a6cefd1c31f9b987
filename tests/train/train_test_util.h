// Tiny runs for trainer tests: a random-init model directory (config.json only) and a pre-tokenized JSONL
// dataset written into a TempDir, and a TrainConfig that trains on them on CPU.
#pragma once

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/philox.h"
#include "io/safetensors.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace lt::test {

// Llama-style, GQA, untied (tied = true ties the head to the embeddings).
inline void write_tiny_model_dir(const std::string& dir, bool tied = false, int64_t vocab = 24) {
  std::filesystem::create_directories(dir);
  nlohmann::json c{{"architectures", {"LlamaForCausalLM"}},
                   {"model_type", "llama"},
                   {"vocab_size", vocab},
                   {"hidden_size", 16},
                   {"intermediate_size", 24},
                   {"num_hidden_layers", 2},
                   {"num_attention_heads", 4},
                   {"num_key_value_heads", 2},
                   {"max_position_embeddings", 64},
                   {"rms_norm_eps", 1e-5},
                   {"rope_theta", 10000.0},
                   {"initializer_range", 0.2},
                   {"tie_word_embeddings", tied},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2}};
  std::ofstream(dir + "/config.json") << c.dump(2);
}

// `n` examples of 3..12 tokens (ids in [3, vocab)); the first 1..2 tokens are a prompt without labels.
// A simple pattern (each token follows from the previous one) so that training visibly lowers the loss.
inline void write_tiny_dataset(const std::string& path, int64_t n, uint64_t seed = 7, int64_t vocab = 24) {
  std::ofstream out(path);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 3 + int64_t(philox_bits(seed, 1, uint64_t(i)) % 10);
    const int64_t prompt = 1 + int64_t(philox_bits(seed, 2, uint64_t(i)) % 2);
    std::vector<int32_t> ids, labels;
    int32_t t = 3 + int32_t(philox_bits(seed, 3, uint64_t(i)) % uint32_t(vocab - 3));
    for (int64_t k = 0; k < len; ++k) {
      ids.push_back(t);
      labels.push_back(k < prompt ? -100 : t);
      t = 3 + (t - 3 + 5) % int32_t(vocab - 3);
    }
    out << nlohmann::json{{"input_ids", ids}, {"labels", labels}}.dump() << "\n";
  }
}

inline train::TrainConfig tiny_train_config(const std::string& root, const std::string& output = "out") {
  train::TrainConfig c;
  c.base_model = root + "/model";
  c.data_path = root + "/data.jsonl";
  c.output_dir = root + "/" + output;
  c.random_init = true;
  c.finetune = lt::model::Finetune::Full;
  c.device = lt::Device::CPU;
  c.precision = lt::train::Precision::Fp64;
  c.batch_size = 4;
  c.micro_batch_size = 2;
  c.num_epochs = 1;
  c.learning_rate = 1e-2;
  c.val_set_size = 0;
  c.warmup_steps = 1;
  c.save_steps = 0;
  c.eval_steps = 0;
  c.logging_steps = 1;
  c.seed = 3;
  return c;
}

inline train::TrainerHooks quiet_hooks() {
  train::TrainerHooks h;
  h.quiet = true;
  return h;
}

// `config` run until a SIGINT raised after step `stop_after` (the trainer finishes the step, writes a
// checkpoint and returns), then resumed from its latest checkpoint: the two parts' results. The first part
// must have been interrupted after `stop_after` steps.
inline std::pair<train::TrainResult, train::TrainResult> run_interrupted_then_resumed(
    train::TrainConfig config, int64_t stop_after) {
  train::install_stop_handlers();
  train::TrainerHooks interrupt = quiet_hooks();
  interrupt.on_step = [stop_after](const train::StepMetrics& m) {
    if (m.step == stop_after) std::raise(SIGINT);
  };
  train::TrainResult first = train::run_training(config, interrupt);
  train::clear_stop_request();
  std::signal(SIGINT, SIG_DFL);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.losses.size(), size_t(stop_after));
  config.resume = "latest";
  return {std::move(first), train::run_training(config, quiet_hooks())};
}

// Every tensor of a safetensors checkpoint directory, converted to double.
inline std::map<std::string, std::vector<double>> read_checkpoint_f64(const std::string& dir) {
  auto reader = io::CheckpointReader::open(dir);
  std::map<std::string, std::vector<double>> out;
  for (const std::string& name : reader->names()) {
    const io::SafetensorsEntry& e = reader->entry(name);
    std::vector<double> v(size_t(e.numel()));
    Tensor t(v.data(), DType::F64, {e.numel()});
    t.ndim = int(e.shape.size());
    for (size_t i = 0; i < e.shape.size(); ++i) t.shape[i] = e.shape[i];
    reader->read_into(name, t);
    out[name] = std::move(v);
  }
  return out;
}

// Every tensor of every .safetensors file of `dir`: its raw bytes, keyed "file/tensor".
inline std::map<std::string, std::string> safetensors_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto file = io::SafetensorsFile::open(e.path().string());
    for (const io::SafetensorsEntry& t : file->entries())
      out[e.path().filename().string() + "/" + t.name] =
          std::string(reinterpret_cast<const char*>(t.data), size_t(t.end - t.begin));
  }
  return out;
}

// The "file/tensor" names whose bytes differ between two directories (or exist in one only); a directory
// without tensors is named too, so two empty directories never compare equal.
inline std::vector<std::string> differing_tensors(const std::string& a_dir, const std::string& b_dir) {
  const auto a = safetensors_bytes(a_dir), b = safetensors_bytes(b_dir);
  std::vector<std::string> out;
  for (const auto& [name, bytes] : a)
    if (!b.count(name) || b.at(name) != bytes) out.push_back(name);
  for (const auto& [name, bytes] : b)
    if (!a.count(name)) out.push_back(name);
  if (a.empty()) out.push_back("(no tensors in " + a_dir + ")");
  return out;
}

// A training golden's batch, schedule and AdamW settings (the keys tools/make_*_golden.py write) into `c`.
inline void apply_golden_schedule(train::TrainConfig& c, const nlohmann::json& g) {
  c.batch_size = g["batch_size"];
  c.micro_batch_size = g["micro_batch_size"];
  c.max_steps = g["max_steps"];
  c.learning_rate = g["learning_rate"];
  c.warmup_steps = g["warmup_steps"].get<int64_t>();
  train::apply_overrides(c, {"--lr_scheduler_type", g["lr_scheduler_type"].get<std::string>()});
  c.weight_decay = g["weight_decay"];
  c.adam_beta1 = g["adam_beta1"];
  c.adam_beta2 = g["adam_beta2"];
  c.adam_epsilon = g["adam_epsilon"];
  c.max_grad_norm = g["max_grad_norm"];
}

}  // namespace lt::test
