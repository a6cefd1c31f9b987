#include <cmath>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

constexpr int64_t N = 6, D = 5, V = 9;

struct EmbeddingCase {
  ops::EmbeddingParams p{N, D, V};
  std::vector<int32_t> ids{3, 0, 8, 3, 5, 3};  // repeats: backward must add them up
  std::vector<double> table = test::random_values(V * D, 301);
  std::vector<double> r = test::random_values(N * D, 302);  // projection: loss = sum(out * r)
};

TEST(Embedding, ForwardCopiesRows) {
  EmbeddingCase c;
  HostTensor ids = HostTensor::ints({N}, c.ids), table = HostTensor::of(DType::F64, {V, D}, c.table);
  HostTensor out(DType::F64, {N, D});
  ops::embedding_forward(ctx, c.p, out, ids, table);
  std::vector<double> o = out.values();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d)
      EXPECT_EQ(o[size_t(n * D + d)], c.table[size_t(c.ids[size_t(n)] * D + d)]);
}

TEST(Embedding, GradientMatchesFiniteDifferences) {
  EmbeddingCase c;
  HostTensor ids = HostTensor::ints({N}, c.ids), table = HostTensor::of(DType::F64, {V, D}, c.table);
  HostTensor out(DType::F64, {N, D});
  std::vector<double> dt0 = test::random_values(V * D, 303);  // dtable accumulates onto what it holds
  HostTensor dtable = HostTensor::of(DType::F64, {V, D}, dt0), dout = HostTensor::of(DType::F64, {N, D}, c.r);
  ops::embedding_backward(ctx, c.p, dtable, dout, ids);
  std::vector<double> tv = c.table;
  auto fd = test::finite_difference_gradient(tv, [&] {
    table.set(tv);
    ops::embedding_forward(ctx, c.p, out, ids, table);
    return test::dot(out.values(), c.r);
  });
  EXPECT_LE(test::max_rel_diff(test::minus(dtable.values(), dt0), fd), 1e-6);
}

TEST(Embedding, FloatAgreesWithDoubleAndBackwardAccumulates) {
  EmbeddingCase c;
  std::vector<double> ts = test::rounded_to_float(c.table), gs = test::rounded_to_float(c.r);
  std::vector<double> out[2][2];
  DType dtypes[2] = {DType::F64, DType::F32};
  for (int i = 0; i < 2; ++i) {
    DType t = dtypes[i];
    HostTensor ids = HostTensor::ints({N}, c.ids), table = HostTensor::of(t, {V, D}, ts), o(t, {N, D});
    HostTensor dtable = HostTensor::of(t, {V, D}, std::vector<double>(V * D, 0.0)),
               dout = HostTensor::of(t, {N, D}, gs);
    ops::embedding_forward(ctx, c.p, o, ids, table);
    ops::embedding_backward(ctx, c.p, dtable, dout, ids);
    std::vector<double> once = dtable.values();
    ops::embedding_backward(ctx, c.p, dtable, dout, ids);
    std::vector<double> twice = dtable.values();
    for (size_t k = 0; k < once.size(); ++k)
      EXPECT_NEAR(twice[k], 2 * once[k], 1e-6 * (1 + std::abs(once[k])));
    out[i][0] = o.values(), out[i][1] = once;
  }
  for (int i = 0; i < 2; ++i) EXPECT_LE(test::max_rel_diff(out[1][i], out[0][i]), 1e-6) << "output " << i;
}

TEST(Embedding, BadIdsAndShapesAreNamed) {
  EmbeddingCase c;
  HostTensor table = HostTensor::of(DType::F64, {V, D}, c.table), out(DType::F64, {N, D});
  std::vector<int32_t> bad = c.ids;
  bad[4] = 9;
  HostTensor ids_high = HostTensor::ints({N}, bad);
  test::expect_error([&] { ops::embedding_forward(ctx, c.p, out, ids_high, table); },
                     "token id 9 at row 4 is outside the vocabulary [0, 9)");
  bad[4] = 1;
  bad[2] = -7;
  HostTensor ids_neg = HostTensor::ints({N}, bad);
  HostTensor dtable(DType::F64, {V, D}), dout = HostTensor::of(DType::F64, {N, D}, c.r);
  test::expect_error([&] { ops::embedding_backward(ctx, c.p, dtable, dout, ids_neg); },
                     "embedding_backward: token id -7 at row 2 is outside the vocabulary [0, 9)");
  HostTensor ids_i64(DType::I64, {N});
  test::expect_error([&] { ops::embedding_forward(ctx, c.p, out, ids_i64, table); },
                     "embedding_forward ids: dtype i64 expected i32");
  HostTensor ids = HostTensor::ints({N}, c.ids), wide(DType::F64, {V, D + 1});
  test::expect_error([&] { ops::embedding_forward(ctx, c.p, out, ids, wide); },
                     "embedding_forward table: shape (9, 6) expected (9, 5)");
}

TEST(Embedding, SameBitsWithAnyThreadCount) {
  const int64_t n = 300, d = 129, v = 50;  // many repeated ids, a partial column block
  ops::EmbeddingParams p{n, d, v};
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::vector<double> pick = test::random_values(size_t(n), 311, 0.0, double(v));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(pick[i]);
  std::vector<double> table0 = test::random_values(v * d, 312), dout0 = test::random_values(n * d, 313);
  std::vector<double> out[2][2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i)
    test::with_threads(threads[i], [&] {
      HostTensor idt = HostTensor::ints({n}, ids), table = HostTensor::of(DType::F32, {v, d}, table0);
      HostTensor o(DType::F32, {n, d}), dout = HostTensor::of(DType::F32, {n, d}, dout0);
      HostTensor dtable = HostTensor::of(DType::F32, {v, d}, table0);
      ops::embedding_forward(ctx, p, o, idt, table);
      ops::embedding_backward(ctx, p, dtable, dout, idt);
      out[i][0] = o.values(), out[i][1] = dtable.values();
    });
  for (int c = 0; c < 2; ++c) EXPECT_EQ(out[0][c], out[1][c]) << "output " << c;
  // Every column of every block, against the scatter-add written plainly.
  std::vector<double> want = test::rounded_to_float(table0), g = test::rounded_to_float(dout0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c) want[size_t(ids[size_t(t)] * d + c)] += g[size_t(t * d + c)];
  EXPECT_LE(test::max_rel_diff(out[1][1], want), 1e-6);
}

}  // namespace
}  // namespace lt
