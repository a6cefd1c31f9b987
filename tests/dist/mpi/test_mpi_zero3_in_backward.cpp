// zero3 with AdamW in the backward (train/zero3_step_in_backward.h) over `mpirun -np 2` and `-np 4`: each
// layer's slices are updated from the reduced block in the gradient buffer as soon as its reduce-scatter is
// done, and no gradient slice is kept. It must equal zero3 with the end-of-step AdamW bit for bit (the same
// block values, the same per-tensor AdamW, the same norm terms added in the same order), in float64 as CI
// runs it, for full and partial fine-tuning, with weight decay, and on a step with fewer micro-batches than
// ranks (the ranks without one pad their passes: their reduce-scatters carry zeros, and every rank still
// updates its slices once).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/mpi/mpi_training_util.h"
#include "support/test_context.h"
#include "train/run_training.h"

namespace lt::train {
namespace {

// The grad_norm of every logged training step in a run's metrics.jsonl (rank 0's output_dir).
std::vector<double> logged_grad_norms(const std::string& dir) {
  std::vector<double> norms;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("grad_norm")) norms.push_back(j["grad_norm"].get<double>());
  }
  return norms;
}

class MpiZero3InBackward : public MpiTinyRun {
 protected:
  // One micro-batch a rank and step, no clipping (what a layer's update may not wait for), zero3.
  TrainConfig config(const std::string& finetune, const std::string& name) const {
    TrainConfig c = base_config(dir_->path(), finetune == "partial" ? "full" : finetune);
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "norms"};
    }
    c.batch_size = comm_->world_size();
    c.max_grad_norm = 0;
    c.logging_steps = 1;
    apply_overrides(c, {"--sharding", "zero3"});
    c.output_dir = output(name);
    return c;
  }
};

TEST_F(MpiZero3InBackward, EqualsTheEndOfStepAdamWBitForBit) {
  // 21 examples: the last step of the epoch has one micro-batch, and the other ranks pad.
  const std::string data = dir_->file("data21.jsonl");
  if (comm_->is_main()) test::write_tiny_dataset(data, 21);
  comm_->barrier();
  const int64_t steps = 21 / comm_->world_size() + 1;
  for (const std::string finetune : {"full", "partial"}) {
    SCOPED_TRACE(finetune);
    // The end-of-step AdamW, AdamW in the backward, and the same with every collective waited for (each
    // layer's tensors reduced one at a time into the scratch and stepped from there).
    const std::string names[3] = {"end-of-step", "in-backward", "in-backward-blocking"};
    TrainResult runs[3];
    for (int k = 0; k < 3; ++k) {
      TrainConfig c = config(finetune, finetune + "-" + names[k]);
      c.data_path = data;
      c.max_steps = steps;
      c.optimizer_in_backward = k > 0;
      c.overlap_gathers = k < 2;
      runs[k] = run_training(c, test::quiet_hooks(), comm_.get());
      ASSERT_EQ(runs[k].losses.size(), size_t(steps));
    }
    if (!comm_->is_main()) continue;
    const std::string reference = dir_->file(finetune + "-" + names[0]);
    for (int k = 1; k < 3; ++k) {
      SCOPED_TRACE(names[k]);
      const std::string dir = dir_->file(finetune + "-" + names[k]);
      EXPECT_EQ(runs[k].losses, runs[0].losses);
      const std::vector<double> norms = logged_grad_norms(dir);
      ASSERT_EQ(norms.size(), size_t(steps));
      EXPECT_EQ(norms, logged_grad_norms(reference));
      expect_close(final_tensors(dir, "full"), final_tensors(reference, "full"), 0.0);
    }
  }
}

// A run resumed from its checkpoint (each rank's AdamW slices) continues bit for bit.
TEST_F(MpiZero3InBackward, ResumedRunEqualsTheUninterruptedOne) {
  TrainConfig straight = config("full", "straight");
  straight.optimizer_in_backward = true;
  straight.save_steps = 2;
  const TrainResult whole = run_training(straight, test::quiet_hooks(), comm_.get());
  ASSERT_EQ(whole.losses.size(), 4u);
  TrainConfig resumed = config("full", "resumed");
  resumed.optimizer_in_backward = true;
  resumed.resume = dir_->file("straight") + "/checkpoint-2";
  const TrainResult second = run_training(resumed, test::quiet_hooks(), comm_.get());
  ASSERT_EQ(second.losses.size(), 2u);
  EXPECT_EQ(second.losses[0], whole.losses[2]);
  EXPECT_EQ(second.losses[1], whole.losses[3]);
  if (comm_->is_main())
    expect_close(final_tensors(dir_->file("resumed"), "full"), final_tensors(dir_->file("straight"), "full"),
                 0.0);
}

// What a layer's update cannot wait for is refused on every rank before step one, naming the setting.
TEST_F(MpiZero3InBackward, RefusesGradientAccumulationAndClipping) {
  TrainConfig accumulating = config("full", "accumulating");
  accumulating.batch_size = 2 * comm_->world_size();
  accumulating.optimizer_in_backward = true;
  test::expect_error_mentions([&] { run_training(accumulating, test::quiet_hooks(), comm_.get()); },
                              {"optimizer_in_backward", "one micro-batch per rank"});
  TrainConfig clipping = config("full", "clipping");
  clipping.max_grad_norm = 1.0;
  clipping.optimizer_in_backward = true;
  test::expect_error_mentions([&] { run_training(clipping, test::quiet_hooks(), comm_.get()); },
                              {"optimizer_in_backward", "max_grad_norm"});
}

}  // namespace
}  // namespace lt::train
