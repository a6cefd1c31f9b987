// Global-norm clipping against torch.nn.utils.clip_grad_norm_ goldens (tools/make_optimizer_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_context.h"
#include "support/test_support.h"
#include "train/grad_clip.h"

namespace lt::train {
namespace {

template <class T>
void run_case(const nlohmann::json& c, double norm_tol, double grad_tol) {
  std::vector<std::vector<T>> grads;
  std::vector<Tensor> views;
  std::vector<std::string> names;
  for (auto& [name, shape] : c["shapes"].items()) {
    auto v = c["grads"][name].template get<std::vector<double>>();
    grads.emplace_back(v.begin(), v.end());
    names.push_back(name);
  }
  for (auto& g : grads) views.push_back(Tensor(g.data(), dtype_of<T>::value, {int64_t(g.size())}));
  double norm = clip_grad_norm(ctx, views, c["max_norm"].get<double>());
  double want = c["total_norm"];
  EXPECT_NEAR(norm, want, norm_tol * want) << c["name"];
  for (size_t i = 0; i < grads.size(); ++i) {
    std::vector<double> got(grads[i].begin(), grads[i].end());
    EXPECT_LE(test::max_rel_diff(got, c["clipped"][names[i]].get<std::vector<double>>()), grad_tol)
        << c["name"] << " " << names[i];
  }
}

nlohmann::json golden() {
  std::ifstream f(test::source_path("tests/train/golden/clip.json"));
  EXPECT_TRUE(f.good());
  return nlohmann::json::parse(f);
}

TEST(GradClip, MatchesTorchClipGradNorm) {
  const auto g = golden();  // kept alive: a range-for over a temporary's member would dangle
  for (const auto& c : g["cases"]) {
    if (c["dtype"] == "f64") {
      run_case<double>(c, 1e-14, 1e-14);
    } else {
      // torch reduces in float32; we reduce in double: the norm agrees to float rounding.
      run_case<float>(c, 1e-6, 1e-6);
    }
  }
}

TEST(GradClip, NotClippedWhenBelowMaxAndOffAtZero) {
  std::vector<double> g = {3.0, 4.0};
  std::vector<Tensor> v = {Tensor(g.data(), DType::F64, {2})};
  EXPECT_DOUBLE_EQ(clip_grad_norm(ctx, v, 10.0), 5.0);
  EXPECT_EQ(g[0], 3.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ctx, v, 0.0), 5.0);  // off: norm still reported
  EXPECT_EQ(g[1], 4.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ctx, v, 1.0), 5.0);
  EXPECT_NEAR(g[0], 3.0 / (5.0 + 1e-6), 1e-16);
  EXPECT_NEAR(g[1], 4.0 / (5.0 + 1e-6), 1e-16);
}

TEST(GradClip, DeterministicAndMixedDtypes) {
  // A tensor large enough to be reduced in several blocks by several threads.
  auto r = test::random_values(300000, 11);
  std::vector<float> a(r.begin(), r.end());
  std::vector<bf16> b;
  for (double x : test::random_values(1000, 12)) b.push_back(to_bf16(float(x)));
  std::vector<Tensor> v = {Tensor(a.data(), DType::F32, {int64_t(a.size())}),
                           Tensor(b.data(), DType::BF16, {int64_t(b.size())})};
  double n1 = global_grad_norm(ctx, v);
  double n2 = global_grad_norm(ctx, v);
  EXPECT_EQ(n1, n2);
  long double ref = 0;
  for (float x : a) ref += (long double)x * x;
  for (bf16 x : b) ref += (long double)to_float(x) * to_float(x);
  EXPECT_NEAR(n1, std::sqrt(double(ref)), 1e-12 * n1);
}

TEST(GradClip, NonFiniteNormLeavesGradients) {
  std::vector<double> g = {1.0, INFINITY};
  std::vector<Tensor> v = {Tensor(g.data(), DType::F64, {2})};
  EXPECT_TRUE(std::isinf(clip_grad_norm(ctx, v, 1.0)));
  EXPECT_EQ(g[0], 1.0);
  EXPECT_THROW(clip_grad_norm(ctx, v, -1.0), Error);
  std::vector<int32_t> ints = {1};
  EXPECT_THROW(global_grad_norm(ctx, {Tensor(ints.data(), DType::I32, {1})}), Error);
}

}  // namespace
}  // namespace lt::train
