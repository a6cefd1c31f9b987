// The adamw8bit op on its own (ops/adamw8bit.h): many tensors in one call are each tensor stepped alone, and
// a first step's 8-bit state decodes to the f32 moments it stands for, within one gap of the dynamic map.
// (Bit equality with bitsandbytes itself, through the optimizer: tests/train/test_adamw8bit.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/adamw8bit.h"
#include "ops/adamw8bit_maps.h"
#include "support/test_context.h"

namespace lt {
namespace {

// One tensor's storage and its op view: 8-bit state when count >= 4096 (bnb's rule), f32 moments below.
struct Stepped {
  int64_t count;
  std::vector<float> param, grad, m32, v32, absmax1, absmax2;
  std::vector<uint8_t> q1, q2;

  Stepped(int64_t n, uint32_t seed) : count(n), param(size_t(n)), grad(size_t(n)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& p : param) p = normal(rng);
    for (float& g : grad) g = 0.1f * normal(rng);
    if (ops::adamw8bit_quantizes(n)) {
      q1.assign(size_t(n), 0), q2.assign(size_t(n), 0);
      absmax1.assign(size_t(ops::adamw8bit_blocks(n)), 0.0f), absmax2 = absmax1;
    } else {
      m32.assign(size_t(n), 0.0f), v32.assign(size_t(n), 0.0f);
    }
  }

  ops::AdamW8bitTensor view(int64_t step) {
    ops::AdamW8bitTensor t;
    t.p = {.count = count, .lr = 1e-3, .weight_decay = 0.01, .step = step};
    t.param = Tensor(param.data(), DType::F32, {count});
    t.grad = Tensor(grad.data(), DType::F32, {count});
    if (q1.empty()) {
      t.state1 = Tensor(m32.data(), DType::F32, {count});
      t.state2 = Tensor(v32.data(), DType::F32, {count});
    } else {
      const int64_t blocks = ops::adamw8bit_blocks(count);
      t.state1 = Tensor(q1.data(), DType::U8, {count});
      t.state2 = Tensor(q2.data(), DType::U8, {count});
      t.absmax1 = Tensor(absmax1.data(), DType::F32, {blocks});
      t.absmax2 = Tensor(absmax2.data(), DType::F32, {blocks});
    }
    return t;
  }

  bool operator==(const Stepped& o) const {
    return param == o.param && m32 == o.m32 && v32 == o.v32 && absmax1 == o.absmax1 && absmax2 == o.absmax2 &&
           q1 == o.q1 && q2 == o.q2;
  }
};

TEST(AdamW8bitOp, ManyTensorsInOneCallAreEachSteppedAlone) {
  // 8-bit with a partial last block, and 32-bit state below min_8bit_size.
  std::vector<Stepped> together = {Stepped(4096 + 300, 1), Stepped(100, 2)};
  std::vector<Stepped> alone = together;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<ops::AdamW8bitTensor> views;
    for (Stepped& s : together) views.push_back(s.view(step));
    ops::adamw8bit_step_many(ctx, views);
    for (Stepped& s : alone) ops::cpu::adamw8bit_step(s.view(step));
  }
  for (size_t i = 0; i < together.size(); ++i) EXPECT_TRUE(together[i] == alone[i]) << "tensor " << i;
  EXPECT_NE(together[0].param, Stepped(4096 + 300, 1).param) << "the step changed the parameters";
}

// After the first step from zero state, m = (1 - beta1) g: each block's absmax is its largest |m| and each
// code decodes to m within the largest gap between neighbouring codes of the signed map (times the absmax).
TEST(AdamW8bitOp, FirstStepCodesDecodeToTheMoment) {
  Stepped s(16 * 256 + 17, 3);  // 8-bit state (>= 4096), a partial last block
  ASSERT_TRUE(ops::adamw8bit_quantizes(s.count));
  const std::vector<float> grad = s.grad;
  ops::cpu::adamw8bit_step(s.view(1));
  std::vector<float> map(std::begin(ops::kDynamicSigned), std::end(ops::kDynamicSigned));
  std::sort(map.begin(), map.end());
  float gap = 0.0f;
  for (size_t i = 1; i < map.size(); ++i) gap = std::max(gap, map[i] - map[i - 1]);
  for (int64_t b = 0; b < ops::adamw8bit_blocks(s.count); ++b) {
    const int64_t begin = b * 256, end = std::min(s.count, begin + 256);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(0.1f * grad[size_t(i)]));
    EXPECT_NEAR(s.absmax1[size_t(b)], largest, 1e-6f * largest) << "block " << b;
    for (int64_t i = begin; i < end; ++i) {
      const float decoded = ops::kDynamicSigned[s.q1[size_t(i)]] * s.absmax1[size_t(b)];
      EXPECT_LE(std::fabs(decoded - 0.1f * grad[size_t(i)]), gap * s.absmax1[size_t(b)]) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace lt
