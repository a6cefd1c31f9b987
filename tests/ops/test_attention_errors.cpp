// Bad attention calls: each gives one lt::Error naming the param or tensor and what was expected.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ops/attention_reference.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

void expect_error(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

// Buffers for one valid call that each case then breaks in one way.
struct Call {
  AttnCase c{2, 5, 9, 4, 2, 8, 3, 0, true, 901};
  AttnData d = make_attn_data(c);
  ops::AttentionParams p = c.params();
  std::vector<double> out = std::vector<double>(d.q.size()),
                      lse = std::vector<double>(size_t(c.B * c.H * c.Tq));
  std::vector<double> dq = out, dout = d.q, dk = d.k, dv = d.v;

  Tensor qt(std::vector<double>& x) { return Tensor(x.data(), DType::F64, {c.B, c.Tq, c.H, c.HD}); }
  Tensor kt(std::vector<double>& x) { return Tensor(x.data(), DType::F64, {c.B, c.S, c.KVH, c.HD}); }
  Tensor lse_t() { return Tensor(lse.data(), DType::F64, {c.B, c.H, c.Tq}); }
  Tensor qs() { return seg_tensor(d.q_seg, c.B, c.Tq); }
  Tensor ks() { return seg_tensor(d.k_seg, c.B, c.S); }
  void forward() { ops::attention_forward(ctx, p, qt(out), lse_t(), qt(d.q), kt(d.k), kt(d.v), qs(), ks()); }
  void backward() {
    ops::attention_backward(ctx, p, qt(dq), kt(dk), kt(dv), qt(dout), qt(out), lse_t(), qt(d.q), kt(d.k),
                            kt(d.v), qs(), ks());
  }
};

TEST(AttentionErrors, ValidCallPasses) {
  Call call;
  EXPECT_NO_THROW(call.forward());
  EXPECT_NO_THROW(call.backward());
}

TEST(AttentionErrors, BadParams) {
  {
    Call call;
    call.p.kv_heads = 3;
    expect_error([&] { call.forward(); }, "heads = 4 is not a multiple of kv_heads = 3");
  }
  {
    Call call;
    call.p.q_offset = 5;  // 5 + 5 > kv_len 9
    expect_error([&] { call.forward(); }, "kv_len = 9 is shorter than q_offset + q_len = 5 + 5 = 10");
  }
  {
    Call call;
    call.p.window = -2;
    expect_error([&] { call.backward(); }, "attention_backward: window = -2; expected >= 0");
  }
  {
    Call call;
    call.p.q_offset = -1;
    expect_error([&] { call.forward(); }, "q_offset = -1; expected >= 0");
  }
  {
    Call call;
    call.p.head_dim = 0;
    expect_error([&] { call.forward(); }, "head_dim = 0; expected each >= 1");
  }
  {
    Call call;
    call.p.scale = std::nan("");
    expect_error([&] { call.forward(); }, "scale = nan; expected a finite number");
  }
}

TEST(AttentionErrors, BadShapesAndDtypes) {
  {
    Call call;
    call.p.heads = 2;  // q is (2, 5, 4, 8)
    call.p.kv_heads = 2;
    expect_error([&] { call.forward(); },
                 "attention_forward q (B, Tq, H, HD): shape (2, 5, 4, 8) expected (2, 5, 2, 8)");
  }
  {
    Call call;
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, call.qt(call.out),
                                 Tensor(call.lse.data(), DType::F64, {2, 5, 4}), call.qt(call.d.q),
                                 call.kt(call.d.k), call.kt(call.d.v), call.qs(), call.ks());
        },
        "lse (B, H, Tq): shape (2, 5, 4) expected (2, 4, 5)");
  }
  {
    Call call;
    expect_error(
        [&] {
          ops::attention_backward(ctx, call.p, call.qt(call.dq),
                                  Tensor(call.dk.data(), DType::F64, {2, 9, 8, 4}), call.kt(call.dv),
                                  call.qt(call.dout), call.qt(call.out), call.lse_t(), call.qt(call.d.q),
                                  call.kt(call.d.k), call.kt(call.d.v), call.qs(), call.ks());
        },
        "dk (B, S, KVH, HD): shape (2, 9, 8, 4) expected (2, 9, 2, 8)");
  }
  {
    Call call;
    std::vector<float> k32(call.d.k.begin(), call.d.k.end());
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, call.qt(call.out), call.lse_t(), call.qt(call.d.q),
                                 Tensor(k32.data(), DType::F32, {2, 9, 2, 8}), call.kt(call.d.v), call.qs(),
                                 call.ks());
        },
        "attention_forward k vs q: dtypes differ (f32 vs f64)");
  }
  {
    Call call;
    std::vector<uint16_t> q16(call.d.q.size()), o16(call.d.q.size()), k16(call.d.k.size()),
        l16(call.lse.size());
    auto t = [](std::vector<uint16_t>& x, std::initializer_list<int64_t> s) {
      return Tensor(x.data(), DType::BF16, s);
    };
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, t(o16, {2, 5, 4, 8}), t(l16, {2, 4, 5}), t(q16, {2, 5, 4, 8}),
                                 t(k16, {2, 9, 2, 8}), t(k16, {2, 9, 2, 8}), call.qs(), call.ks());
        },
        "dtype bf16 is not supported (f32 or f64)");
  }
}

TEST(AttentionErrors, BadSegments) {
  {
    Call call;
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, call.qt(call.out), call.lse_t(), call.qt(call.d.q),
                                 call.kt(call.d.k), call.kt(call.d.v), call.qs(), Tensor());
        },
        "q_segments is given but k_segments is empty; give both (packed sequences) or neither");
  }
  {
    Call call;
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, call.qt(call.out), call.lse_t(), call.qt(call.d.q),
                                 call.kt(call.d.k), call.kt(call.d.v), call.qs(),
                                 Tensor(call.d.k_seg.data(), DType::I32, {2, 8}));
        },
        "k_segments (B, S): shape (2, 8) expected (2, 9)");
  }
  {
    Call call;
    std::vector<int64_t> wide(call.d.q_seg.begin(), call.d.q_seg.end());
    expect_error(
        [&] {
          ops::attention_forward(ctx, call.p, call.qt(call.out), call.lse_t(), call.qt(call.d.q),
                                 call.kt(call.d.k), call.kt(call.d.v),
                                 Tensor(wide.data(), DType::I64, {2, 5}), call.ks());
        },
        "q_segments: dtype i64 expected i32");
  }
  {
    Call call;
    call.d.k_seg[9 + 4] = call.d.k_seg[9 + 3] - 1;  // row 1 steps down at key 4
    expect_error([&] { call.backward(); }, "k_segments[1, 4] = ");
    expect_error([&] { call.forward(); }, "segment ids must be non-decreasing along each row");
  }
  {
    Call call;
    call.d.q_seg[2] += 100;  // query 2 of row 0 sits at key 3 + 2 = 5
    expect_error([&] { call.forward(); }, "q_segments[0, 2] = ");
    expect_error([&] { call.forward(); },
                 "sits at key position q_offset + 2 = 5 and must carry that position's segment id");
  }
}

}  // namespace
}  // namespace lt::test
