// The NCCL communicator at world size 1 (what one GPU allows): every collective returns exactly what the
// single-process communicator returns (the input's bits; copies for reduce_scatter and all_gather), for
// device tensors in f64, f32, bf16 and f16 and for host tensors; a collective is ordered after the compute work
// queued before it and before the work queued after it, with no host synchronization (the overlapped ones:
// before the work queued after wait_overlapped); and training through it reproduces the single-process run
// bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "dist/nccl_communicator.h"
#include "dist/single_communicator.h"
#include "ops/device.h"
#include "parity_support.h"
#include "support/test_context.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

std::unique_ptr<dist::Communicator> nccl_world_of_one() {
  return dist::make_nccl_communicator(dist::Launch{}, 60, ctx);
}

std::vector<double> sample(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37 * double(i)) * std::pow(10.0, double(i % 7) - 3.0);
  return v;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST(NcclCommunicator, WorldOfOneEqualsTheSingleProcessCommunicator) {
  LT_REQUIRE_GPU();
  std::unique_ptr<dist::Communicator> nccl = nccl_world_of_one();
  dist::SingleCommunicator single;
  EXPECT_EQ(nccl->world_size(), 1);
  EXPECT_EQ(nccl->backend(), "nccl");
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Average}) {
      std::vector<double> v = sample(1000);
      DeviceTensor a = upload(v, dt, {1000});
      std::vector<double> host(v);  // the single communicator on the same (rounded) values, on the host
      single.all_reduce(Tensor(host.data(), DType::F64, {1000}), op);
      nccl->all_reduce(a.t, op);
      EXPECT_TRUE(same_bits(download(a), host)) << dtype_name(dt) << " " << dist::reduce_op_name(op);
    }
    std::vector<double> v = sample(64);
    DeviceTensor in = upload(v, dt, {64});
    DeviceTensor out = poisoned(dt, {64});
    nccl->reduce_scatter(in.t, out.t, dist::ReduceOp::Sum);
    EXPECT_TRUE(same_bits(download(out), v)) << "reduce_scatter " << dtype_name(dt);
    DeviceTensor gathered = poisoned(dt, {64});
    nccl->all_gather(in.t, gathered.t);
    EXPECT_TRUE(same_bits(download(gathered), v)) << "all_gather " << dtype_name(dt);
    nccl->broadcast(in.t, 0);
    EXPECT_TRUE(same_bits(download(in), v)) << "broadcast " << dtype_name(dt);
  }
  nccl->barrier();
  // Host tensors (a step's loss and token counts) go through device memory and come back unchanged.
  std::vector<double> counts = {12345.0, 0.1234567890123};
  const std::vector<double> before = counts;
  nccl->all_reduce(Tensor(counts.data(), DType::F64, {2}), dist::ReduceOp::Sum);
  EXPECT_TRUE(same_bits(counts, before));
  EXPECT_NO_THROW(nccl->agree("", 10));
  test::expect_error_mentions([&] { nccl->agree("bad record", 10); }, {"rank 0: bad record"});
}

// Compute work queued before a collective is done before it reads, and work queued after it sees its result,
// with the host never waiting in between: a = 2a (compute stream), b = all_gather(a) (the communicator's
// stream), b = 3b (compute stream). Out of place, so a missing wait shows: b would hold the unscaled a, or
// the poison scaled before the gather overwrote it. Large tensors keep the kernels long enough to race.
TEST(NcclCommunicator, OrderedWithTheComputeStreamByEvents) {
  LT_REQUIRE_GPU();
  std::unique_ptr<dist::Communicator> nccl = nccl_world_of_one();
  const int64_t n = int64_t(1) << 24;
  std::vector<double> v = sample(size_t(n));
  for (int round = 0; round < 3; ++round) {
    DeviceTensor a = upload(v, DType::F32, {n});
    DeviceTensor b = poisoned(DType::F32, {n});
    for (int i = 0; i < 8; ++i) ops::scale_inplace(ctx, a.t, i % 2 ? 0.5 : 2.0);  // ends where it began
    ops::scale_inplace(ctx, a.t, 2.0);
    nccl->all_gather(a.t, b.t);
    ops::scale_inplace(ctx, b.t, 3.0);
    const std::vector<double> got = download(b);
    size_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != double(float(float(v[i] * 2.0) * 3.0f));
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
}

// The overlapped collectives (what the gradient buckets use, train/gradient_buckets.h): ordered after the
// compute work queued before them, and the work queued after wait_overlapped() sees their result, with the
// host waiting for neither. Out of place (b = reduce_scatter of a: a copy at world size 1) so that a missing
// wait shows, as above; then in place (out = block 0 of in), which must leave the values as they are.
TEST(NcclCommunicator, OverlappedCollectivesWaitForQueuedWorkAndAreWaitedFor) {
  LT_REQUIRE_GPU();
  std::unique_ptr<dist::Communicator> nccl = nccl_world_of_one();
  const int64_t n = int64_t(1) << 24;
  std::vector<double> v = sample(size_t(n));
  for (int round = 0; round < 3; ++round) {
    DeviceTensor a = upload(v, DType::F32, {n});
    DeviceTensor b = poisoned(DType::F32, {n});
    for (int i = 0; i < 8; ++i) ops::scale_inplace(ctx, a.t, i % 2 ? 0.5 : 2.0);  // ends where it began
    ops::scale_inplace(ctx, a.t, 2.0);
    nccl->reduce_scatter_overlapped(a.t, b.t, dist::ReduceOp::Sum);
    nccl->all_reduce_overlapped(a.t, dist::ReduceOp::Sum);
    nccl->wait_overlapped();
    ops::scale_inplace(ctx, b.t, 3.0);
    nccl->reduce_scatter_overlapped(b.t, b.t, dist::ReduceOp::Sum);  // in place
    nccl->wait_overlapped();
    const std::vector<double> got = download(b), kept = download(a);
    size_t wrong = 0, changed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      wrong += got[i] != double(float(float(v[i] * 2.0) * 3.0f));
      changed += kept[i] != double(float(v[i] * 2.0));
    }
    EXPECT_EQ(wrong, 0u) << "round " << round;
    EXPECT_EQ(changed, 0u) << "round " << round;
  }
}

// The overlapped all-gather with marks (what zero3's prefetch and zero1/zero2's weight gathers use,
// train/zero3_layers.h, train/data_parallel.h): each gather is ordered after the compute work queued before
// it, and the work queued after wait_overlapped_mark(m) sees the gathers issued before mark m. Two gathers
// out of place, a mark after each; each output is read (scaled) right after its own mark's wait.
TEST(NcclCommunicator, OverlappedGathersAreWaitedForMarkByMark) {
  LT_REQUIRE_GPU();
  std::unique_ptr<dist::Communicator> nccl = nccl_world_of_one();
  const int64_t n = int64_t(1) << 24;
  std::vector<double> v = sample(size_t(n));
  for (int round = 0; round < 3; ++round) {
    DeviceTensor a = upload(v, DType::F32, {n}), c = upload(v, DType::F32, {n});
    DeviceTensor b = poisoned(DType::F32, {n}), d = poisoned(DType::F32, {n});
    for (int i = 0; i < 8; ++i) ops::scale_inplace(ctx, a.t, i % 2 ? 0.5 : 2.0);  // ends where it began
    ops::scale_inplace(ctx, a.t, 2.0);
    nccl->all_gather_overlapped(a.t, b.t);
    const int64_t first = nccl->overlapped_mark();
    ops::scale_inplace(ctx, c.t, 4.0);
    nccl->all_gather_overlapped(c.t, d.t);
    const int64_t second = nccl->overlapped_mark();
    EXPECT_LT(first, second);
    nccl->wait_overlapped_mark(first);
    ops::scale_inplace(ctx, b.t, 3.0);
    nccl->wait_overlapped_mark(second);
    ops::scale_inplace(ctx, d.t, 3.0);
    nccl->wait_overlapped_mark(first);  // covered already: a no-op
    const std::vector<double> got_b = download(b), got_d = download(d);
    size_t wrong = 0;
    for (size_t i = 0; i < got_b.size(); ++i) {
      wrong += got_b[i] != double(float(float(v[i] * 2.0) * 3.0f));
      wrong += got_d[i] != double(float(float(v[i] * 4.0) * 3.0f));
    }
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
}

// Training through the NCCL communicator (world size 1) gives the single-process run's losses bit for bit.
TEST(NcclCommunicator, TrainingThroughItEqualsTheSingleProcessRun) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  train::TrainConfig c = tiny_train_config(dir.path());
  c.device = lt::Device::CUDA;
  c.precision = lt::train::Precision::Bf16;
  c.max_steps = 4;
  c.batch_size = 4;
  c.micro_batch_size = 2;
  c.max_grad_norm = 1.0;
  c.output_dir = dir.file("single");
  const train::TrainResult single = train::run_training(c, quiet_hooks());
  std::unique_ptr<dist::Communicator> nccl = nccl_world_of_one();
  c.output_dir = dir.file("nccl");
  const train::TrainResult through_nccl = train::run_training(c, quiet_hooks(), nccl.get());
  ASSERT_EQ(single.losses.size(), through_nccl.losses.size());
  for (size_t i = 0; i < single.losses.size(); ++i) EXPECT_EQ(single.losses[i], through_nccl.losses[i]) << i;
}

}  // namespace
}  // namespace lt::test
