// dropout_apply on the CPU: the mask is the Philox definition of ops.h (position-keyed, one stream per row
// of the batch), so a sequence split into chunks (q_offset) gets exactly the masks of the whole sequence;
// kept values are scaled by (T)(1 / (1 - p)); about 1 - p of the elements survive.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/philox.h"
#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

const std::vector<uint64_t> kStreams = {0x1234567890abcdefull, 7, 0xfedcba9876543210ull};

TEST(Dropout, FollowsThePhiloxDefinition) {
  const int64_t B = 3, C = 5, D = 13, q_offset = 11;
  const double p = 0.3;
  const uint64_t seed = 99;
  const std::vector<double> x0 = test::random_values(static_cast<size_t>(B * C * D), 601);
  for (DType t : {DType::F32, DType::F64}) {
    HostTensor x = HostTensor::of(t, {B * C, D}, x0);
    ops::dropout_apply(ctx, {.batch = B, .tokens = C, .dim = D, .q_offset = q_offset, .p = p, .seed = seed},
                       x, kStreams);
    const std::vector<double> out = x.values();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < C; ++i)
        for (int64_t j = 0; j < D; ++j) {
          const size_t e = static_cast<size_t>((b * C + i) * D + j);
          const uint64_t index = uint64_t((q_offset + i) * D + j);
          const bool keep = double(philox_uniform(seed, kStreams[static_cast<size_t>(b)], index)) >= p;
          const double expected = !keep             ? 0.0
                                  : t == DType::F32 ? double(float(x0[e]) * float(1.0 / (1.0 - p)))
                                                    : x0[e] * (1.0 / (1.0 - p));
          ASSERT_EQ(out[e], expected) << dtype_name(t) << " row " << b << " token " << i << " column " << j;
        }
  }
}

// scale_kept false (LoRA folds 1 / (1 - p) into its GEMMs): the same mask, the kept values unchanged.
TEST(Dropout, MaskAloneKeepsTheValues) {
  const int64_t B = 3, C = 5, D = 13;
  const std::vector<double> x0 = test::random_values(static_cast<size_t>(B * C * D), 603);
  for (DType t : {DType::F32, DType::F64}) {
    HostTensor scaled = HostTensor::of(t, {B * C, D}, x0), masked = HostTensor::of(t, {B * C, D}, x0);
    const ops::DropoutParams params{.batch = B, .tokens = C, .dim = D, .q_offset = 4, .p = 0.3, .seed = 8};
    ops::dropout_apply(ctx, params, scaled, kStreams);
    ops::DropoutParams mask_only = params;
    mask_only.scale_kept = false;
    ops::dropout_apply(ctx, mask_only, masked, kStreams);
    const std::vector<double> s = scaled.values(), m = masked.values(),
                              in = HostTensor::of(t, {B * C, D}, x0).values();
    int kept = 0;
    for (size_t e = 0; e < s.size(); ++e) {
      ASSERT_EQ(m[e] == 0, s[e] == 0) << e;
      if (s[e] != 0) {
        ASSERT_EQ(m[e], in[e]) << e;
        ++kept;
      }
    }
    EXPECT_GT(kept, 0);
  }
}

// Chunk k of every row runs with q_offset = its first position: the result equals one whole-sequence call.
TEST(Dropout, ChunksDrawTheMasksOfTheWholeSequence) {
  const int64_t B = 3, T = 37, D = 29;
  const int64_t chunks[][2] = {{0, 16}, {16, 16}, {32, 5}};  // (q_offset, tokens)
  const std::vector<double> x0 = test::random_values(static_cast<size_t>(B * T * D), 602);
  for (DType t : {DType::F32, DType::F64}) {
    HostTensor whole = HostTensor::of(t, {B * T, D}, x0);
    ops::dropout_apply(ctx, {.batch = B, .tokens = T, .dim = D, .p = 0.45, .seed = 5}, whole, kStreams);
    const std::vector<double> expected = whole.values();
    for (const auto& [q0, c] : chunks) {
      std::vector<double> part(
          static_cast<size_t>(B * c * D));  // (B * c, D): rows [q0, q0 + c) of every sequence
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < c * D; ++k)
          part[static_cast<size_t>(b * c * D + k)] = x0[static_cast<size_t>((b * T + q0) * D + k)];
      HostTensor x = HostTensor::of(t, {B * c, D}, part);
      ops::dropout_apply(ctx, {.batch = B, .tokens = c, .dim = D, .q_offset = q0, .p = 0.45, .seed = 5}, x,
                         kStreams);
      const std::vector<double> got = x.values();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < c * D; ++k)
          ASSERT_EQ(got[static_cast<size_t>(b * c * D + k)],
                    expected[static_cast<size_t>((b * T + q0) * D + k)])
              << dtype_name(t) << " chunk at " << q0 << " row " << b << " element " << k;
    }
  }
}

TEST(Dropout, KeepsAboutOneMinusPScaled) {
  const int64_t B = 2, C = 64, D = 1000;
  const std::vector<uint64_t> streams = {3, 4};
  for (double p : {0.05, 0.1, 0.5, 0.9}) {
    HostTensor x =
        HostTensor::of(DType::F32, {B * C, D}, std::vector<double>(static_cast<size_t>(B * C * D), 1.0));
    ops::dropout_apply(ctx, {.batch = B, .tokens = C, .dim = D, .p = p, .seed = 17}, x, streams);
    const std::vector<double> out = x.values();
    int64_t kept[2] = {0, 0}, same = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      ASSERT_TRUE(out[e] == 0.0 || out[e] == double(float(1.0 / (1.0 - p))))
          << "element " << e << ": " << out[e];
      kept[e < out.size() / 2] += out[e] != 0.0;
    }
    // The two rows use different streams: their masks agree about as often as independent ones would.
    for (size_t e = 0; e < out.size() / 2; ++e) same += (out[e] != 0.0) == (out[e + out.size() / 2] != 0.0);
    const double n = double(C * D);
    const double sigma = std::sqrt(n * p * (1 - p));
    for (int64_t k : kept) EXPECT_NEAR(double(k), n * (1 - p), 5 * sigma) << "p = " << p;
    const double agree = p * p + (1 - p) * (1 - p);
    EXPECT_NEAR(double(same), n * agree, 5 * std::sqrt(n * agree * (1 - agree))) << "p = " << p;
  }
}

TEST(Dropout, ZeroProbabilityKeepsEverything) {
  const std::vector<double> x0 = test::random_values(3 * 4 * 9, 603);
  HostTensor x = HostTensor::of(DType::F64, {3 * 4, 9}, x0);
  ops::dropout_apply(ctx, {.batch = 3, .tokens = 4, .dim = 9, .p = 0.0, .seed = 1}, x, kStreams);
  EXPECT_EQ(x.values(), x0);
}

TEST(Dropout, BadArgumentsAreNamed) {
  HostTensor x = HostTensor::of(DType::F32, {6, 4}, test::random_values(24, 604));
  const ops::DropoutParams ok{.batch = 3, .tokens = 2, .dim = 4, .p = 0.1, .seed = 1};
  auto with_p = [&](double p) {
    ops::DropoutParams q = ok;
    q.p = p;
    return q;
  };
  test::expect_error([&] { ops::dropout_apply(ctx, with_p(1.0), x, kStreams); },
                     "dropout_apply: params.p is 1, expected a probability in [0, 1)");
  test::expect_error([&] { ops::dropout_apply(ctx, with_p(-0.5), x, kStreams); }, "params.p is -0.5");
  test::expect_error(
      [&] {
        ops::dropout_apply(ctx, ok, x, {1, 2});
      },
      "dropout_apply: 2 streams for a batch of 3 rows; expected one per row");
  ops::DropoutParams wide = ok;
  wide.dim = 5;
  test::expect_error([&] { ops::dropout_apply(ctx, wide, x, kStreams); }, "dropout_apply x");
  ops::DropoutParams back = ok;
  back.q_offset = -1;
  test::expect_error([&] { ops::dropout_apply(ctx, back, x, kStreams); },
                     "dropout_apply: params.q_offset is -1");
  HostTensor h(DType::BF16, {6, 4});
  test::expect_error([&] { ops::dropout_apply(ctx, ok, h, kStreams); }, "dropout_apply on CPU: dtype bf16");
}

}  // namespace
}  // namespace lt
