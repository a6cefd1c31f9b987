// zero3's evaluation over `mpirun -np 2` and `-np 4`: each layer is gathered into a gather slot right before
// its forward (Zero3Layers::evaluation_hooks), as training's forward gathers it, never the whole model.
//
// Every rank evaluates the whole validation set (the same batches, so the same hooks and gathers on every
// rank). Float64: the evaluation losses equal one process's to 1e-12 relative (the forward's weights are
// the same bits; the training steps before it group the gradients as the other zero3 tests say).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "train/run_training.h"

namespace lt::train {
namespace {

class MpiZero3Eval : public MpiTinyRun {
 protected:
  // 20 examples: 5 for validation in batches of 2, 2 and 1 (the last one short); 2 micro-batches a step, so
  // with 4 ranks two of them pad every round of training; an evaluation after every step.
  TrainConfig config(const std::string& finetune, int64_t chunk_size, const std::string& out) const {
    TrainConfig c = base_config(dir_->path(), "full");
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "norms"};  // the MLP's layer tensors frozen (sharded too, untrained)
    }
    c.micro_batch_size = 2;
    c.val_set_size = 5;
    c.eval_steps = 1;
    c.chunk_size = chunk_size;
    c.output_dir = out;
    return c;
  }
};

// Whole sequences and chunks of 4 tokens (examples of 3 to 12: 1 to 3 chunks a batch, each chunk's forward
// gathering the layers again or finding them in the slots), full and partial fine-tuning, overlapped and
// blocking gathers: every evaluation's loss and token count equal one process's.
TEST_F(MpiZero3Eval, EvaluationLossesEqualOneProcess) {
  for (const std::string finetune : {"full", "partial"}) {
    for (const int64_t chunk_size : {0, 4}) {
      SCOPED_TRACE(finetune + " chunk_size " + std::to_string(chunk_size));
      const std::string tag = finetune + "-" + std::to_string(chunk_size);
      TrainResult reference;
      if (comm_->is_main()) {
        dist::SingleCommunicator one;
        reference = run_training(config(finetune, chunk_size, dir_->file(tag + "-single")),
                                 test::quiet_hooks(), &one);
      }
      for (const bool overlap : {true, false}) {
        SCOPED_TRACE(overlap ? "overlapped" : "blocking");
        TrainConfig c = config(finetune, chunk_size, output(tag + (overlap ? "-zero3" : "-zero3-blocking")));
        apply_overrides(c, {"--sharding", "zero3"});
        c.overlap_gathers = overlap;
        const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
        ASSERT_EQ(r.evals.size(), 4u);
        if (!comm_->is_main()) continue;
        expect_losses_close(r.losses, reference.losses, kTolerance);
        ASSERT_EQ(r.evals.size(), reference.evals.size());
        for (size_t i = 0; i < r.evals.size(); ++i) {
          EXPECT_EQ(r.evals[i].step, reference.evals[i].step);
          EXPECT_EQ(r.evals[i].eval_tokens, reference.evals[i].eval_tokens);
          EXPECT_LE(std::abs(r.evals[i].eval_loss - reference.evals[i].eval_loss),
                    kTolerance * std::abs(reference.evals[i].eval_loss))
              << "evaluation " << i;
        }
        expect_close(final_tensors(c.output_dir, "full"), final_tensors(dir_->file(tag + "-single"), "full"),
                     kTolerance);
      }
    }
  }
}

// What an evaluation adds to a rank's memory (the CPU engine's memory is HostMemory, which counts it):
// nothing beyond what a training step holds at its highest. The stretch from step 2's end to step 3's (an
// evaluation, then a step) peaks no higher above the memory held at its start than the stretch from step
// 1's end to step 2's (a step alone): the layers are gathered into the slots training uses, where a whole
// model gathered for the evaluation would add its layers' bytes.
TEST_F(MpiZero3Eval, EvaluationAddsNoMemoryToAStep) {
  for (const int64_t chunk_size : {0, 4}) {
    SCOPED_TRACE("chunk_size " + std::to_string(chunk_size));
    TrainConfig c = config("full", chunk_size, output("memory-" + std::to_string(chunk_size)));
    apply_overrides(c, {"--sharding", "zero3"});
    c.eval_steps = 2;
    HostMemory& memory = HostMemory::instance();
    std::vector<size_t> above;  // per stretch between two steps' ends: the peak above its start
    size_t start = 0;
    TrainerHooks hooks = test::quiet_hooks();
    hooks.on_step = [&](const StepMetrics& m) {
      if (m.step > 1) above.push_back(memory.peak_bytes() - start);
      start = memory.in_use_bytes();
      memory.reset_peak();
    };
    const TrainResult r = run_training(c, hooks, comm_.get());
    ASSERT_EQ(r.evals.size(), 2u);
    EXPECT_EQ(r.evals[0].step, 2);
    ASSERT_EQ(above.size(), 3u);  // steps 1 to 2 (a step), 2 to 3 (an evaluation and a step), 3 to 4
    EXPECT_LE(above[1], above[0]) << "the evaluation allocated beyond a training step's memory";
    EXPECT_LE(above[1], above[2]);
  }
}

}  // namespace
}  // namespace lt::train
