// What the parity table does not show: bit-for-bit determinism of the reductions that avoid atomics, bad
// ids / labels / positions reported through check_device_errors, dtypes the GPU refuses, and launches on a
// stream of the context an op is given.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/rmsnorm_select.h"
#include "ops/cuda/stream.h"
#include "ops/op_profile.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt {
namespace {

using test::DeviceTensor;
using test::poisoned;
using test::random_ints;
using test::random_values;
using test::upload;
using test::upload_i32;

std::vector<char> raw(const DeviceTensor& d) {
  std::vector<char> bytes(d.t.bytes());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(bytes.data(), d.t.data, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return bytes;
}

TEST(CudaBehavior, ReductionsAreBitwiseDeterministic) {
  LT_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16}) {
    // Embedding backward: few ids repeated many times.
    const int64_t N = 4096, D = 512, V = 7;
    std::vector<double> dout = random_values(static_cast<size_t>(N * D), 11),
                        table0 = random_values(static_cast<size_t>(V * D), 12);
    std::vector<int32_t> ids = random_ints(static_cast<size_t>(N), 13, 0, int32_t(V));
    DeviceTensor g_dout = upload(dout, dt, {N, D}), g_ids = upload_i32(ids, {N});
    std::vector<char> first;
    for (int run = 0; run < 2; ++run) {
      std::vector<double> t = table0;
      DeviceTensor g_t = upload(t, dt, {V, D});
      ops::embedding_backward(ctx, {N, D, V}, g_t.t, g_dout.t, g_ids.t);
      std::vector<char> bytes = raw(g_t);
      if (run == 0)
        first = bytes;
      else
        EXPECT_TRUE(first == bytes) << "embedding_backward " << dtype_name(dt) << " differs between runs";
    }
    // RMSNorm dw and linear dbias: long column sums.
    const int64_t R = 3000, C = 768;
    std::vector<double> x = random_values(static_cast<size_t>(R * C), 21),
                        w = random_values(static_cast<size_t>(C), 22);
    std::vector<double> dy = random_values(static_cast<size_t>(R * C), 23);
    std::vector<double> rstd(static_cast<size_t>(R), 0.7);
    DeviceTensor g_x = upload(x, dt, {R, C}), g_w = upload(w, dt, {C}), g_dy = upload(dy, dt, {R, C});
    DeviceTensor g_rstd = upload(rstd, DType::F32, {R});
    std::vector<char> first_dw, first_db;
    for (int run = 0; run < 2; ++run) {
      std::vector<double> zeros(static_cast<size_t>(C), 0.0);
      DeviceTensor g_dw = upload(zeros, dt, {C}), g_db = upload(zeros, dt, {C});
      DeviceTensor g_dx = poisoned(dt, {R, C});
      ops::rmsnorm_backward(ctx, {R, C, 1e-5}, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
      ops::linear_backward(ctx, {R, 1, C}, Tensor(), Tensor(), g_db.t, g_dy.t, Tensor(), Tensor());
      if (run == 0) {
        first_dw = raw(g_dw);
        first_db = raw(g_db);
      } else {
        EXPECT_TRUE(first_dw == raw(g_dw))
            << "rmsnorm_backward dw " << dtype_name(dt) << " differs between runs";
        EXPECT_TRUE(first_db == raw(g_db))
            << "linear_backward dbias " << dtype_name(dt) << " differs between runs";
      }
    }
  }
}

// RMSNorm backward at the shapes of each of its kernels (rmsnorm.cu): the register kernels with 1, 2 and 4
// packs per thread (1000, 4096, 8192 in bf16; 1000 and 4096 in f32) and the general one (8192 in f32, 1001
// unpacked), dw in the input dtype and in f32 under bf16, dx written and accumulated, every kernel variant
// (rmsnorm_select.h): two runs give the same bits of dx and dw. Rows outnumber the backward's blocks, so
// each block walks several rows, except at 13 x 4096: fewer rows than blocks.
TEST(CudaBehavior, RmsNormBackwardIsBitwiseDeterministic) {
  LT_REQUIRE_GPU();
  struct Case {
    DType dt, dw_dt;
    int64_t rows, dim;
  };
  const Case cases[] = {{DType::BF16, DType::F32, 2100, 4096}, {DType::BF16, DType::BF16, 2100, 4096},
                        {DType::BF16, DType::F32, 1100, 8192}, {DType::BF16, DType::F32, 3000, 1000},
                        {DType::BF16, DType::F32, 700, 1001},  {DType::F32, DType::F32, 1100, 4096},
                        {DType::F32, DType::F32, 900, 8192},   {DType::F32, DType::F32, 3000, 1000},
                        {DType::BF16, DType::F32, 13, 4096}};
  for (const Case& c : cases) {
    const int64_t R = c.rows, C = c.dim;
    std::vector<double> x = random_values(static_cast<size_t>(R * C), 31, -2, 2),
                        w = random_values(static_cast<size_t>(C), 32, 0.5, 1.5),
                        dy = random_values(static_cast<size_t>(R * C), 33),
                        dx0 = random_values(static_cast<size_t>(R * C), 34),
                        dw0 = random_values(static_cast<size_t>(C), 35);
    DeviceTensor g_x = upload(x, c.dt, {R, C}), g_w = upload(w, c.dt, {C}), g_dy = upload(dy, c.dt, {R, C});
    for (const test::RmsNormVariant& v : test::kRmsNormVariants)
      for (bool accumulate : {false, true}) {
        test::RmsNormChoice choice(v);
        const std::string what = "rmsnorm_backward " + std::string(dtype_name(c.dt)) + " dw " +
                                 std::string(dtype_name(c.dw_dt)) + " (" + std::to_string(R) + ", " +
                                 std::to_string(C) + ")" + (accumulate ? " dx+=" : "") + v.name;
        DeviceTensor g_y = poisoned(c.dt, {R, C}), g_rstd = poisoned(DType::F32, {R});
        const ops::RmsNormParams p{R, C, 1e-5, accumulate};
        ops::rmsnorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t);
        std::vector<char> first_dx, first_dw;
        for (int run = 0; run < 2; ++run) {
          DeviceTensor g_dw = upload(dw0, c.dw_dt, {C});
          DeviceTensor g_dx = accumulate ? upload(dx0, c.dt, {R, C}) : poisoned(c.dt, {R, C});
          ops::rmsnorm_backward(ctx, p, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
          if (run == 0) {
            first_dx = raw(g_dx);
            first_dw = raw(g_dw);
          } else {
            EXPECT_TRUE(first_dx == raw(g_dx)) << what << ": dx differs between runs";
            EXPECT_TRUE(first_dw == raw(g_dw)) << what << ": dw differs between runs";
          }
        }
      }
  }
}

// The pair backward (the default rmsnorm_backward) against single-pdl where a half has the single kernel's
// thread count (256 at D = 4096 and 8192 in bf16): each half does single's work on single's rows, so dx has
// the same bits; dw differs only in the order of its f32 sums (the halves' rows added in the block before
// the column sum): within 1e-5 normwise. Odd row counts below the grid (13) leave a half without rows. The
// pair grid must be one wave on this GPU: otherwise pair falls back to single-pdl and the comparison would
// test nothing.
TEST(CudaBehavior, RmsNormPairBackwardMatchesSingle) {
  LT_REQUIRE_GPU();
  for (const int64_t dim : {int64_t(4096), int64_t(8192)}) {
    const ops::cuda::RmsNormBackwardOccupancy o = ops::cuda::rmsnorm_backward_occupancy(ctx, dim);
    ASSERT_GE(o.pair_resident, o.pair_grid) << "D " << dim << ": the pair grid is not one wave on this GPU ("
                                            << o.pair_resident << " blocks resident): pair runs single-pdl";
  }
  struct Case {
    int64_t rows, dim;
  };
  for (const Case c : {Case{2100, 4096}, Case{13, 4096}, Case{1100, 8192}})
    for (bool accumulate : {false, true}) {
      const int64_t R = c.rows, C = c.dim;
      const std::string what =
          "(" + std::to_string(R) + ", " + std::to_string(C) + ")" + (accumulate ? " dx+=" : "");
      std::vector<double> x = random_values(static_cast<size_t>(R * C), 81, -2, 2),
                          w = random_values(static_cast<size_t>(C), 82, 0.5, 1.5),
                          dy = random_values(static_cast<size_t>(R * C), 83),
                          dx0 = random_values(static_cast<size_t>(R * C), 84),
                          dw0 = random_values(static_cast<size_t>(C), 85);
      DeviceTensor g_x = upload(x, DType::BF16, {R, C}), g_w = upload(w, DType::BF16, {C}),
                   g_dy = upload(dy, DType::BF16, {R, C}), g_y = poisoned(DType::BF16, {R, C}),
                   g_rstd = poisoned(DType::F32, {R});
      const ops::RmsNormParams p{R, C, 1e-5, accumulate};
      ops::rmsnorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t);
      std::vector<char> dx_bits[2];
      std::vector<double> dw_values[2];
      const char* variants[2] = {"single-pdl", "pair"};
      for (int i = 0; i < 2; ++i) {
        test::ScopedKernelOption bwd("rmsnorm_backward", variants[i]);
        DeviceTensor g_dw = upload(dw0, DType::F32, {C});
        DeviceTensor g_dx = accumulate ? upload(dx0, DType::BF16, {R, C}) : poisoned(DType::BF16, {R, C});
        ops::rmsnorm_backward(ctx, p, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
        dx_bits[i] = raw(g_dx);
        dw_values[i] = test::download(g_dw);
      }
      size_t differing = 0, first = 0;
      for (size_t b = dx_bits[0].size(); b-- > 0;)
        if (dx_bits[0][b] != dx_bits[1][b]) {
          ++differing;
          first = b;
        }
      EXPECT_EQ(differing, 0u) << what << ": pair's dx differs from single-pdl's in " << differing
                               << " bytes, the first at element " << first / 2 << " (row "
                               << first / 2 / size_t(C) << ")";
      const double rel = test::max_rel_diff(dw_values[1], dw_values[0]);
      EXPECT_LE(rel, 1e-5) << what << ": pair's dw against single-pdl's, normwise relative difference "
                           << rel;
      std::printf("rmsnorm_backward pair vs single-pdl %s: dx bytes differing %zu, dw rel diff %.3g\n",
                  what.c_str(), differing, rel);
    }
}

// The RMSNorm kernel requests (rmsnorm_select.h): the kernel options, each known value, and a clear error
// naming the option for an unknown one.
TEST(CudaBehavior, RmsNormKernelRequestIsChecked) {
  using ops::cuda::RmsNormBackwardKernel;
  using ops::cuda::RmsNormForwardKernel;
  {
    const ops::Context defaults = ops::context_with(ops::KernelOptions{});
    EXPECT_EQ(ops::cuda::rmsnorm_forward_kernel_request(defaults), RmsNormForwardKernel::Rows);
    EXPECT_EQ(ops::cuda::rmsnorm_backward_kernel_request(defaults), RmsNormBackwardKernel::Pair);
  }
  {
    test::ScopedKernelOption fwd("rmsnorm_forward", "general"), bwd("rmsnorm_backward", "single-pdl");
    EXPECT_EQ(ops::cuda::rmsnorm_forward_kernel_request(ctx), RmsNormForwardKernel::General);
    EXPECT_EQ(ops::cuda::rmsnorm_backward_kernel_request(ctx), RmsNormBackwardKernel::SinglePdl);
  }
  {
    test::ScopedKernelOption fwd("rmsnorm_forward", "rows"), bwd("rmsnorm_backward", "pair");
    EXPECT_EQ(ops::cuda::rmsnorm_forward_kernel_request(ctx), RmsNormForwardKernel::Rows);
    EXPECT_EQ(ops::cuda::rmsnorm_backward_kernel_request(ctx), RmsNormBackwardKernel::Pair);
  }
  {
    test::ScopedKernelOption fwd("rmsnorm_forward", "general"), bwd("rmsnorm_backward", "general");
    EXPECT_EQ(ops::cuda::rmsnorm_forward_kernel_request(ctx), RmsNormForwardKernel::General);
    EXPECT_EQ(ops::cuda::rmsnorm_backward_kernel_request(ctx), RmsNormBackwardKernel::General);
  }
  // Variants that lost to the default were removed: refused like any unknown value.
  ops::KernelOptions o;
  for (const char* removed : {"fused", "cluster", "single", "prefetch"}) {
    try {
      ops::set_kernel_option(o, "rmsnorm_backward", removed, "LT_RMSNORM_BACKWARD");
      ADD_FAILURE() << "rmsnorm_backward " << removed << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find("LT_RMSNORM_BACKWARD: 'rmsnorm_backward' is '" + std::string(removed) +
                                     "', expected one of pair, single-pdl, general"),
          std::string::npos)
          << e.what();
    }
  }
  try {
    ops::set_kernel_option(o, "rmsnorm_forward", "fast", "LT_RMSNORM_FORWARD");
    ADD_FAILURE() << "rmsnorm_forward fast was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rmsnorm_forward' is 'fast', expected one of rows, general"),
              std::string::npos)
        << e.what();
  }
}

// The bench's occupancy diagnostic (rmsnorm_select.h) refuses what it has no kernel for, naming the value.
TEST(CudaBehavior, RmsNormOccupancyArgumentsAreChecked) {
  const auto expect_error = [](int64_t dim, const std::string& expected) {
    try {
      ops::cuda::rmsnorm_backward_occupancy(ctx, dim);
      ADD_FAILURE() << "rmsnorm_backward_occupancy(" << dim << ") was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  expect_error(4100, "dim 4100; expected a multiple of 8 in [8, 8192]");
  expect_error(16384, "dim 16384; expected a multiple of 8 in [8, 8192]");
}

// Runs fn, then expects check_device_errors to throw a message containing `expected`, and a second check
// to pass (the record is cleared).
template <class Fn>
void expect_device_error(Fn&& fn, const std::string& expected) {
  ops::cuda::check_device_errors(ctx);  // nothing pending before
  fn();
  try {
    ops::cuda::check_device_errors(ctx);
    ADD_FAILURE() << "no device error reported; expected one containing '" << expected << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));
}

TEST(CudaBehavior, BadIndicesAreReported) {
  LT_REQUIRE_GPU();
  const int64_t N = 4, D = 8, V = 5;
  std::vector<double> table = random_values(static_cast<size_t>(V * D), 31);
  DeviceTensor g_table = upload(table, DType::F32, {V, D});
  DeviceTensor g_ids = upload_i32({0, 1, 99, 2}, {N});
  DeviceTensor g_out = poisoned(DType::F32, {N, D});
  expect_device_error(
      [&] {
        ops::embedding_forward(ctx, {N, D, V}, g_out.t, g_ids.t, g_table.t);
      },
      "token id 99 at row 2");
  const std::vector<double> out = test::download(g_out);
  for (int64_t d = 0; d < D; ++d)
    EXPECT_EQ(out[static_cast<size_t>(2 * D + d)], 0.0) << "the bad row is zeroed";

  std::vector<double> dout = random_values(static_cast<size_t>(N * D), 32);
  DeviceTensor g_dout = upload(dout, DType::F32, {N, D});
  expect_device_error(
      [&] {
        ops::embedding_backward(ctx, {N, D, V}, g_table.t, g_dout.t, g_ids.t);
      },
      "token id 99 at row 2");

  std::vector<double> x = random_values(static_cast<size_t>(3 * 2 * 4), 33);
  DeviceTensor g_x = upload(x, DType::F32, {3, 2, 4}), g_pos = upload_i32({0, -7, 3}, {3});
  expect_device_error(
      [&] {
        ops::rope_forward(ctx, {3, 2, 4, 10000.0}, g_x.t, g_pos.t);
      },
      "position -7 at row 1");

  // cross_entropy_forward synchronizes for its total, so it throws at once.
  std::vector<double> z = random_values(static_cast<size_t>(3 * 6), 34);
  DeviceTensor g_z = upload(z, DType::F32, {3, 6}), g_labels = upload_i32({1, -100, 6}, {3});
  DeviceTensor g_losses = poisoned(DType::F32, {3}), g_lse = poisoned(DType::F32, {3});
  try {
    ops::cross_entropy_forward(ctx, {3, 6}, g_losses.t, g_lse.t, g_z.t, g_labels.t);
    ADD_FAILURE() << "cross_entropy_forward accepted label 6 of a vocabulary of 6";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 6 at row 2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ops::cuda::check_device_errors(ctx));
}

TEST(CudaBehavior, UnsupportedDtypesAreRefused) {
  LT_REQUIRE_GPU();
  std::vector<double> x = random_values(8, 41), w = random_values(4, 42);
  DeviceTensor g_x = upload(x, DType::BF16, {2, 4}), g_w = upload(w, DType::BF16, {4});
  DeviceTensor g_y = poisoned(DType::BF16, {2, 4});
  DeviceTensor g_rstd_bf16 = poisoned(DType::BF16, {2});
  try {
    ops::rmsnorm_forward(ctx, {2, 4, 1e-5}, g_y.t, g_rstd_bf16.t, g_x.t, g_w.t);
    ADD_FAILURE() << "a bf16 rstd was accepted on the GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rstd"), std::string::npos) << e.what();
  }
  DeviceTensor g_h64 = upload(x, DType::F64, {2, 4}), g_x64 = upload(x, DType::F64, {2, 4});
  EXPECT_THROW(ops::add_inplace(ctx, g_h64.t, g_x64.t), Error);
}

TEST(CudaBehavior, LaunchesUseTheContextsStream) {
  LT_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<double> y = random_values(1000, 51), x = random_values(1000, 52);
  DeviceTensor g_y = upload(y, DType::F32, {1000}), g_x = upload(x, DType::F32, {1000});
  ops::Context on_stream = ctx;
  on_stream.stream = stream;
  ops::add_inplace(on_stream, g_y.t, g_x.t);
  EXPECT_EQ(ops::cuda::stream_of(on_stream), stream);  // what the launchers of a call in on_stream use
  EXPECT_NO_THROW(ops::cuda::check_device_errors(on_stream));  // synchronizes `stream`
  EXPECT_EQ(ops::cuda::stream_of(ctx), nullptr);               // the test context's: the default stream
  const std::vector<double> out = test::download(g_y);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], double(float(y[i]) + float(x[i]))) << i;
  cudaStreamDestroy(stream);
}

// profile_ops: the trainer steps and reports the profile outside any op call, with the run's context; the
// report must come from that context's options (the default context has profile_ops off).
TEST(CudaBehavior, OpProfileFollowsTheContextItIsGiven) {
  LT_REQUIRE_GPU();
  ops::KernelOptions k;
  k.profile_ops = ops::ProfileOps::Ops;
  const ops::Context profiled = ops::context_with(k);
  std::vector<double> yv = random_values(4096, 3), xv = random_values(4096, 4);
  DeviceTensor y = upload(yv, DType::F32, {64, 64});
  DeviceTensor x = upload(xv, DType::F32, {64, 64});
  for (int step = 0; step < 3; ++step) {  // the first step is not counted
    ops::add_inplace(profiled, y.t, x.t);
    ops::op_profile_step(profiled);
  }
  const std::string report = ops::op_profile_report(profiled);
  EXPECT_NE(report.find("per-op GPU time"), std::string::npos) << report;
  EXPECT_NE(report.find("add_inplace"), std::string::npos) << report;
  EXPECT_EQ(ops::op_profile_report(ops::default_context()), "");
}

}  // namespace
}  // namespace lt
