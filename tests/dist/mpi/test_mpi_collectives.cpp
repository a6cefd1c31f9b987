// The MPI communicator against the single-process result, run by ctest under `mpirun -np 2` and `-np 4`.
// Each rank makes its values from (rank, index) alone, so every rank can also compute what one process
// holding all ranks' values gets: for sums, the values added in rank order in double and rounded once to
// the dtype (dist/rank_order_sum.h). The MPI communicator never uses MPI's own reductions, so the results
// are compared bit for bit, in f64, f32, bf16 and f16.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype_visit.h"
#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace lt::dist {
namespace {

// Values with many significant bits and mixed signs and magnitudes, so that the order of additions shows.
double value(int rank, int64_t i) {
  return std::sin(double(i) * 0.7 + double(rank) * 1.3) * std::pow(10.0, double((i + rank) % 9) - 4.0);
}

template <class T>
T stored(double x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_bf16(float(x));
  } else if constexpr (std::is_same_v<T, fp16>) {
    return to_fp16(float(x));
  } else {
    return T(x);
  }
}

template <class T>
std::vector<T> rank_values(int rank, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = stored<T>(value(rank, i));
  return v;
}

// What one process holding every rank's values gets: element i reduced over ranks in rank order.
template <class T>
std::vector<T> one_process_reduction(int world, int64_t n, ReduceOp op) {
  std::vector<T> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int r = 0; r < world; ++r) sum += double(load_as<double>(stored<T>(value(r, i))));
    if (op == ReduceOp::Average) sum /= world;
    out[static_cast<size_t>(i)] = stored<T>(sum);
  }
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

class MpiCollectives : public ::testing::Test {
 protected:
  void SetUp() override { comm = make_mpi_communicator(); }
  std::unique_ptr<Communicator> comm;
};

template <class T>
void check_all_reduce(Communicator& comm, int64_t n) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
    std::vector<T> v = rank_values<T>(comm.rank(), n);
    comm.all_reduce(Tensor(v.data(), dtype_of<T>::value, {n}), op);
    EXPECT_TRUE(same_bits(v, one_process_reduction<T>(comm.world_size(), n, op)))
        << dtype_name(dtype_of<T>::value) << " " << reduce_op_name(op) << " n=" << n;
  }
}

TEST_F(MpiCollectives, WorldIsMpirunsProcesses) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  EXPECT_EQ(comm->world_size(), world);
  EXPECT_EQ(comm->backend(), "mpi");
}

TEST_F(MpiCollectives, AllReduceEqualsOneProcessBitForBit) {
  // Lengths below, at and above the world size, and not divisible by it.
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(4), int64_t(1001)}) {
    check_all_reduce<double>(*comm, n);
    check_all_reduce<float>(*comm, n);
    check_all_reduce<bf16>(*comm, n);
    check_all_reduce<fp16>(*comm, n);
  }
}

TEST_F(MpiCollectives, ReduceScatterEqualsOneProcessSlice) {
  const int world = comm->world_size();
  const int64_t part = 37;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
    std::vector<double> in = rank_values<double>(comm->rank(), part * world), out(static_cast<size_t>(part));
    comm->reduce_scatter(Tensor(in.data(), DType::F64, {part * world}),
                         Tensor(out.data(), DType::F64, {part}), op);
    const std::vector<double> whole = one_process_reduction<double>(world, part * world, op);
    const std::vector<double> expected(whole.begin() + comm->rank() * part,
                                       whole.begin() + (comm->rank() + 1) * part);
    EXPECT_TRUE(same_bits(out, expected)) << reduce_op_name(op);
    std::vector<float> fin = rank_values<float>(comm->rank(), part * world), fout(static_cast<size_t>(part));
    comm->reduce_scatter(Tensor(fin.data(), DType::F32, {part * world}),
                         Tensor(fout.data(), DType::F32, {part}), op);
    const std::vector<float> fwhole = one_process_reduction<float>(world, part * world, op);
    EXPECT_TRUE(same_bits(fout, std::vector<float>(fwhole.begin() + comm->rank() * part,
                                                   fwhole.begin() + (comm->rank() + 1) * part)));
    // fp16 training reduce-scatters f16 gradients (zero2/zero3).
    std::vector<fp16> hin = rank_values<fp16>(comm->rank(), part * world), hout(static_cast<size_t>(part));
    comm->reduce_scatter(Tensor(hin.data(), DType::F16, {part * world}),
                         Tensor(hout.data(), DType::F16, {part}), op);
    const std::vector<fp16> hwhole = one_process_reduction<fp16>(world, part * world, op);
    EXPECT_TRUE(same_bits(hout, std::vector<fp16>(hwhole.begin() + comm->rank() * part,
                                                  hwhole.begin() + (comm->rank() + 1) * part)))
        << "f16 " << reduce_op_name(op);
  }
}

TEST_F(MpiCollectives, AllGatherPutsEachRanksPartInRankOrder) {
  const int world = comm->world_size();
  const int64_t part = 5;
  std::vector<double> in = rank_values<double>(comm->rank(), part), out(static_cast<size_t>(part * world));
  comm->all_gather(Tensor(in.data(), DType::F64, {part}), Tensor(out.data(), DType::F64, {part * world}));
  std::vector<double> expected;
  for (int r = 0; r < world; ++r)
    for (double x : rank_values<double>(r, part)) expected.push_back(x);
  EXPECT_TRUE(same_bits(out, expected));
  // In place: the rank's part already sits in its slot of the output.
  std::vector<float> whole(static_cast<size_t>(part * world), 0.0f);
  const std::vector<float> mine = rank_values<float>(comm->rank(), part);
  std::copy(mine.begin(), mine.end(), whole.begin() + comm->rank() * part);
  comm->all_gather(Tensor(whole.data() + comm->rank() * part, DType::F32, {part}),
                   Tensor(whole.data(), DType::F32, {part * world}));
  std::vector<float> fexpected;
  for (int r = 0; r < world; ++r)
    for (float x : rank_values<float>(r, part)) fexpected.push_back(x);
  EXPECT_TRUE(same_bits(whole, fexpected));
  // f16 (zero3 gathers an fp16 run's weights).
  std::vector<fp16> hin = rank_values<fp16>(comm->rank(), part), hout(static_cast<size_t>(part * world));
  comm->all_gather(Tensor(hin.data(), DType::F16, {part}), Tensor(hout.data(), DType::F16, {part * world}));
  std::vector<fp16> hexpected;
  for (int r = 0; r < world; ++r)
    for (fp16 x : rank_values<fp16>(r, part)) hexpected.push_back(x);
  EXPECT_TRUE(same_bits(hout, hexpected));
}

TEST_F(MpiCollectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < comm->world_size(); ++root) {
    std::vector<double> v = rank_values<double>(comm->rank(), 11);
    comm->broadcast(Tensor(v.data(), DType::F64, {11}), root);
    EXPECT_TRUE(same_bits(v, rank_values<double>(root, 11))) << "root " << root;
  }
  comm->barrier();
}

TEST_F(MpiCollectives, RefusesDeviceTensorsAndBadCounts) {
  std::vector<double> a(6), b(4);
  // Checked before any message is sent, identically on every rank: no rank is left waiting.
  EXPECT_THROW(comm->reduce_scatter(Tensor(a.data(), DType::F64, {6}), Tensor(b.data(), DType::F64, {4}),
                                    ReduceOp::Sum),
               Error);
  EXPECT_THROW(comm->all_reduce(Tensor(a.data(), DType::F64, {6}, Device::CUDA), ReduceOp::Sum), Error);
  EXPECT_THROW(comm->broadcast(Tensor(a.data(), DType::F64, {6}), comm->world_size()), Error);
}

TEST_F(MpiCollectives, AgreementPassesWhenEveryRankIsFine) {
  EXPECT_NO_THROW(comm->agree("", 30.0));
}

TEST_F(MpiCollectives, AgreementNamesTheFailedRankOnEveryRank) {
  const int bad = comm->world_size() - 1;
  const std::string mine = comm->rank() == bad ? "data.jsonl line 7: missing field 'output'" : "";
  try {
    comm->agree(mine, 30.0);
    ADD_FAILURE() << "rank " << comm->rank() << ": the failure on rank " << bad << " was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank " + std::to_string(bad) + ": data.jsonl line 7: missing field 'output'");
  }
  // The ranks still agree afterwards (the step left no message behind).
  EXPECT_NO_THROW(comm->agree("", 30.0));
}

}  // namespace
}  // namespace lt::dist
