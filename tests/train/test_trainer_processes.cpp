// Training and its processes, seen from one process: the step's reductions go through the communicator it
// is given (counted here), FSDP's and ZeRO's `sharding` names are parsed (zero3 with master weights
// accepted), the sharded strategies over one process change no bit (zero3: to rounding), and a CPU process
// that a launcher other than mpirun started as one of several is refused naming it, before any work. The
// multi-process runs themselves are tests/dist/mpi/test_mpi_training.cpp, under mpirun.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "dist/single_communicator.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/run_training.h"
#include "train/train_config.h"
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
  const LoadedModel model = load_model(ctx, c.base_model, DType::F64, true, uint64_t(c.seed), Device::CPU);
  for (const model::WeightSpec& spec : model::weight_specs(model.config)) {
    parameters += spec.numel();
    ++tensors;
  }
  // Per step: the token counts, the loss, and every trained tensor's gradient (full fine-tuning).
  EXPECT_EQ(comm.all_reduces, 3 * (2 + tensors));
  EXPECT_EQ(comm.elements, 3 * (2 + 1 + parameters));
}

TEST(TrainerProcesses, ShardingNamesAreParsedAndZero3WithMasterWeightsIsAccepted) {
  TrainConfig c = parse_train_config_yaml("base_model: m\ndata_path: d\n", "t.yaml");
  EXPECT_EQ(c.sharding, dist::Sharding::None);
  validate(c);
  for (const auto& [given, canonical] : std::map<std::string, std::string>{{"ddp", "ddp"},
                                                                           {"no_shard", "ddp"},
                                                                           {"zero1", "zero1"},
                                                                           {"zero2", "zero2"},
                                                                           {"shard_grad_op", "zero2"},
                                                                           {"zero3", "zero3"},
                                                                           {"full_shard", "zero3"}}) {
    TrainConfig s = parse_train_config_yaml("base_model: m\ndata_path: d\nsharding: " + given, "t.yaml");
    validate(s);
    EXPECT_EQ(name_of(kShardingNames, s.sharding), canonical);
  }
  for (const char* given : {"zero3", "full_shard"}) {
    TrainConfig s = parse_train_config_yaml(
        std::string("base_model: m\ndata_path: d\nfinetune: full\nmaster_weights: true\nsharding: ") + given,
        "t.yaml");
    validate(s);  // each rank keeps the masters of its slices (train/zero3_layers.h)
  }
  TrainConfig lora =
      parse_train_config_yaml("base_model: m\ndata_path: d\nfinetune: lora\nsharding: zero3\n", "t.yaml");
  validate(lora);  // LoRA keeps no master weights of the base
  TrainConfig in_backward = parse_train_config_yaml(
      "base_model: m\ndata_path: d\nsharding: zero1\noptimizer_in_backward: true\nbatch_size: 1\n"
      "micro_batch_size: 1\nmax_grad_norm: 0\n",
      "t.yaml");
  test::expect_error_mentions([&] { validate(in_backward); },
                              {"optimizer_in_backward", "sharding zero1", "expected sharding none"});
  test::expect_error_mentions([] { parse_train_config_yaml("sharding: fsdp\n", "t.yaml"); },
                              {"t.yaml", "sharding", "fsdp", "full_shard"});
}

// One process: slices are whole tensors and the collectives copies, so zero1 and zero2 are none's bits.
TEST(TrainerProcesses, ShardedStrategiesOverOneProcessEqualNoneBitForBit) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 12);
  TrainConfig c = test::tiny_train_config(dir.path());
  c.max_steps = 3;
  c.max_grad_norm = 1e-3;  // every step clips
  const TrainResult plain = run_training(c, test::quiet_hooks());
  for (const char* sharding : {"zero1", "zero2"}) {
    TrainConfig s = c;
    apply_overrides(s, {"--sharding", sharding});
    s.output_dir = dir.file(sharding);
    const TrainResult r = run_training(s, test::quiet_hooks());
    EXPECT_EQ(r.losses, plain.losses) << sharding;
    EXPECT_EQ(test::read_checkpoint_f64(s.output_dir), test::read_checkpoint_f64(c.output_dir)) << sharding;
  }
  // zero3 over one process: the layers' gradients of each micro-batch are added to the slice (here the
  // whole tensor) after its backward, where one process accumulates them inside the GEMMs: rounding only.
  TrainConfig s = c;
  apply_overrides(s, {"--sharding", "zero3"});
  s.output_dir = dir.file("zero3");
  const TrainResult r = run_training(s, test::quiet_hooks());
  ASSERT_EQ(r.losses.size(), plain.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i)
    EXPECT_NEAR(r.losses[i], plain.losses[i], 1e-12 * plain.losses[i]);
  const auto got = test::read_checkpoint_f64(s.output_dir), want = test::read_checkpoint_f64(c.output_dir);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_EQ(got.at(name).size(), w.size()) << name;
    double scale = 0, diff = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      scale = std::max(scale, std::abs(w[i]));
      diff = std::max(diff, std::abs(got.at(name)[i] - w[i]));
    }
    EXPECT_LE(diff, 1e-12 * scale) << name;
  }
}

TEST(TrainerProcesses, ACpuLaunchThatMpiDidNotStartIsRefusedBeforeAnyWork) {
  test::TempDir dir;
  TrainConfig c = test::tiny_train_config(dir.path());  // no model or data written: refused before
  // The launcher's variables, as torchrun would set them for rank 1 of 2.
  for (const char* v : {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"}) putenv(const_cast<char*>(v));
  std::string message;
  try {
    run_training(c, test::quiet_hooks());
  } catch (const Error& e) {
    message = e.what();
  }
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) unsetenv(v);
  EXPECT_NE(message.find("rank 1 of 2 (local rank 1, launched by torchrun)"), std::string::npos) << message;
  EXPECT_NE(message.find("training over 2 processes on the CPU runs over MPI; start it with mpirun"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace lt::train
