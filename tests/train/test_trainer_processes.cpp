// What training does about several processes today: the step's reductions go through the communicator it
// is given (counted here).
#include <gtest/gtest.h>

#include "dist/single_communicator.h"
#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

// The single-process communicator, counting the collectives the trainer asks of it.
class CountingCommunicator final : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "counting"; }
  void all_reduce(Tensor t, dist::ReduceOp op) override {
    ++all_reduces;
    elements += t.numel();
    single.all_reduce(t, op);
  }
  void reduce_scatter(Tensor in, Tensor out, dist::ReduceOp op) override {
    single.reduce_scatter(in, out, op);
  }
  void all_gather(Tensor in, Tensor out) override { single.all_gather(in, out); }
  void broadcast(Tensor t, int root) override { single.broadcast(t, root); }
  void barrier() override {}
  void agree(const std::string& e, double timeout_s) override { single.agree(e, timeout_s); }

  dist::SingleCommunicator single;
  int64_t all_reduces = 0, elements = 0;
};

TEST(TrainerProcesses, TheStepReducesCountsLossAndGradientsThroughTheCommunicator) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 3;
  const TrainResult plain = run_training(c, test::quiet_hooks());
  CountingCommunicator comm;
  c.output_dir = dir.file("counted");
  const TrainResult counted = run_training(c, test::quiet_hooks(), &comm);
  EXPECT_EQ(counted.losses, plain.losses);  // the single-process reductions change no bit
  int64_t parameters = 0, tensors = 0;
  const LoadedModel model = load_model(c.base_model, DType::F64, true, uint64_t(c.seed), Device::CPU);
  for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
    parameters += spec.numel();
    ++tensors;
  }
  // Per step: the token counts, the loss, and every trained tensor's gradient (full fine-tuning).
  EXPECT_EQ(comm.all_reduces, 3 * (2 + tensors));
  EXPECT_EQ(comm.elements, 3 * (2 + 1 + parameters));
}

}  // namespace
}  // namespace lt::train
