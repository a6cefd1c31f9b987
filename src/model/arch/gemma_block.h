// The block Gemma 2 and Gemma 3 share (gemma2.cpp, gemma3.cpp): RMSNorm multiplying by (1 + w), GeGLU with
// the tanh GELU, the embeddings scaled by sqrt(hidden_size), sandwich post-norms, scores scaled by
// query_pre_attn_scalar^-0.5, optional attention biases, no MLP biases, tied embeddings by default; the
// families differ in q/k norms and in their soft-capping defaults, which the caller passes.
#pragma once

#include <string>
#include <string_view>

#include "model/arch/architecture.h"

namespace lt::model {

struct GemmaBlockChoices {
  std::string_view family;         // "Gemma 2", in messages
  bool qk_norm = false;            // Gemma 3's per-head q_norm / k_norm
  double logit_softcap = 0.0;      // final_logit_softcapping as read (0: none)
  double attention_softcap = 0.0;  // attn_logit_softcapping as read (0: none)
};

// Reads hidden_activation, use_bidirectional_attention, query_pre_attn_scalar, attention_bias and
// tie_word_embeddings into cfg (block, biases, tied head), refusing what the block cannot compute by field.
void read_gemma_block(const FieldReader& r, const std::string& source, const GemmaBlockChoices& choices,
                      ModelConfig& cfg);

}  // namespace lt::model
