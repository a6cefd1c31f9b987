// The CPU AdamW step (ops.h), following the order of operations of PyTorch's single-tensor CPU path: each
// line below is one PyTorch op rounded to the compute type C before the next, with lerp and addcmul fused
// into FMAs as PyTorch's AVX2/AVX-512 kernels do, so float32 runs are bit-identical to torch on CPU.
// C is double when the parameter or the state is f64, float otherwise (PyTorch's opmath for f32/bf16).
#include <cmath>
#include <type_traits>

#include "core/dtype_visit.h"
#include "ops/adamw_math.h"
#include "ops/cpu/cpu_ops.h"

namespace lt::ops::cpu {
namespace {

template <class T, class C>
T store(C x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_bf16(float(x));
  } else if constexpr (std::is_same_v<T, fp16>) {
    return to_fp16(float(x));
  } else {
    return T(x);
  }
}

// PyTorch's vectorized CPU lerp: one fused multiply-add, anchored at whichever end the weight is nearer.
template <class C>
C lerp(C self, C end, C weight) {
  return std::abs(weight) < C(0.5) ? std::fma(weight, end - self, self)
                                   : std::fma(weight - C(1), end - self, end);
}

template <class P, class G, class S, class C>
void update(const AdamWParams& prm, P* param, const G* grad, S* m_state, S* v_state) {
  const AdamWScalars s = adamw_scalars(prm.lr, prm.beta1, prm.beta2, prm.eps, prm.weight_decay, prm.step);
  const C decay_factor = C(s.decay_factor), w1 = C(s.one_minus_beta1), b2 = C(s.beta2),
          w2 = C(s.one_minus_beta2), bc2_sqrt = C(s.bias_correction2_sqrt), eps = C(s.eps),
          neg_step = C(s.neg_step_size);
  const bool decay = prm.weight_decay != 0;
  const bool stochastic = prm.stochastic_rounding;
  const int64_t n = prm.count;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    C p = load_as<C>(param[i]);
    const C g = load_as<C>(grad[i]);
    if (decay) p = p * decay_factor;
    const C m = lerp(C(m_state[i]), g, w1);
    C v = C(v_state[i]) * b2;
    v = std::fma(w2 * g, g, v);
    C denom = std::sqrt(v) / bc2_sqrt;
    denom = denom + eps;
    p = p + neg_step * m / denom;
    m_state[i] = S(m);
    v_state[i] = S(v);
    if constexpr (std::is_same_v<P, bf16>) {
      param[i] = stochastic ? bf16_stochastic_round(float(p), adamw_rounding_bits(prm.seed, prm.step, i))
                            : to_bf16(float(p));
    } else {
      param[i] = store<P>(p);
    }
  }
}

}  // namespace

void adamw_step(const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq,
                Tensor param_copy) {
  LT_CHECK(exp_avg.dtype == DType::F32 || exp_avg.dtype == DType::F64,
           "adamw_step exp_avg: dtype {}, expected f32 or f64", dtype_name(exp_avg.dtype));
  if (p.count == 0) return;
  visit_floating(param.dtype, "adamw_step param", [&](auto ptag) {
    using P = typename decltype(ptag)::type;
    visit_floating(grad.dtype, "adamw_step grad", [&](auto gtag) {
      using G = typename decltype(gtag)::type;
      P* pp = static_cast<P*>(param.data);
      const G* g = static_cast<const G*>(grad.data);
      if (exp_avg.dtype == DType::F64) {
        update<P, G, double, double>(p, pp, g, static_cast<double*>(exp_avg.data),
                                     static_cast<double*>(exp_avg_sq.data));
      } else if constexpr (std::is_same_v<P, double>) {
        update<P, G, float, double>(p, pp, g, static_cast<float*>(exp_avg.data),
                                    static_cast<float*>(exp_avg_sq.data));
      } else {
        update<P, G, float, float>(p, pp, g, static_cast<float*>(exp_avg.data),
                                   static_cast<float*>(exp_avg_sq.data));
      }
    });
  });
  if (!param_copy.empty()) cast(param_copy, param);  // rounded to nearest, as ops::copy
}

}  // namespace lt::ops::cpu
