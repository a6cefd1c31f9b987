// LongRoPE (Phi-3's "longrope"/"su"): the short and long inverse frequencies and the attention factor against
// transformers (tools/make_rope_golden.py), and rope_forward's choice of factor set from the call's largest
// position with cos/sin scaled by attention_factor.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host_buffers.h"
#include "ops/ops.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::HostTensor;

nlohmann::json longrope_cases() {
  std::ifstream in(test::source_path("tests/ops/golden/rope_inv_freq.json"));
  EXPECT_TRUE(in) << "missing tests/ops/golden/rope_inv_freq.json (tools/make_rope_golden.py writes it)";
  const nlohmann::json doc = nlohmann::json::parse(in);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : doc["cases"])
    if (c.contains("inv_freq_short")) out.push_back(c);
  return out;
}

ops::RopeParams longrope_params(const nlohmann::json& c, int64_t tokens, int64_t heads) {
  const auto head_dim = c["head_dim"].get<int64_t>();
  ops::RopeParams p{tokens, heads, head_dim, c["theta"].get<double>()};
  p.rotary_dim = int64_t(double(head_dim) * c["partial_rotary_factor"].get<double>());
  p.type = ops::RopeType::LongRope;
  p.original_max_position = c["original_max_position_embeddings"].get<int64_t>();
  p.short_factor = c["rope_scaling"]["short_factor"].get<std::vector<double>>();
  p.long_factor = c["rope_scaling"]["long_factor"].get<std::vector<double>>();
  p.attention_factor = c["attention_factor"].get<double>();
  return p;
}

TEST(RopeLongrope, InvFreqMatchesTransformersShortAndLong) {
  const nlohmann::json cases = longrope_cases();
  ASSERT_GE(cases.size(), 3u);
  for (const auto& c : cases) {
    ops::RopeParams p = longrope_params(c, 1, 1);
    for (bool long_context : {false, true}) {
      p.long_context = long_context;
      const auto want = c[long_context ? "inv_freq_long" : "inv_freq_short"].get<std::vector<double>>();
      const std::vector<double> got = ops::rope_inv_freq(p);
      ASSERT_EQ(got.size(), want.size()) << c["name"];
      // transformers computes in float32: agreement to float32 precision.
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-6 * want[i])
            << c["name"] << " long " << long_context << " index " << i;
    }
  }
}

// The factor set follows the call's largest position (transformers: max(position_ids) + 1 against
// original_max_position_embeddings, for the whole batch), and cos/sin carry attention_factor.
TEST(RopeLongrope, ForwardPicksTheFactorsByTheLargestPositionAndScales) {
  const nlohmann::json c = longrope_cases().at(2);  // head_dim 16, original 16, attention_factor 1.25
  constexpr int64_t H = 2;
  for (int32_t last : {15, 16}) {  // max + 1 = 16: short (not past 16); 17: long
    const std::vector<int32_t> positions{0, 3, 7, last};
    const auto N = int64_t(positions.size());
    ops::RopeParams p = longrope_params(c, N, H);
    const int64_t HD = p.head_dim, half = HD / 2;
    std::vector<double> x0 = test::random_values(N * H * HD, 731);
    HostTensor x = HostTensor::of(DType::F64, {N, H, HD}, x0), pos = HostTensor::ints({N}, positions);
    ops::rope_forward(ctx, p, x, pos);
    ops::RopeParams chosen = p;
    chosen.long_context = last + 1 > 16;
    const std::vector<double> inv = ops::rope_inv_freq(chosen), got = x.values();
    EXPECT_NE(inv, [&] {
      ops::RopeParams other = chosen;
      other.long_context = !chosen.long_context;
      return ops::rope_inv_freq(other);
    }());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < half; ++j) {
          const size_t i1 = size_t((n * H + h) * HD + j), i2 = i1 + size_t(half);
          const long double a = (long double)positions[size_t(n)] * inv[size_t(j)];
          const long double cs = 1.25L * std::cos(a), sn = 1.25L * std::sin(a);
          EXPECT_NEAR(got[i1], double(x0[i1] * cs - x0[i2] * sn), 1e-12) << "last " << last;
          EXPECT_NEAR(got[i2], double(x0[i2] * cs + x0[i1] * sn), 1e-12) << "last " << last;
        }
    // Backward is the transpose: the same scale, the negative angle; forward then backward scales by 1.25^2.
    ops::rope_backward(ctx, p, x, pos);
    const std::vector<double> back = x.values();
    for (size_t i = 0; i < back.size(); ++i) EXPECT_NEAR(back[i], 1.5625 * x0[i], 1e-12);
  }
}

TEST(RopeLongrope, FactorListOfTheWrongLengthIsRefused) {
  ops::RopeParams p = longrope_params(longrope_cases().at(0), 1, 1);
  p.short_factor.pop_back();
  EXPECT_THROW(ops::rope_inv_freq(p), Error);
}

}  // namespace
}  // namespace lt
