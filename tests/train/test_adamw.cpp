// AdamW against torch.optim.AdamW goldens (tools/make_optimizer_golden.py) and a hand-computed step.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "ops/device.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/adamw.h"

namespace lt::train {
namespace {

nlohmann::json load_golden(const std::string& name) {
  std::ifstream f(test::source_path("tests/train/golden/" + name));
  EXPECT_TRUE(f.good()) << name;
  return nlohmann::json::parse(f);
}

std::vector<double> values(const nlohmann::json& j) {
  return j.get<std::vector<double>>();
}

template <class T>
struct Buffers {
  std::map<std::string, std::vector<T>> param, grad;
  std::map<std::string, std::vector<int64_t>> shape;
};

Tensor view(void* data, DType dtype, const std::vector<int64_t>& shape) {
  Tensor t(data, dtype, {1});
  t.ndim = int(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

template <class T>
void run_case(const nlohmann::json& c, DType state_dtype, double tol, bool relative) {
  Buffers<T> b;
  std::vector<ParamGroup> groups;
  for (auto& [name, shape] : c["shapes"].items()) {
    b.shape[name] = shape.template get<std::vector<int64_t>>();
    auto init = values(c["initial"][name]);
    b.param[name].assign(init.begin(), init.end());
    b.grad[name].assign(init.size(), T(0));
  }
  for (auto& [name, shape] : b.shape)
    groups.push_back({name, view(b.param[name].data(), dtype_of<T>::value, shape),
                      view(b.grad[name].data(), dtype_of<T>::value, shape)});
  AdamWOptions o;
  o.beta1 = c["beta1"];
  o.beta2 = c["beta2"];
  o.eps = c["eps"];
  o.weight_decay = c["weight_decay"];
  o.state_dtype = state_dtype;
  AdamW opt(ctx, groups, o);
  auto lrs = values(c["lrs"]);
  for (size_t s = 0; s < lrs.size(); ++s) {
    const auto& st = c["steps"][s];
    for (auto& [name, g] : b.grad) {
      auto gv = values(st["grads"][name]);
      g.assign(gv.begin(), gv.end());
    }
    opt.step(lrs[s]);
    EXPECT_EQ(opt.steps_taken(), int64_t(s + 1));
    auto state = opt.state_tensors();
    for (auto& [name, p] : b.param) {
      std::vector<double> got(p.begin(), p.end());
      auto want = values(st["params"][name]);
      double err = relative ? test::max_rel_diff(got, want) : test::max_abs_diff(got, want);
      EXPECT_LE(err, tol) << c["name"] << " step " << s + 1 << " param " << name;
      for (const char* which : {"exp_avg", "exp_avg_sq"}) {
        for (auto& nt : state) {
          if (nt.name != name + "." + which) continue;
          std::vector<double> m(size_t(nt.tensor.numel()));
          for (size_t k = 0; k < m.size(); ++k)
            m[k] = state_dtype == DType::F64 ? static_cast<double*>(nt.tensor.data)[k]
                                             : static_cast<float*>(nt.tensor.data)[k];
          EXPECT_LE(test::max_rel_diff(m, values(st[which][name])), relative ? tol : 1e-12)
              << c["name"] << " step " << s + 1 << " " << which << " " << name;
        }
      }
    }
  }
}

const nlohmann::json& find_case(const nlohmann::json& g, const std::string& name) {
  for (const auto& c : g["cases"])
    if (c["name"] == name) return c;
  throw std::runtime_error("golden case missing: " + name);
}

TEST(AdamW, MatchesTorchFloat64) {
  auto g = load_golden("adamw.json");
  for (const char* name : {"f64_default_betas", "f64_low_betas_big_decay", "f64_beta1_below_half"}) {
    SCOPED_TRACE(name);
    run_case<double>(find_case(g, name), DType::F64, 1e-12, false);
  }
}

TEST(AdamW, MatchesTorchFloat32BitForBit) {
  auto g = load_golden("adamw.json");
  // float32 params and state, computed in float with PyTorch's FMAs: bit-identical to torch's CPU kernels
  // (the golden was made on an AVX-512 machine).
  run_case<float>(find_case(g, "f32_default_betas"), DType::F32, 0.0, true);
}

TEST(AdamW, Float64ParamsWithFloat32StateStayClose) {
  // The default (fp32 moments) on f64 parameters: close to torch's f64 run, but not equal to it.
  auto g = load_golden("adamw.json");
  run_case<double>(find_case(g, "f64_default_betas"), DType::F32, 1e-5, true);
}

TEST(AdamW, HandComputedFirstStep) {
  // One element, t = 1: m = 0.1 g, v = 0.001 g^2, bias corrections 0.1 and 0.001, so the update is
  // lr * g / (|g| + eps) after decay; with g = 2, lr = 0.1, wd = 0.5, p0 = 3:
  // p = 3 * (1 - 0.05) - 0.1 * 2 / (2 + 1e-8).
  double p = 3.0, grad = 2.0;
  AdamWOptions o;
  o.weight_decay = 0.5;
  o.state_dtype = DType::F64;
  AdamW opt(ctx, {{"p", Tensor(&p, DType::F64, {1}), Tensor(&grad, DType::F64, {1})}}, o);
  opt.step(0.1);
  EXPECT_NEAR(p, 3.0 * 0.95 - 0.1 * 2.0 / (2.0 + 1e-8), 1e-15);
  // Second step with the same gradient: m = 0.19 g /(1-0.81) = g, v = 0.001999 g^2 / (1 - 0.998001) = g^2.
  double before = p;
  opt.step(0.1);
  EXPECT_NEAR(p, before * 0.95 - 0.1 * 2.0 / (2.0 + 1e-8), 1e-14);
}

TEST(AdamW, NoDecayByName) {
  std::vector<double> w = {1.0, -2.0}, w_g = {0.0, 0.0}, bias = {1.0, -2.0}, bias_g = {0.0, 0.0};
  AdamWOptions o;
  o.weight_decay = 0.1;
  o.no_decay_substrings = bias_and_norm_no_decay();
  o.state_dtype = DType::F64;
  AdamW opt(
      ctx,
      {{"layers.0.q_proj.weight", Tensor(w.data(), DType::F64, {2}), Tensor(w_g.data(), DType::F64, {2})},
       {"layers.0.q_proj.bias", Tensor(bias.data(), DType::F64, {2}),
        Tensor(bias_g.data(), DType::F64, {2})}},
      o);
  EXPECT_TRUE(opt.decays("layers.0.q_proj.weight"));
  EXPECT_FALSE(opt.decays("model.layers.3.input_layernorm.weight"));
  opt.step(0.5);
  // Zero gradient: only decay moves the weight; the bias does not move at all.
  EXPECT_DOUBLE_EQ(w[0], 0.95);
  EXPECT_DOUBLE_EQ(w[1], -1.9);
  EXPECT_EQ(bias[0], 1.0);
  EXPECT_EQ(bias[1], -2.0);
}

TEST(AdamW, Bf16ParamsUseFloatStateAndRoundOnce) {
  std::vector<bf16> p = {to_bf16(1.0f), to_bf16(-0.5f)};
  std::vector<float> g = {0.25f, -4.0f};
  AdamW opt(ctx, {{"p", Tensor(p.data(), DType::BF16, {2}), Tensor(g.data(), DType::F32, {2})}},
            AdamWOptions{});
  opt.step(0.01);
  // First step moves each element by about lr * sign(g).
  EXPECT_EQ(p[0].bits, to_bf16(1.0f - 0.01f).bits);
  EXPECT_EQ(p[1].bits, to_bf16(-0.5f + 0.01f).bits);
  auto st = opt.state_tensors();
  EXPECT_EQ(st[1].tensor.dtype, DType::F32);
}

// begin_step + step_params over any grouping and order (optimizer_in_backward: layer by layer, last layer
// first) is step(lr) bit for bit, including bf16 parameters rounded stochastically (each tensor's stream
// follows its index and the step, not the order of updates) and weight decay.
TEST(AdamW, StepInPartsEqualsOneStepBitForBit) {
  constexpr int kTensors = 5, kElems = 37;
  struct State {
    std::vector<std::vector<bf16>> p16;
    std::vector<std::vector<float>> p32, g;
    std::vector<ParamGroup> groups;
  };
  auto make = [&] {
    auto s = std::make_unique<State>();
    s->p16.resize(kTensors), s->p32.resize(kTensors), s->g.resize(kTensors);
    for (int i = 0; i < kTensors; ++i) {
      const std::vector<double> v = test::random_values(kElems, 100 + uint64_t(i));
      for (double x : v)
        s->p16[size_t(i)].push_back(to_bf16(float(x))), s->p32[size_t(i)].push_back(float(x));
      s->g[size_t(i)].assign(kElems, 0.0f);
    }
    for (int i = 0; i < kTensors; ++i) {
      const std::string name = i == 2 ? "layer.norm" : "w" + std::to_string(i);
      Tensor p = i % 2 == 0 ? Tensor(s->p16[size_t(i)].data(), DType::BF16, {kElems})
                            : Tensor(s->p32[size_t(i)].data(), DType::F32, {kElems});
      s->groups.push_back({name, p, Tensor(s->g[size_t(i)].data(), DType::F32, {kElems})});
    }
    return s;
  };
  auto a = make(), b = make(), c = make();
  AdamWOptions o;
  o.weight_decay = 0.1;
  o.no_decay_substrings = bias_and_norm_no_decay();
  o.stochastic_rounding = true;
  o.seed = 77;
  AdamWOptions nearest = o;
  nearest.stochastic_rounding = false;
  AdamW whole(ctx, a->groups, o), parts(ctx, b->groups, o), rounded(ctx, c->groups, nearest);
  const std::vector<std::vector<size_t>> order = {{3, 4}, {2}, {0, 1}};  // "layers" from the last one
  for (int step = 1; step <= 3; ++step) {
    for (int i = 0; i < kTensors; ++i) {
      const std::vector<double> g = test::random_values(kElems, 1000 * uint64_t(step) + uint64_t(i));
      for (int j = 0; j < kElems; ++j)
        a->g[size_t(i)][size_t(j)] = b->g[size_t(i)][size_t(j)] = c->g[size_t(i)][size_t(j)] =
            float(g[size_t(j)]);
    }
    const double lr = 1e-2 * step;
    whole.step(lr);
    rounded.step(lr);
    parts.begin_step();
    for (const std::vector<size_t>& group : order) parts.step_params(lr, group);
    EXPECT_EQ(parts.steps_taken(), whole.steps_taken());
  }
  for (int i = 0; i < kTensors; ++i)
    EXPECT_EQ(test::bytes_of(b->groups[size_t(i)].param), test::bytes_of(a->groups[size_t(i)].param)) << i;
  // Stochastic rounding was in play: some bf16 element differs from round-to-nearest's.
  EXPECT_NE(test::bytes_of(a->groups[0].param), test::bytes_of(c->groups[0].param));
  const auto sa = whole.state_tensors(), sb = parts.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t k = 0; k < sa.size(); ++k)
    EXPECT_EQ(test::bytes_of(sb[k].tensor), test::bytes_of(sa[k].tensor)) << sa[k].name;
  test::expect_error_mentions([&] { parts.step_params(0.1, std::vector<size_t>{kTensors}); },
                              {"index 5", "out of range"});
  auto d = make();
  AdamW fresh(ctx, d->groups, o);
  test::expect_error_mentions([&] { fresh.step_params(0.1, std::vector<size_t>{0}); }, {"before begin_step"});
}

TEST(AdamW, StateSaveLoadResumesIdentically) {
  auto g = load_golden("adamw.json");
  const auto& c = find_case(g, "f64_default_betas");
  auto init = values(c["initial"]["b"]);
  auto run = [&](int steps, std::vector<double>& p, AdamW& opt, std::vector<double>& grad, int from) {
    for (int s = from; s < steps; ++s) {
      auto gv = values(c["steps"][size_t(s)]["grads"]["b"]);
      std::copy(gv.begin(), gv.end(), grad.begin());  // in place: the optimizer holds a view of `grad`
      opt.step(values(c["lrs"])[size_t(s)]);
    }
    (void)p;
  };
  AdamWOptions o;
  o.weight_decay = 0.01;
  o.state_dtype = DType::F64;
  std::vector<double> p1 = init, g1(init.size());
  AdamW a(ctx, {{"b", Tensor(p1.data(), DType::F64, {5}), Tensor(g1.data(), DType::F64, {5})}}, o);
  run(7, p1, a, g1, 0);

  std::vector<double> p2 = init, g2(init.size());
  AdamW b(ctx, {{"b", Tensor(p2.data(), DType::F64, {5}), Tensor(g2.data(), DType::F64, {5})}}, o);
  run(3, p2, b, g2, 0);
  // Copy the state out (as a checkpoint would), into a fresh optimizer.
  std::vector<std::vector<double>> saved;
  std::vector<io::NamedTensor> named;
  for (auto& nt : b.state_tensors()) {
    saved.emplace_back(static_cast<double*>(nt.tensor.data),
                       static_cast<double*>(nt.tensor.data) + nt.tensor.numel());
  }
  auto names = b.state_tensors();
  for (size_t i = 0; i < names.size(); ++i)
    named.push_back({names[i].name, Tensor(saved[i].data(), DType::F64, {int64_t(saved[i].size())})});
  std::vector<double> g3(init.size());
  std::vector<double> p3 = p2;
  AdamW resumed(ctx, {{"b", Tensor(p3.data(), DType::F64, {5}), Tensor(g3.data(), DType::F64, {5})}}, o);
  resumed.load_state(named);
  EXPECT_EQ(resumed.steps_taken(), 3);
  run(7, p3, resumed, g3, 3);
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_EQ(p1[i], p3[i]) << i;
}

TEST(AdamW, LoadStateRefusesMissingOrMisshapenTensors) {
  double p = 1, g = 1;
  AdamWOptions o;
  o.state_dtype = DType::F64;
  AdamW opt(ctx, {{"w", Tensor(&p, DType::F64, {1}), Tensor(&g, DType::F64, {1})}}, o);
  double step = 4, m = 0.5, v[2] = {1, 2};
  try {
    opt.load_state({{"step", Tensor(&step, DType::F64, {1})}, {"w.exp_avg", Tensor(&m, DType::F64, {1})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w.exp_avg_sq"), std::string::npos) << e.what();
  }
  try {
    opt.load_state({{"step", Tensor(&step, DType::F64, {1})},
                    {"w.exp_avg", Tensor(&m, DType::F64, {1})},
                    {"w.exp_avg_sq", Tensor(v, DType::F64, {2})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2)"), std::string::npos) << e.what();
  }
  double bad_step = 2.5;
  EXPECT_THROW(opt.load_state({{"step", Tensor(&bad_step, DType::F64, {1})},
                               {"w.exp_avg", Tensor(&m, DType::F64, {1})},
                               {"w.exp_avg_sq", Tensor(v, DType::F64, {1})}}),
               Error);
  EXPECT_EQ(opt.steps_taken(), 0);  // nothing was half-loaded
}

// A corrupt checkpoint's moments (NaN, a negative second moment) are refused naming the file and the tensor,
// before anything is copied: otherwise every later update turns NaN far from the cause.
TEST(AdamW, LoadStateRefusesCorruptMomentsNamingTheSource) {
  double p = 1, g = 1;
  AdamWOptions o;
  o.state_dtype = DType::F64;
  AdamW opt(ctx, {{"w", Tensor(&p, DType::F64, {1}), Tensor(&g, DType::F64, {1})}}, o);
  double step = 4, good = 0.5, nan = std::nan(""), negative = -1;
  struct Case {
    double* m;
    double* v;
    const char* tensor;
  };
  for (const Case& c : {Case{&nan, &good, "w.exp_avg"}, Case{&good, &negative, "w.exp_avg_sq"}}) {
    try {
      opt.load_state({{"step", Tensor(&step, DType::F64, {1})},
                      {"w.exp_avg", Tensor(c.m, DType::F64, {1})},
                      {"w.exp_avg_sq", Tensor(c.v, DType::F64, {1})}},
                     "ckpt/checkpoint-4/optimizer.safetensors");
      FAIL() << "expected an error for " << c.tensor;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("ckpt/checkpoint-4/optimizer.safetensors"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + c.tensor + "'"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(opt.steps_taken(), 0);
}

// A compute copy (a master's working weight, a LoRA adapter's bf16 copy) is written by every step with the
// updated parameter rounded to nearest: the same bits as a separate ops::copy after the step. A copy that is
// not narrower, or of another size, is refused naming the parameter.
TEST(AdamW, ComputeCopyIsTheUpdatedParameterRounded) {
  std::vector<float> p(37), g(37);
  const std::vector<double> init = test::random_values(37, 41), grads = test::random_values(37, 42);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = float(init[i]);
    g[i] = float(grads[i]);
  }
  std::vector<float> p_plain = p;
  std::vector<bf16> copy(37, to_bf16(0.0f)), separate(37);
  AdamWOptions o;
  o.weight_decay = 0.1;
  AdamW fused(ctx,
              {{"w", Tensor(p.data(), DType::F32, {37}), Tensor(g.data(), DType::F32, {37}),
                Tensor(copy.data(), DType::BF16, {37})}},
              o);
  AdamW plain(ctx, {{"w", Tensor(p_plain.data(), DType::F32, {37}), Tensor(g.data(), DType::F32, {37})}}, o);
  for (int step = 0; step < 3; ++step) {
    fused.step(1e-2);
    plain.step(1e-2);
    ops::copy(ctx, Tensor(separate.data(), DType::BF16, {37}), Tensor(p_plain.data(), DType::F32, {37}));
    ASSERT_EQ(p, p_plain) << "step " << step;
    for (size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(copy[i].bits, separate[i].bits) << "step " << step;
  }
  double d[2] = {1, 2}, dg[2] = {0, 0};
  float wide[2] = {0, 0};
  test::expect_error_mentions(
      [&] {
        AdamW(ctx,
              {{"w", Tensor(p.data(), DType::F32, {37}), Tensor(g.data(), DType::F32, {37}),
                Tensor(d, DType::F64, {2})}},
              o);
      },
      {"AdamW: the compute copy of 'w' is f64 (2)"});
  test::expect_error_mentions(
      [&] {
        AdamW(ctx,
              {{"v", Tensor(d, DType::F64, {2}), Tensor(dg, DType::F64, {2}), Tensor(wide, DType::F32, {1})}},
              o);
      },
      {"the compute copy of 'v' is f32 (1) on cpu, expected 2 elements of a narrower dtype than f64"});
}

TEST(AdamW, RefusesBadInputs) {
  double p[2] = {1, 2}, g[3] = {1, 2, 3};
  EXPECT_THROW(AdamW(ctx, {{"w", Tensor(p, DType::F64, {2}), Tensor(g, DType::F64, {3})}}, AdamWOptions{}),
               Error);
  AdamWOptions o;
  o.beta2 = 1.0;
  EXPECT_THROW(AdamW(ctx, {{"w", Tensor(p, DType::F64, {2}), Tensor(g, DType::F64, {2})}}, o), Error);
  o = AdamWOptions{};
  o.state_dtype = DType::BF16;
  EXPECT_THROW(AdamW(ctx, {{"w", Tensor(p, DType::F64, {2}), Tensor(g, DType::F64, {2})}}, o), Error);
  AdamW ok(ctx, {{"w", Tensor(p, DType::F64, {2}), Tensor(g, DType::F64, {2})}}, AdamWOptions{});
  EXPECT_THROW(ok.step(std::nan("")), Error);
}

}  // namespace
}  // namespace lt::train
