// The CPU reference ops (float and double): the same signatures as ops.h, in namespace lt::ops::cpu.
// The public functions in ops/<op>.cpp check devices and shapes, then call these; each dispatches on the
// dtype of its main tensor and refuses any other tensor whose dtype differs.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/quant4.h"

namespace lt::ops::cpu {

void embedding_forward(const EmbeddingParams& p, Tensor out, Tensor ids, Tensor table);
void embedding_backward(const EmbeddingParams& p, Tensor dtable, Tensor dout, Tensor ids);

void rmsnorm_forward(const RmsNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w);
void rmsnorm_backward(const RmsNormParams& p, Tensor dx, Tensor dw, Tensor dy, Tensor x, Tensor w,
                      Tensor rstd);

void linear_forward(const LinearParams& p, Tensor y, Tensor x, Tensor w, Tensor bias, Tensor residual);
void linear_backward(const LinearParams& p, Tensor dx, Tensor dw, Tensor dbias, Tensor dy, Tensor x,
                     Tensor w);

void rope_forward(const RopeParams& p, Tensor x, Tensor positions);
void rope_backward(const RopeParams& p, Tensor dx, Tensor positions);

void layernorm_forward(const LayerNormParams& p, Tensor y, Tensor rstd, Tensor x, Tensor w, Tensor b);
void layernorm_backward(const LayerNormParams& p, Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x,
                        Tensor w, Tensor rstd);
void bloom_gelu_forward(const BloomGeluParams& p, Tensor h, Tensor x);
void bloom_gelu_backward(const BloomGeluParams& p, Tensor dx, Tensor dh, Tensor x);
void swiglu_forward(const SwigluParams& p, Tensor h, Tensor gate, Tensor up);
void swiglu_backward(const SwigluParams& p, Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up);

void geglu_forward(const GegluParams& p, Tensor h, Tensor gate, Tensor up);
void geglu_backward(const GegluParams& p, Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up);

void add_inplace(Tensor y, Tensor x);

void logit_softcap_forward(const LogitSoftcapParams& p, Tensor logits);

double cross_entropy_forward(const CrossEntropyParams& p, Tensor losses, Tensor lse, Tensor logits,
                             Tensor labels);
void cross_entropy_backward(const CrossEntropyParams& p, Tensor dlogits, Tensor logits, Tensor lse,
                            Tensor labels);

double fused_linear_cross_entropy_forward(const FusedLinearCrossEntropyParams& p, Tensor losses, Tensor lse,
                                          Tensor x, Tensor w, Tensor labels);
// forward then backward: the CPU reference recomputes the logits in backward anyway.
double fused_linear_cross_entropy_forward_backward(const FusedLinearCrossEntropyParams& p, Tensor losses,
                                                   Tensor lse, Tensor dx, Tensor dw, Tensor x, Tensor w,
                                                   Tensor labels);
void fused_linear_cross_entropy_backward(const FusedLinearCrossEntropyParams& p, Tensor dx, Tensor dw,
                                         Tensor x, Tensor w, Tensor lse, Tensor labels);

void dropout_apply(const DropoutParams& p, Tensor x, const std::vector<uint64_t>& streams);

void cast(Tensor dst, Tensor src);
void init_normal(Tensor out, uint64_t seed, uint64_t stream, double stddev);

void adamw_step(const AdamWParams& p, Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq,
                Tensor param_copy);
double grad_norm_squared(Tensor grad);
std::vector<double> grad_norms_squared(std::span<const Tensor> grads);

void quantize_4bit(Tensor x, Quant4Type type, Tensor packed, Tensor absmax);
void dequantize_4bit(Tensor packed, Tensor absmax, Quant4Type type, Tensor out);
void dequantize_absmax(Tensor q, Tensor nested_absmax, Tensor map, float offset, Tensor absmax);

}  // namespace lt::ops::cpu
