#include "model/arch/gemma_block.h"

#include <cmath>

namespace lt::model {

void read_gemma_block(const FieldReader& r, const std::string& source, const GemmaBlockChoices& choices,
                      ModelConfig& cfg) {
  const std::string act = r.string_or("hidden_activation", "gelu_pytorch_tanh");
  LT_CHECK(
      act == "gelu_pytorch_tanh",
      "{}: field 'hidden_activation' is \"{}\": only \"gelu_pytorch_tanh\" (GeGLU with the tanh GELU) is "
      "supported for {}",
      source, act, choices.family);
  LT_CHECK(!r.boolean_or("use_bidirectional_attention", false),
           "{}: field 'use_bidirectional_attention' is true: only causal attention is supported", source);
  const double query_scalar = r.number_or("query_pre_attn_scalar", 256.0);
  LT_CHECK(std::isfinite(query_scalar) && query_scalar > 0,
           "{}: field 'query_pre_attn_scalar' is {}, expected a positive number", source, query_scalar);
  cfg.block = BlockSpec{.norm = NormKind::RmsOnePlus,
                        .mlp = MlpKind::GeGlu,
                        .qk_norm = choices.qk_norm,
                        .embedding_scale = std::sqrt(double(cfg.hidden_size)),
                        .logit_softcap = choices.logit_softcap,
                        .post_norms = true,
                        .attention_softcap = choices.attention_softcap,
                        .query_pre_attn_scalar = query_scalar};
  cfg.qkv_bias = cfg.o_bias = r.boolean_or("attention_bias", false);
  cfg.mlp_bias = false;
  cfg.tie_word_embeddings = r.boolean_or("tie_word_embeddings", true);  // both config classes' default
}

}  // namespace lt::model
