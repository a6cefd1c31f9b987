// zero3's sliced load over `mpirun -np 2` and `-np 4` (train/zero3_sliced_load.h): run_training loads each
// rank's slices of the trained layer tensors only (read from the safetensors files or drawn one tensor at a
// time) and the trainer makes their gradients as slices. The slices are the bytes the whole load's cut
// gives, so a run so loaded equals the same run loaded whole on every rank (what run_training did before,
// and what a Trainer given load_model's model still does) bit for bit: losses, evaluation losses, the final
// model and the checkpoints; and equals one process within the MPI tests' tolerance. Resumes (its own
// sharded checkpoint on the same ranks, one process's checkpoint on these) alike. And the memory a rank
// holds while it loads and sets up stays within its slices, the model-level tensors and one staging tensor
// above what it keeps: the whole load rises above that bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/arena.h"
#include "data/dataset_split.h"
#include "dist/mpi/mpi_training_util.h"
#include "dist/single_communicator.h"
#include "io/hf_checkpoint.h"
#include "io/json_file.h"
#include "support/test_context.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/slice_layout.h"
#include "train/trainable.h"
#include "train/trainer.h"
#include "train/zero3_sliced_load.h"

namespace lt::train {
namespace {

// fp32 with f64 masters against one process: the ranks group the f32 gradients differently
// (test_mpi_zero3_precision.cpp's kF32Tolerance).
constexpr double kF32Tolerance = 1e-6;

class MpiZero3SlicedLoad : public MpiTinyRun {
 protected:
  void SetUp() override {
    MpiTinyRun::SetUp();
    if (comm_->is_main()) {
      // A model with safetensors weights (drawn from another seed than the runs' random_init, in f64).
      const model::ModelConfig mc = model::load_model_config(dir_->file("model"));
      Arena arena("weights", HostMemory::instance(), model::weights_bytes(mc, DType::F64));
      model::ModelWeights w = model::allocate_weights(mc, DType::F64, arena);
      model::init_random(ctx, mc, w, 11);
      io::save_hf_checkpoint(dir_->file("weights-model"), mc, w, {.dtype = DType::F64});
    }
    comm_->barrier();
  }

  // The run loaded whole on every rank (load_model), with run_training's data and split.
  TrainResult run_whole(const TrainConfig& c) {
    LoadedModel model =
        load_model(ctx, c.base_model, compute_dtype(c.precision), c.random_init, uint64_t(c.seed));
    EXPECT_FALSE(model.zero3_slices);
    data::Dataset d = load_training_data(c, nullptr, model.config);
    data::SplitExamples split =
        data::split_examples(std::move(d.examples), double(c.val_set_size), uint64_t(c.seed), d.source);
    Trainer trainer(c, model, std::move(split.train), std::move(split.val), 0, nullptr, comm_.get());
    return trainer.run(test::quiet_hooks());
  }

  TrainResult run_single(const TrainConfig& c) {
    TrainResult r;
    if (comm_->is_main()) {
      TrainConfig one = c;
      one.sharding = dist::Sharding::None;
      dist::SingleCommunicator single;
      r = run_training(one, test::quiet_hooks(), &single);
    }
    comm_->barrier();
    return r;
  }

  // `finetune` "lora": the final adapters are compared, and the checkpoints' adapters.
  void expect_same(const TrainResult& got, const std::string& got_dir, const TrainResult& want,
                   const std::string& want_dir, bool checkpoints, const std::string& finetune = "full") {
    EXPECT_EQ(got.losses, want.losses);
    ASSERT_EQ(got.evals.size(), want.evals.size());
    for (size_t i = 0; i < got.evals.size(); ++i) EXPECT_EQ(got.evals[i].eval_loss, want.evals[i].eval_loss);
    expect_close(final_tensors(got_dir, finetune), final_tensors(want_dir, finetune), 0.0);
    if (checkpoints && finetune == "lora")
      expect_close(final_tensors(got_dir + "/checkpoint-2", "lora"),
                   final_tensors(want_dir + "/checkpoint-2", "lora"), 0.0);
    else if (checkpoints)
      expect_close(test::read_checkpoint_f64(got_dir + "/checkpoint-2"),
                   test::read_checkpoint_f64(want_dir + "/checkpoint-2"), 0.0);
  }
};

struct Variant {
  std::string name;
  bool weights = true;  // the safetensors model, else random_init
  bool masters = false;
  bool partial = false;
  bool chunked = false;
  bool lora = false;  // LoRA on the dense base: every layer tensor loaded as a frozen slice
};

// Full, partial and LoRA fine-tuning, safetensors weights and random_init, f64 masters of an fp32 run, and
// uneven chunked rounds with evaluations; accumulation (two micro-batches a rank on two ranks) and clipping
// in all.
TEST_F(MpiZero3SlicedLoad, EqualsTheWholeLoadBitForBitAndOneProcess) {
  const std::vector<Variant> variants = {
      {.name = "weights"},
      {.name = "random", .weights = false},
      {.name = "masters", .masters = true},
      {.name = "partial", .partial = true},
      {.name = "chunked", .chunked = true},
      {.name = "partial-masters-chunked",
       .weights = false,
       .masters = true,
       .partial = true,
       .chunked = true},
      {.name = "lora", .lora = true},
      {.name = "lora-random-chunked", .weights = false, .chunked = true, .lora = true}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto config = [&](const std::string& run) {
      TrainConfig c = base_config(dir_->path(), v.lora ? "lora" : "full");
      if (v.weights) {
        c.base_model = dir_->file("weights-model");
        c.random_init = false;
      }
      if (v.masters) {
        c.precision = Precision::Fp32;
        c.master_weights = true;
      }
      if (v.partial) {
        c.finetune = model::Finetune::Partial;
        c.trainable = {"attention", "norms"};
      }
      if (v.chunked) make_uneven_and_chunked(c);
      c.save_steps = 2;
      apply_overrides(c, {"--sharding", "zero3"});
      c.output_dir = output(v.name + "-" + run);
      return c;
    };
    const TrainConfig sliced = config("sliced");
    const model::ModelConfig mc = model::load_model_config(sliced.base_model);
    ASSERT_TRUE(loads_zero3_slices(sliced, mc, comm_->world_size()));
    const TrainResult reference = run_single(config("single"));
    const TrainResult r = run_training(sliced, test::quiet_hooks(), comm_.get());
    const TrainConfig whole = config("whole");
    const TrainResult w = run_whole(whole);
    if (!comm_->is_main()) continue;
    expect_same(r, sliced.output_dir, w, whole.output_dir, /*checkpoints=*/true, v.lora ? "lora" : "full");
    if (v.lora) {
      expect_losses_close(r.losses, reference.losses, kTolerance);
      expect_close(final_tensors(sliced.output_dir, "lora"),
                   final_tensors(dir_->file(v.name + "-single"), "lora"), kTolerance);
    } else {
      expect_like_one_process(r, sliced.output_dir, reference, dir_->file(v.name + "-single"),
                              v.masters ? kF32Tolerance : kTolerance);
    }
  }
}

// Resumed from its own (sharded) checkpoint on the same ranks: the uninterrupted run's last steps bit for
// bit. Resumed from one process's checkpoint (whole optimizer state, another world size): the whole load's
// resume bit for bit and the uninterrupted one-process run within the tolerance. Without and with masters,
// and partial with masters.
TEST_F(MpiZero3SlicedLoad, ResumesOnTheSameAndAnotherWorldSize) {
  // partial: the layers' norms frozen, read at resume into their frozen slices too.
  for (const auto& [masters, partial] : {std::pair{false, false}, {true, false}, {true, true}}) {
    const std::string tag = std::string(masters ? "masters-" : "plain-") + (partial ? "partial-" : "");
    SCOPED_TRACE(tag);
    auto config = [&](const std::string& run) {
      TrainConfig c = base_config(dir_->path(), "full");
      c.base_model = dir_->file("weights-model");
      c.random_init = false;
      if (masters) {
        c.precision = Precision::Fp32;
        c.master_weights = true;
      }
      if (partial) {
        c.finetune = model::Finetune::Partial;
        c.trainable = {"attention", "mlp"};
      }
      c.save_steps = 2;
      apply_overrides(c, {"--sharding", "zero3"});
      c.output_dir = output(tag + run);
      return c;
    };
    const TrainResult single = run_single(config("single"));
    const TrainConfig straight = config("straight");
    const TrainResult uninterrupted = run_training(straight, test::quiet_hooks(), comm_.get());
    ASSERT_EQ(uninterrupted.losses.size(), 4u);

    TrainConfig same = config("same");
    same.resume = dir_->file(tag + "straight") + "/checkpoint-2";
    const TrainResult resumed = run_training(same, test::quiet_hooks(), comm_.get());
    TrainConfig from_one = config("from-one");
    from_one.resume = dir_->file(tag + "single") + "/checkpoint-2";
    const TrainResult other = run_training(from_one, test::quiet_hooks(), comm_.get());
    TrainConfig from_one_whole = config("from-one-whole");
    from_one_whole.resume = from_one.resume;
    const TrainResult other_whole = run_whole(from_one_whole);
    if (!comm_->is_main()) continue;
    EXPECT_EQ(resumed.losses,
              std::vector<double>(uninterrupted.losses.begin() + 2, uninterrupted.losses.end()));
    expect_close(final_tensors(same.output_dir, "full"), final_tensors(straight.output_dir, "full"), 0.0);
    expect_close(test::read_checkpoint_f64(same.output_dir + "/checkpoint-4"),
                 test::read_checkpoint_f64(straight.output_dir + "/checkpoint-4"), 0.0);
    EXPECT_EQ(other.losses, other_whole.losses);
    expect_close(final_tensors(from_one.output_dir, "full"), final_tensors(from_one_whole.output_dir, "full"),
                 0.0);
    expect_close(test::read_checkpoint_f64(from_one.output_dir + "/checkpoint-4"),
                 test::read_checkpoint_f64(from_one_whole.output_dir + "/checkpoint-4"), 0.0);
    const double tolerance = masters ? kF32Tolerance : kTolerance;
    expect_losses_close(other.losses, {single.losses[2], single.losses[3]}, tolerance);
    expect_close(final_tensors(from_one.output_dir, "full"),
                 final_tensors(dir_->file(tag + "single"), "full"), tolerance);
  }
}

// The CPU engine's memory (HostMemory) from before the load to the end of the trainer's set-up, on a deeper
// model whose layers outweigh its embedding and head: the highest it rises exceeds what the rank keeps
// afterwards by no more than the tensors set-up moves (the model-level and frozen weights, the loaded
// slices, the model-level gradients: each copied once into its final arena) and one staging tensor (a
// random_init draw). The whole load, which holds the whole layers' weights and gradients before it cuts
// them, rises above that bound.
TEST_F(MpiZero3SlicedLoad, ARankNeverHoldsTheWholeLayers) {
  using namespace slice_layout;
  const int world = comm_->world_size();
  const std::string deep = resized_model("deep-model", 8, 32, 64);
  for (const std::string finetune : {"full", "partial"}) {
    SCOPED_TRACE(finetune);
    TrainConfig c = base_config(dir_->path(), "full");
    c.base_model = deep;
    if (finetune == "partial") {
      c.finetune = model::Finetune::Partial;
      c.trainable = {"attention", "mlp"};  // the layers' norms frozen (sharded too), the final norm whole
    }
    apply_overrides(c, {"--sharding", "zero3"});
    const model::ModelConfig mc = model::load_model_config(deep);
    const model::TrainableFn trainable = trainable_fn(c, mc);
    size_t moved = 0, largest = 0, layer_bytes = 0;
    for (const model::WeightSpec& spec : model::weight_specs(mc)) {
      const size_t bytes = size_t(spec.numel()) * 8;  // f64
      if (zero3_sliced(spec, trainable, /*frozen=*/true)) {
        moved += aligned(size_t(capacity_of(spec.numel(), world)) * 8);  // the slice
        largest = std::max(largest, bytes);
        layer_bytes += bytes;
      } else {
        moved += aligned(bytes);                       // the weight copied whole
        if (trainable(spec)) moved += aligned(bytes);  // and its gradient
      }
    }
    const size_t staging = aligned(largest) + 256;
    const size_t slack = 8 * 256;  // the arenas' alignment slack
    size_t rise[2] = {0, 0}, kept[2] = {0, 0};
    for (const bool sliced : {true, false}) {
      c.output_dir = output(finetune + (sliced ? "-sliced" : "-whole"));
      HostMemory& memory = HostMemory::instance();
      const size_t before = memory.in_use_bytes();
      memory.reset_peak();
      {
        LoadedModel model =
            sliced ? load_zero3_sliced_model(ctx, c.base_model, DType::F64, c.random_init, uint64_t(c.seed),
                                             Device::CPU, trainable, /*frozen=*/true, world, comm_->rank())
                   : load_model(ctx, c.base_model, DType::F64, c.random_init, uint64_t(c.seed));
        data::Dataset d = load_training_data(c, nullptr, model.config);
        const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
        rise[sliced] = memory.peak_bytes() - before;
        kept[sliced] = memory.in_use_bytes() - before;
      }
    }
    EXPECT_EQ(kept[true], kept[false]);  // the same arenas once set up
    const size_t bound = kept[true] + moved + staging + slack;
    EXPECT_LE(rise[true], bound) << "more than the slices, the model-level tensors and one staging tensor";
    EXPECT_GT(rise[false], bound) << "the bound would not tell a whole load";
    EXPECT_LT(rise[true] - kept[true], layer_bytes)
        << "the set-up's transient reached the whole layers' size";
  }
}

// Resumed from one process's checkpoint (its whole optimizer.safetensors): each rank reads only its elements
// of AdamW's moments from the mapped file, so from before the load to the end of the trainer's set-up the
// CPU engine's memory (HostMemory) never rises above what the rank then keeps by half the whole moments (a
// resume that loaded the whole moments and then cut them rises by all of them).
TEST_F(MpiZero3SlicedLoad, AResumeFromOneProcessNeverHoldsTheWholeMoments) {
  const std::string deep = resized_model("deep-resume-model", 8, 32, 64);
  auto config = [&](const std::string& run) {
    TrainConfig c = base_config(dir_->path(), "full");
    c.base_model = deep;
    c.save_steps = 2;
    apply_overrides(c, {"--sharding", "zero3"});
    c.output_dir = output("moments-" + run);
    return c;
  };
  const TrainResult single = run_single(config("single"));
  TrainConfig c = config("resumed");
  c.resume = dir_->file("moments-single") + "/checkpoint-2";
  const model::ModelConfig mc = model::load_model_config(deep);
  const model::TrainableFn trainable = trainable_fn(c, mc);
  size_t whole_moments = 0;
  for (const model::WeightSpec& spec : model::weight_specs(mc))
    if (trainable(spec)) whole_moments += 2 * size_t(spec.numel()) * 8;  // f64 exp_avg and exp_avg_sq
  HostMemory& memory = HostMemory::instance();
  const size_t before = memory.in_use_bytes();
  memory.reset_peak();
  size_t rise = 0, kept = 0;
  {
    LoadedModel model =
        load_zero3_sliced_model(ctx, c.base_model, DType::F64, c.random_init, uint64_t(c.seed), Device::CPU,
                                trainable, /*frozen=*/true, comm_->world_size(), comm_->rank());
    data::Dataset d = load_training_data(c, nullptr, model.config);
    const Trainer trainer(c, model, d.examples, {}, 0, nullptr, comm_.get());
    rise = memory.peak_bytes() - before;
    kept = memory.in_use_bytes() - before;
  }
  EXPECT_LT(rise - kept, whole_moments / 2) << "the resume held the whole moments";
  // And it trains on as the uninterrupted one process does (the other resume tests compare the bits).
  const TrainResult resumed = run_training(c, test::quiet_hooks(), comm_.get());
  if (comm_->is_main()) expect_losses_close(resumed.losses, {single.losses[2], single.losses[3]}, kTolerance);
}

}  // namespace
}  // namespace lt::train
