// The single-process communicator: every collective over one rank leaves the values exactly as they are
// (the sum or average of one value is that value), copies where two tensors are given, and refuses bad
// arguments with a message like the multi-process ones.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "dist/rank_order_sum.h"
#include "dist/single_communicator.h"

namespace lt::dist {
namespace {

std::vector<double> values(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 1.0 / double(i + 3) - 0.1 * double(i % 7);
  return v;
}

TEST(SingleCommunicator, IsRankZeroOfOne) {
  SingleCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  EXPECT_TRUE(comm.is_main());
  EXPECT_EQ(comm.backend(), "single");
}

TEST(SingleCommunicator, AllReduceLeavesTheBitsForSumAndAverage) {
  SingleCommunicator comm;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
    std::vector<double> v = values(17), before = v;
    comm.all_reduce(Tensor(v.data(), DType::F64, {17}), op);
    EXPECT_EQ(std::memcmp(v.data(), before.data(), v.size() * sizeof(double)), 0) << reduce_op_name(op);
    std::vector<float> f(5, 0.1f), fbefore = f;
    comm.all_reduce(Tensor(f.data(), DType::F32, {5}), op);
    EXPECT_EQ(f, fbefore);
  }
}

TEST(SingleCommunicator, ReduceScatterAndAllGatherCopy) {
  SingleCommunicator comm;
  std::vector<double> in = values(9), out(9, -1.0);
  comm.reduce_scatter(Tensor(in.data(), DType::F64, {9}), Tensor(out.data(), DType::F64, {9}), ReduceOp::Sum);
  EXPECT_EQ(out, in);
  std::vector<double> gathered(9, -1.0);
  comm.all_gather(Tensor(in.data(), DType::F64, {3, 3}), Tensor(gathered.data(), DType::F64, {9}));
  EXPECT_EQ(gathered, in);
  // In place: the same memory is its own result.
  comm.all_gather(Tensor(in.data(), DType::F64, {9}), Tensor(in.data(), DType::F64, {9}));
  EXPECT_EQ(gathered, in);
}

TEST(SingleCommunicator, BroadcastAndBarrier) {
  SingleCommunicator comm;
  std::vector<double> v = values(4), before = v;
  comm.broadcast(Tensor(v.data(), DType::F64, {4}), 0);
  comm.barrier();
  EXPECT_EQ(v, before);
  EXPECT_THROW(comm.broadcast(Tensor(v.data(), DType::F64, {4}), 1), Error);
}

TEST(SingleCommunicator, RefusesOtherDtypesAndMismatchedCounts) {
  SingleCommunicator comm;
  std::vector<int64_t> ints(3);
  try {
    comm.all_reduce(Tensor(ints.data(), DType::I64, {3}), ReduceOp::Sum);
    FAIL() << "i64 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected f64, f32, bf16 or f16"), std::string::npos) << e.what();
  }
  std::vector<double> a(4), b(3);
  EXPECT_THROW(comm.reduce_scatter(Tensor(a.data(), DType::F64, {4}), Tensor(b.data(), DType::F64, {3}),
                                   ReduceOp::Sum),
               Error);
  std::vector<float> c(4);
  EXPECT_THROW(comm.all_gather(Tensor(a.data(), DType::F64, {4}), Tensor(c.data(), DType::F32, {4})), Error);
}

TEST(SingleCommunicator, AgreeThrowsTheLocalErrorOnly) {
  SingleCommunicator comm;
  EXPECT_NO_THROW(comm.agree("", 1.0));
  try {
    comm.agree("data.jsonl line 3: missing field 'output'", 1.0);
    FAIL() << "error swallowed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "data.jsonl line 3: missing field 'output'");
  }
}

// The rank-order reduction that the multi-process communicators use: each element the ranks' values
// added in rank order in double, rounded once to the dtype.
TEST(RankOrderSum, AddsBlocksInRankOrderAndRoundsOnce) {
  const int world = 3;
  const int64_t n = 4;
  std::vector<double> blocks = {1e16, 1, 0.1, -2, 1, 2, 0.2, 4, -1e16, 3, 0.3, 8};
  std::vector<double> out(n);
  reduce_blocks_in_rank_order(blocks.data(), world, n, DType::F64, ReduceOp::Sum, out.data());
  // (1e16 + 1) - 1e16 is 0 in double (1e16 + 1 rounds to 1e16): the order is rank order.
  EXPECT_EQ(out[0], (1e16 + 1.0) + -1e16);
  EXPECT_EQ(out[1], (1.0 + 2.0) + 3.0);
  EXPECT_EQ(out[2], (0.1 + 0.2) + 0.3);
  reduce_blocks_in_rank_order(blocks.data(), world, n, DType::F64, ReduceOp::Average, out.data());
  EXPECT_EQ(out[3], ((-2.0 + 4.0) + 8.0) / 3.0);
  // f32: accumulated in double, rounded once (a float sum would round after each addition).
  std::vector<float> fblocks = {16777216.0f, 1.0f, 1.0f};
  float fout = 0;
  reduce_blocks_in_rank_order(fblocks.data(), 3, 1, DType::F32, ReduceOp::Sum, &fout);
  EXPECT_EQ(fout, 16777218.0f);  // float adds would give 16777216
}

}  // namespace
}  // namespace lt::dist
