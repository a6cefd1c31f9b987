// What the MPI training tests share: a directory every rank sees, the runs' configuration, and the
// comparisons of losses and final tensors against a reference within a relative tolerance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "support/test_support.h"
#include "train/lora_test_util.h"
#include "train/train_config.h"
#include "train/train_test_util.h"

namespace lt::train {

constexpr double kTolerance = 1e-12;

// A directory every rank sees: made by rank 0 (which removes it at the end), its path sent to the others.
class SharedDir {
 public:
  explicit SharedDir(dist::Communicator& comm) : comm_(comm) {
    if (comm.is_main()) own_ = std::make_unique<test::TempDir>();
    std::vector<double> chars(1024, 0.0);
    if (comm.is_main())
      for (size_t i = 0; i < own_->path().size(); ++i) chars[i] = double(own_->path()[i]);
    comm.broadcast(Tensor(chars.data(), DType::F64, {int64_t(chars.size())}), 0);
    for (double c : chars)
      if (c != 0) path_ += char(c);
  }
  ~SharedDir() { comm_.barrier(); }  // nobody still reads it when rank 0 removes it
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  dist::Communicator& comm_;
  std::unique_ptr<test::TempDir> own_;
  std::string path_;
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

}  // namespace lt::train
