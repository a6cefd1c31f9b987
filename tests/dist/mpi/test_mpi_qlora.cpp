// QLoRA (a 4-bit NF4 base, train/qlora_model.h) under every strategy over `mpirun -np 2` and `-np 4`:
// ddp, zero1, zero2 and zero3 (which keeps the 4-bit base whole on every rank and treats the adapters as
// zero2 does), with accumulation and clipping, whole sequences and chunks of 4 tokens: per-step losses and
// the final adapter equal one process's on the same global batch within 1e-12 (the ranks' sums group
// differently, as in the other N-rank tests).
#include <gtest/gtest.h>

#include <string>

#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "train/run_training.h"

namespace lt::train {
namespace {

class MpiQlora : public MpiTinyRun {};

TEST_F(MpiQlora, EveryStrategyEqualsOneProcess) {
  for (const std::string chunk_size : {"0", "4"}) {
    SCOPED_TRACE("chunk_size " + chunk_size);
    auto config = [&](const std::string& sharding, const std::string& run) {
      TrainConfig c = base_config(dir_->path(), "lora");
      apply_overrides(c, {"--bits", "4", "--chunk_size", chunk_size, "--sharding", sharding});
      c.output_dir = output("qlora-" + chunk_size + "-" + run);
      return c;
    };
    TrainResult reference;
    if (comm_->is_main()) {
      dist::SingleCommunicator one;
      reference = run_training(config("none", "single"), test::quiet_hooks(), &one);
      ASSERT_FALSE(reference.losses.empty());
    }
    for (const std::string sharding : {"ddp", "zero1", "zero2", "zero3"}) {
      SCOPED_TRACE(sharding);
      const TrainConfig c = config(sharding, sharding);
      const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
      if (!comm_->is_main()) continue;
      expect_losses_close(r.losses, reference.losses, kTolerance);
      expect_close(final_tensors(c.output_dir, "lora"),
                   final_tensors(dir_->file("qlora-" + chunk_size + "-single"), "lora"), kTolerance);
    }
  }
}

}  // namespace
}  // namespace lt::train
