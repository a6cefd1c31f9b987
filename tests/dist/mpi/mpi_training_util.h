// What the MPI training tests share: a directory every rank sees, the runs' configuration, and the
// comparisons of losses and final tensors against a reference within a relative tolerance, and a sharded
// checkpoint's optimizer state read whole.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_communicator.h"
#include "io/json_file.h"
#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/metrics_log.h"
#include "train/rank_zero.h"
#include "train/train_config.h"
#include "train/train_test_util.h"

namespace lt::train {

constexpr double kTolerance = 1e-12;

// A directory every rank sees: made by rank 0 (which removes it at the end), its path sent to the others.
class SharedDir {
 public:
  explicit SharedDir(dist::Communicator& comm) : comm_(comm) {
    if (comm.is_main()) own_ = std::make_unique<test::TempDir>();
    path_ = broadcast_text(comm, comm.is_main() ? own_->path() : "");
  }
  ~SharedDir() { comm_.barrier(); }  // nobody still reads it when rank 0 removes it
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  dist::Communicator& comm_;
  std::unique_ptr<test::TempDir> own_;
  std::string path_;
};

// The job's communicator (2 ranks or more) and a shared directory with the tiny model and a dataset of 20
// examples, written by rank 0.
class MpiTinyRun : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = dist::make_mpi_communicator();
    ASSERT_GE(comm_->world_size(), 2) << "run under mpirun -np 2 or more";
    dir_ = std::make_unique<SharedDir>(*comm_);
    if (comm_->is_main()) {
      test::write_tiny_model_dir(dir_->file("model"));
      test::write_tiny_dataset(dir_->file("data.jsonl"), 20);
    }
    comm_->barrier();
  }
  void TearDown() override { dir_.reset(); }
  // The tiny model's config.json copied under `name` with other sizes (written by rank 0); its directory.
  std::string resized_model(const std::string& name, int64_t layers, int64_t hidden, int64_t intermediate) {
    const std::string dir = dir_->file(name);
    if (comm_->is_main()) {
      std::filesystem::create_directories(dir);
      nlohmann::json config = nlohmann::json::parse(std::ifstream(dir_->file("model/config.json")));
      config["num_hidden_layers"] = layers;
      config["hidden_size"] = hidden;
      config["intermediate_size"] = intermediate;
      std::ofstream(dir + "/config.json") << config.dump(2);
    }
    comm_->barrier();
    return dir;
  }
  // A tiny Phi-3 (fused qkv_proj and gate_up_proj, whose parts are views of their rows) under `name`
  // (written by rank 0); its directory.
  std::string phi3_model(const std::string& name) {
    const std::string dir = dir_->file(name);
    if (comm_->is_main()) {
      std::filesystem::create_directories(dir);
      const nlohmann::json config{{"architectures", {"Phi3ForCausalLM"}},
                                  {"model_type", "phi3"},
                                  {"vocab_size", 24},
                                  {"hidden_size", 32},
                                  {"intermediate_size", 48},
                                  {"num_hidden_layers", 3},
                                  {"num_attention_heads", 4},
                                  {"num_key_value_heads", 2},
                                  {"max_position_embeddings", 64},
                                  {"hidden_act", "silu"},
                                  {"rms_norm_eps", 1e-5},
                                  {"rope_theta", 10000.0},
                                  {"initializer_range", 0.2},
                                  {"tie_word_embeddings", false},
                                  {"bos_token_id", 1},
                                  {"eos_token_id", 2}};
      std::ofstream(dir + "/config.json") << config.dump(2);
    }
    comm_->barrier();
    return dir;
  }
  // A run's output_dir: rank 0's is `name` (the run's), the others' their own (they write nowhere).
  std::string output(const std::string& name) const {
    return comm_->is_main() ? dir_->file(name) : dir_->file(name + "-rank" + std::to_string(comm_->rank()));
  }

  std::unique_ptr<dist::Communicator> comm_;
  std::unique_ptr<SharedDir> dir_;
};

inline TrainConfig base_config(const std::string& root, const std::string& finetune) {
  TrainConfig c = finetune == "lora" ? test::tiny_lora_config(root) : test::tiny_train_config(root);
  c.batch_size = 4;
  c.micro_batch_size = 1;  // 4 micro-batches a step: 2 a rank with 2 ranks, 1 with 4
  c.max_steps = 4;
  c.max_grad_norm = 1e-3;
  c.weight_decay = 0.01;
  return c;
}

// Uneven rounds and chunks: 3 micro-batches a step (2 + 1 on two ranks; 1 + 1 + 1 + none on four), chunks
// of 4 tokens over examples of 3 to 12 (1 to 3 chunks a micro-batch), and an evaluation every 2 steps over 2
// held-out examples.
inline void make_uneven_and_chunked(TrainConfig& c) {
  c.batch_size = 3;
  c.chunk_size = 4;
  c.val_set_size = 2;
  c.eval_steps = 2;
}

// The trained tensors the run wrote into its output_dir.
inline std::map<std::string, std::vector<double>> final_tensors(const std::string& dir,
                                                                const std::string& finetune) {
  return finetune == "lora" ? test::read_adapter_f64(dir)
                            : test::read_safetensors_f64(dir + "/model.safetensors");
}

// Every tensor within kTolerance of the reference, relative to the reference tensor's largest element.
inline void expect_close(const std::map<std::string, std::vector<double>>& got,
                         const std::map<std::string, std::vector<double>>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    const std::vector<double>& g = got.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    double scale = 0, diff = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      scale = std::max(scale, std::abs(w[i]));
      diff = std::max(diff, std::abs(g[i] - w[i]));
    }
    EXPECT_LE(diff, tolerance * std::max(scale, 1e-300)) << name;
  }
}

inline void expect_losses_close(const std::vector<double>& got, const std::vector<double>& want,
                                double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), tolerance * std::abs(want[i])) << "step " << i + 1;
}

// Every evaluation at the reference's step, on its token count, its loss within `tolerance` relative.
inline void expect_evals_close(const std::vector<EvalMetrics>& got, const std::vector<EvalMetrics>& want,
                               double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i].step);
    EXPECT_EQ(got[i].eval_tokens, want[i].eval_tokens);
    EXPECT_LE(std::abs(got[i].eval_loss - want[i].eval_loss), tolerance * std::abs(want[i].eval_loss))
        << "evaluation " << i;
  }
}

// A checkpoint's f64 masters against the final f32 weights of an fp32 run with master weights: every weight
// is its master rounded to nearest, and the masters carry more than f32 precision (they are the masters, not
// the weights widened).
inline void expect_masters_of(const std::map<std::string, std::vector<double>>& masters,
                              const std::map<std::string, std::vector<double>>& working) {
  size_t wider = 0;
  for (const auto& [name, m] : masters) {
    ASSERT_TRUE(working.count(name)) << name;
    for (size_t i = 0; i < m.size(); ++i) {
      ASSERT_EQ(working.at(name)[i], double(float(m[i]))) << name << "[" << i << "]";
      wider += m[i] != double(float(m[i]));
    }
  }
  EXPECT_GT(wider, 0u) << "the checkpoint's masters carry more than f32 precision";
}

// A sharded checkpoint's optimizer state put together from its rank files by the manifest's ranges (read
// here independently of the trainer's reader): "step" and every moment tensor, flattened.
inline std::map<std::string, std::vector<double>> read_sharded_optimizer_f64(const std::string& checkpoint) {
  const nlohmann::json manifest = io::read_json_file(checkpoint + "/optimizer.manifest.json");
  std::vector<std::map<std::string, std::vector<double>>> files;
  for (const nlohmann::json& name : manifest["files"])
    files.push_back(test::read_safetensors_f64(checkpoint + "/" + name.get<std::string>()));
  std::map<std::string, std::vector<double>> out{{"step", files.at(0).at("step")}};
  for (const nlohmann::json& t : manifest["tensors"]) {
    std::vector<double>& whole = out[t["name"].get<std::string>()];
    for (const nlohmann::json& s : t["shards"]) {
      const std::vector<double>& part = files.at(s["rank"].get<size_t>()).at(t["name"].get<std::string>());
      EXPECT_EQ(int64_t(whole.size()), s["begin"].get<int64_t>()) << t["name"];
      EXPECT_EQ(int64_t(part.size()), s["end"].get<int64_t>() - s["begin"].get<int64_t>()) << t["name"];
      whole.insert(whole.end(), part.begin(), part.end());
    }
  }
  return out;
}

// A sharded run (`out`) against one process's (`single`) on the same global batch: per-step losses,
// evaluation losses and final weights within `tolerance` relative.
inline void expect_like_one_process(const TrainResult& r, const std::string& out,
                                    const TrainResult& reference, const std::string& single,
                                    double tolerance) {
  expect_losses_close(r.losses, reference.losses, tolerance);
  ASSERT_EQ(r.evals.size(), reference.evals.size());
  for (size_t i = 0; i < r.evals.size(); ++i)
    EXPECT_LE(std::abs(r.evals[i].eval_loss - reference.evals[i].eval_loss),
              tolerance * std::abs(reference.evals[i].eval_loss));
  expect_close(final_tensors(out, "full"), final_tensors(single, "full"), tolerance);
}

}  // namespace lt::train
