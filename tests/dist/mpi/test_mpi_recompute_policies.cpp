// Every recompute policy and activation offload under the strategies that touch the layer schedule, over
// `mpirun -np 2` and `-np 4`, float64, against one process on the same global batch (within 1e-12; the
// ranks' sums group differently, as in the other N-rank tests). zero3 gathers each layer's weights before
// its forward and its backward (where recompute re-runs the forward from the gathered slot), and zero2
// reduces each layer's gradients during the backward; ddp's buckets are issued per layer too. The
// schedule's own results (each policy against the others) are the CPU tests' (tests/model); here the
// question is whether a policy changes what a sharded rank computes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "train/run_training.h"

namespace lt::train {
namespace {

class MpiRecomputePolicies : public MpiTinyRun {};

struct Policy {
  std::string name;
  std::vector<std::string> flags;
};

TEST_F(MpiRecomputePolicies, EveryPolicyEqualsOneProcess) {
  const std::vector<Policy> policies = {
      {"none", {"--recompute", "none"}},
      {"full", {"--recompute", "full"}},
      {"selective", {"--recompute", "selective"}},
      {"elementwise", {"--recompute", "elementwise"}},
      {"norms", {"--recompute", "norms"}},
      {"offload-whole", {"--recompute", "none", "--offload_activations", "true"}},
      {"offload-chunked", {"--recompute", "full", "--offload_activations", "true", "--chunk_size", "4"}}};
  for (const Policy& p : policies) {
    SCOPED_TRACE(p.name);
    auto config = [&](const std::string& sharding, const std::string& run) {
      TrainConfig c = base_config(dir_->path(), "full");
      std::vector<std::string> flags = p.flags;
      flags.insert(flags.end(), {"--sharding", sharding});
      apply_overrides(c, flags);
      c.output_dir = output(p.name + "-" + run);
      return c;
    };
    TrainResult reference;
    if (comm_->is_main()) {
      dist::SingleCommunicator one;
      reference = run_training(config("none", "single"), test::quiet_hooks(), &one);
    }
    for (const std::string sharding : {"ddp", "zero2", "zero3"}) {
      SCOPED_TRACE(sharding);
      const TrainConfig c = config(sharding, sharding);
      const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
      if (comm_->is_main())
        expect_like_one_process(r, c.output_dir, reference, dir_->file(p.name + "-single"), kTolerance);
    }
  }
}

}  // namespace
}  // namespace lt::train
