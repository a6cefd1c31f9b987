// zero3 with master weights and fp16's loss scaler over `mpirun -np 2` and `-np 4` (train/zero3_layers.h:
// each rank keeps the wide masters of its slices only).
//
// The CPU engine computes in f32 or f64 (bf16 and fp16 are GPU precisions), so master weights are tested in
// their CPU form: an fp32 run with f64 masters, the same code path as bf16 or fp16 with f32 masters (the
// master dtype is the only difference). fp16's loss scaler is tested where the ranks meet: the global
// gradient norm an overflow on one rank makes non-finite on every rank (DataParallel::unscale_and_clip), so
// every rank's scaler skips the step.
//
// And zero3 under the layer-major schedule, whose ranks run different chunk counts.
//
// Bit for bit: zero3 with masters equals zero2 with masters when each rank runs one unchunked micro-batch a
// step: both reduce each rank's whole gradient once, in rank order, clip with the same slices' squares and
// update the same master slices, rounding them to nearest into the compute weights. Against one process
// (which adds the micro-batches' f32 gradients in another grouping, partly inside the BLAS's GEMMs) to f32
// rounding: kF32Tolerance below.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#include "support/test_context.h"
#include "train/data_parallel.h"
#include "train/loss_scaler.h"
#include "train/run_training.h"

namespace lt::train {
namespace {

// The f32 gradients of N ranks and of one process differ by their grouping, a few ulps of an element, and
// so do the f32 activations and losses of the steps that follow; the f64 masters carry the difference on
// (AdamW's step is lr * m / sqrt(v), of the gradients' relative error), and the f32 weights round them: a
// flip of the last bit at most where the masters sit near a rounding boundary. 1e-6 relative (8 f32 ulps)
// bounds both (measured on 2 and 4 ranks: losses within 8e-8 relative, weights within one ulp of each
// tensor's largest element).
constexpr double kF32Tolerance = 1e-6;

TrainConfig masters_config(const std::string& root, int world) {
  TrainConfig c = base_config(root, "full");
  c.precision = Precision::Fp32;
  c.master_weights = true;  // f64 masters
  c.batch_size = world;     // one micro-batch a rank
  c.save_steps = 2;
  return c;
}

class MpiZero3Masters : public MpiTinyRun {};

// Full fine-tuning, and partial (attention and norms: some layer tensors sharded with masters, the MLP's
// frozen, which the checkpoint holds as the working weights, as one process's does).
TEST_F(MpiZero3Masters, EqualZero2BitForBitAndOneProcessToRounding) {
  const int world = comm_->world_size();
  for (const std::string finetune : {"full", "partial"}) {
    SCOPED_TRACE(finetune);
    auto config = [&](const std::string& name) {
      TrainConfig c = masters_config(dir_->path(), world);
      if (finetune == "partial") {
        c.finetune = model::Finetune::Partial;
        c.trainable = {"attention", "norms"};
      }
      c.output_dir = name;
      return c;
    };
    const std::string single = dir_->file(finetune + "-single");
    TrainResult reference;
    if (comm_->is_main()) {
      dist::SingleCommunicator one;
      reference = run_training(config(single), test::quiet_hooks(), &one);
    }
    TrainResult runs[2];
    const std::string shardings[2] = {"zero2", "zero3"};
    for (int k = 0; k < 2; ++k) {
      TrainConfig c = config(output(finetune + "-" + shardings[k]));
      apply_overrides(c, {"--sharding", shardings[k]});
      runs[k] = run_training(c, test::quiet_hooks(), comm_.get());
      ASSERT_EQ(runs[k].losses.size(), 4u);
    }
    if (!comm_->is_main()) continue;
    EXPECT_EQ(runs[1].losses, runs[0].losses);
    const std::string zero2 = dir_->file(finetune + "-zero2"), zero3 = dir_->file(finetune + "-zero3");
    expect_close(final_tensors(zero3, "full"), final_tensors(zero2, "full"), 0.0);
    // The checkpoints hold the gathered f64 masters and the optimizer state by shards, as zero2's.
    const auto masters = test::read_checkpoint_f64(zero3 + "/checkpoint-4");
    expect_close(masters, test::read_checkpoint_f64(zero2 + "/checkpoint-4"), 0.0);
    expect_close(read_sharded_optimizer_f64(zero3 + "/checkpoint-4"),
                 read_sharded_optimizer_f64(zero2 + "/checkpoint-4"), 0.0);
    // Wider than the compute weights, which are the masters rounded to nearest.
    expect_masters_of(masters, final_tensors(zero3, "full"));

    expect_losses_close(runs[1].losses, reference.losses, kF32Tolerance);
    expect_close(final_tensors(zero3, "full"), final_tensors(single, "full"), kF32Tolerance);
    expect_close(masters, test::read_checkpoint_f64(single + "/checkpoint-4"), kF32Tolerance);
  }
}

// A run resumed from its own checkpoint continues bit for bit: the checkpoint holds the masters (gathered
// from every rank's slices), and resuming cuts them into the slices again.
TEST_F(MpiZero3Masters, ResumedRunEqualsTheUninterruptedOneBitForBit) {
  TrainConfig straight = masters_config(dir_->path(), comm_->world_size());
  apply_overrides(straight, {"--sharding", "zero3"});
  straight.output_dir = dir_->file("straight");
  const TrainResult whole = run_training(straight, test::quiet_hooks(), comm_.get());
  TrainConfig resumed = straight;
  resumed.output_dir = dir_->file("resumed");
  resumed.resume = straight.output_dir + "/checkpoint-2";
  const TrainResult second = run_training(resumed, test::quiet_hooks(), comm_.get());
  ASSERT_EQ(second.losses.size(), 2u);
  EXPECT_EQ(second.losses[0], whole.losses[2]);
  EXPECT_EQ(second.losses[1], whole.losses[3]);
  if (comm_->is_main())
    expect_close(final_tensors(resumed.output_dir, "full"), final_tensors(straight.output_dir, "full"), 0.0);
}

// Uneven rounds and chunks (3 micro-batches a step, chunks of 4 tokens over examples of 3 to 12), gradient
// accumulation over rounds, and evaluations that gather the compute weights: one process's losses,
// evaluation losses and final weights to f32 rounding.
TEST_F(MpiZero3Masters, ChunksAndAnUnevenSplitEqualOneProcess) {
  auto config = [&](const std::string& out) {
    TrainConfig c = masters_config(dir_->path(), comm_->world_size());
    make_uneven_and_chunked(c);
    c.save_steps = 0;
    c.output_dir = out;
    return c;
  };
  TrainResult reference;
  if (comm_->is_main()) {
    dist::SingleCommunicator one;
    reference = run_training(config(dir_->file("single")), test::quiet_hooks(), &one);
  }
  TrainConfig c = config(output("zero3"));
  apply_overrides(c, {"--sharding", "zero3"});
  const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
  ASSERT_EQ(r.losses.size(), 4u);
  if (!comm_->is_main()) return;
  expect_like_one_process(r, c.output_dir, reference, dir_->file("single"), kF32Tolerance);
}

// zero3 under the layer-major schedule (every chunk of a layer, then the next layer), float64: chunks of 4
// tokens over examples of 3 to 12 (1 to 3 chunks a micro-batch, so the ranks' chunk counts differ within a
// round) and 3 micro-batches a step (a rank without one in the last round pads it). A layer's hooks in a
// row issue its collectives once, so the ranks meet without agreeing on chunk counts; losses, evaluation
// losses and final weights equal one process's layer-major run within 1e-12 (the gradients' grouping
// differs as in the chunk-major tests).
TEST_F(MpiZero3Masters, LayerMajorWithDifferentChunkCountsEqualsOneProcess) {
  auto config = [&](const std::string& out) {
    TrainConfig c = base_config(dir_->path(), "full");
    make_uneven_and_chunked(c);
    c.schedule = model::ScheduleOrder::LayerMajor;
    c.output_dir = out;
    return c;
  };
  TrainResult reference;
  if (comm_->is_main()) {
    dist::SingleCommunicator one;
    reference = run_training(config(dir_->file("single")), test::quiet_hooks(), &one);
  }
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapped" : "blocking");
    TrainConfig c = config(output(overlap ? "zero3" : "zero3-blocking"));
    apply_overrides(c, {"--sharding", "zero3"});
    c.overlap_gathers = overlap;
    const TrainResult r = run_training(c, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(r.losses.size(), 4u);
    if (!comm_->is_main()) continue;
    expect_like_one_process(r, c.output_dir, reference, dir_->file("single"), kTolerance);
  }
}

// fp16's loss scaler over sharded gradients (zero2, and zero3's model-level tensors and slices alike): each
// rank holds only its slices, so an overflow lands on the one rank that owns the element. The norm the
// ranks compute together is not finite on every rank, every rank's scaler skips the step (and halves the
// scale) and no rank touches its gradients. Without an overflow the unscaled, clipped slices are one
// process's unscale_and_clip of the summed gradients.
TEST(MpiLossScaler, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  std::unique_ptr<dist::Communicator> comm = dist::make_mpi_communicator();
  const int world = comm->world_size(), rank = comm->rank();
  const double scale = 1024;
  // Two tensors whose sizes the world size does not divide; the last rank owns the last element of each.
  const std::vector<int64_t> sizes = {7, 13};
  // Rank r's scaled gradient of element i of tensor t (dyadic: every sum is exact).
  auto local = [&](int r, size_t t, int64_t i) {
    return float(scale * 0.125 * double((r + 1) * (i + 1 + t)));
  };
  for (dist::Sharding sharding : {dist::Sharding::Zero2, dist::Sharding::Zero3}) {
    for (bool overflow : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << dist::sharding_name(sharding) << (overflow ? " overflow" : " finite"));
      std::vector<std::vector<float>> params, grads;
      for (size_t t = 0; t < sizes.size(); ++t) {
        params.emplace_back(size_t(sizes[t]), 0.0f);
        grads.emplace_back(size_t(sizes[t]));
        for (int64_t i = 0; i < sizes[t]; ++i) grads[t][size_t(i)] = local(rank, t, i);
      }
      if (overflow && rank == world - 1) grads[1].back() = std::numeric_limits<float>::infinity();
      std::vector<ParamGroup> groups;
      for (size_t t = 0; t < sizes.size(); ++t)
        groups.push_back({.name = fmt::format("w{}", t),
                          .param = Tensor(params[t].data(), DType::F32, {sizes[t]}),
                          .grad = Tensor(grads[t].data(), DType::F32, {sizes[t]}),
                          .layer = int64_t(t) - 1});
      DataParallel dp(ctx, *comm, sharding, groups, HostMemory::instance());
      dp.reduce_gradients();
      const std::vector<Tensor> mine = dp.local_gradients();
      std::vector<std::vector<float>> before;
      for (const Tensor& g : mine) before.emplace_back(g.ptr<float>(), g.ptr<float>() + g.numel());
      const double norm = dp.unscale_and_clip(scale, 1.0);
      LossScaler scaler(LossScalerOptions{.initial_scale = scale});
      const bool applied = scaler.update(std::isfinite(norm), 1);
      if (overflow) {
        EXPECT_FALSE(std::isfinite(norm)) << "rank " << rank;
        EXPECT_FALSE(applied) << "rank " << rank;
        EXPECT_EQ(scaler.scale(), scale / 2);
        for (size_t k = 0; k < mine.size(); ++k)
          for (int64_t i = 0; i < mine[k].numel(); ++i)
            ASSERT_EQ(mine[k].ptr<float>()[i], before[k][size_t(i)])
                << "rank " << rank << " touched tensor " << k;
        continue;
      }
      // One process: the summed gradients whole, unscaled and clipped.
      std::vector<std::vector<float>> sums;
      std::vector<Tensor> whole;
      for (size_t t = 0; t < sizes.size(); ++t) {
        sums.emplace_back(size_t(sizes[t]), 0.0f);
        for (int64_t i = 0; i < sizes[t]; ++i)
          for (int r = 0; r < world; ++r) sums[t][size_t(i)] += local(r, t, i);
        whole.push_back(Tensor(sums[t].data(), DType::F32, {sizes[t]}));
      }
      const double want = unscale_and_clip(ctx, whole, scale, 1.0);
      EXPECT_TRUE(applied);
      EXPECT_NEAR(norm, want, 1e-14 * want) << "the squares' grouping differs, rounding only";
      // This rank's slices of the whole result: elements [r*c, min((r+1)*c, n)).
      size_t k = 0;
      for (size_t t = 0; t < sizes.size(); ++t) {
        const int64_t c = (sizes[t] + world - 1) / world, begin = std::min(sizes[t], rank * c),
                      end = std::min(sizes[t], (rank + 1) * c);
        if (begin == end) continue;
        ASSERT_LT(k, mine.size());
        ASSERT_EQ(mine[k].numel(), end - begin);
        for (int64_t i = begin; i < end; ++i)
          EXPECT_FLOAT_EQ(mine[k].ptr<float>()[i - begin], sums[t][size_t(i)]) << "w" << t << "[" << i << "]";
        ++k;
      }
    }
  }
}

}  // namespace
}  // namespace lt::train
