#include "model/block_spec.h"

#include <fmt/core.h>

#include <cmath>

#include "core/error.h"

namespace lt::model {

std::string_view norm_kind_name(NormKind k) {
  switch (k) {
    case NormKind::Rms:
      return "rms";
    case NormKind::RmsOnePlus:
      return "rms(1+w)";
    case NormKind::LayerNormBias:
      return "layernorm+bias";
  }
  return "?";
}

std::string_view mlp_kind_name(MlpKind k) {
  switch (k) {
    case MlpKind::SwiGlu:
      return "swiglu";
    case MlpKind::GeGlu:
      return "geglu";
    case MlpKind::Gelu:
      return "gelu";
  }
  return "?";
}

std::string_view position_kind_name(PositionKind k) {
  switch (k) {
    case PositionKind::Rope:
      return "rope";
    case PositionKind::Alibi:
      return "alibi";
    case PositionKind::None:
      return "none";
  }
  return "?";
}

std::string_view residual_kind_name(ResidualKind k) {
  return k == ResidualKind::Sequential ? "sequential" : "parallel";
}

std::string describe_block(const BlockSpec& s) {
  std::string out = fmt::format("{} norm, {} MLP, {} positions", norm_kind_name(s.norm), mlp_kind_name(s.mlp),
                                position_kind_name(s.positions));
  if (s.positions == PositionKind::Rope && s.rotary_dim > 0)
    out += fmt::format(" (rotary_dim {})", s.rotary_dim);
  out += fmt::format(", {} residual", residual_kind_name(s.residual));
  if (s.qk_norm) out += ", per-head q/k norm";
  if (s.fused_qkv) out += ", fused qkv";
  if (s.fused_gate_up) out += ", fused gate_up";
  if (s.embedding_norm) out += ", embedding norm";
  if (s.embedding_scale != 1.0) out += fmt::format(", embedding scale {}", s.embedding_scale);
  if (s.logit_softcap != 0.0) out += fmt::format(", logit soft-cap {}", s.logit_softcap);
  if (s.post_norms) out += ", post-norms";
  if (s.attention_softcap != 0.0) out += fmt::format(", attention soft-cap {}", s.attention_softcap);
  if (s.query_pre_attn_scalar != 0.0)
    out += fmt::format(", query_pre_attn_scalar {}", s.query_pre_attn_scalar);
  return out;
}

void check_block_supported(const BlockSpec& s, int64_t head_dim, const std::string& source) {
  LT_CHECK(s.norm == NormKind::Rms || s.norm == NormKind::RmsOnePlus || s.norm == NormKind::LayerNormBias,
           "{}: {} normalization is not supported yet (supported: rms, rms(1+w), layernorm+bias)", source,
           norm_kind_name(s.norm));
  LT_CHECK(s.mlp == MlpKind::SwiGlu || s.mlp == MlpKind::GeGlu || s.mlp == MlpKind::Gelu,
           "{}: the {} MLP is not supported yet (supported: swiglu, geglu, BLOOM's gelu)", source,
           mlp_kind_name(s.mlp));
  LT_CHECK(s.positions == PositionKind::Rope || s.positions == PositionKind::Alibi,
           "{}: {} position encoding is not supported yet (supported: rope, alibi)", source,
           position_kind_name(s.positions));
  LT_CHECK(s.rotary_dim >= 0 && s.rotary_dim <= head_dim && s.rotary_dim % 2 == 0,
           "{}: rotary_dim {} of head_dim {}: expected an even number of dims of the head", source,
           s.rotary_dim, head_dim);
  LT_CHECK(!s.post_norms || s.norm != NormKind::LayerNormBias,
           "{}: post-norms with LayerNorm's bias are not supported yet (supported: the RMSNorm kinds)",
           source);
  LT_CHECK(s.residual == ResidualKind::Sequential,
           "{}: the parallel residual is not supported yet (supported: sequential)", source);
  LT_CHECK(std::isfinite(s.embedding_scale) && s.embedding_scale > 0.0,
           "{}: embedding scale {}; expected a finite number > 0", source, s.embedding_scale);
  LT_CHECK(std::isfinite(s.logit_softcap) && s.logit_softcap >= 0.0,
           "{}: final logit soft-cap {}; expected a finite number >= 0", source, s.logit_softcap);
  LT_CHECK(std::isfinite(s.attention_softcap) && s.attention_softcap >= 0.0,
           "{}: attention logit soft-cap {}; expected a finite number >= 0", source, s.attention_softcap);
  LT_CHECK(std::isfinite(s.query_pre_attn_scalar) && s.query_pre_attn_scalar >= 0.0,
           "{}: query_pre_attn_scalar {}; expected a finite number > 0", source, s.query_pre_attn_scalar);
}

}  // namespace lt::model
