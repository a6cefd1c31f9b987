// BLOOM under every recompute policy: the same loss and bit-identical gradients as keeping everything, whole
// sequence (kept activations also offloaded) and chunked, full fine-tuning and LoRA on its four modules. The
// plain GELU MLP has no gate (no gate buffers are planned), the embedding LayerNorm keeps its rstd per token.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/arena.h"
#include "lora_test_util.h"
#include "model/chunked_decoder.h"
#include "model/decoder.h"
#include "model/random_model.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using model::Recompute;

struct Outcome {
  double loss = 0;
  std::vector<std::vector<char>> grads;
};

Outcome run(bool lora, int64_t chunk, Recompute policy, bool offload) {
  const model::ModelConfig c = model::tiny_random_config(model::Architecture::Bloom, 5);
  const int64_t B = 2, T = 9;
  Arena arena("bloom", HostMemory::instance(), size_t(64) << 20);
  model::ModelWeights w = model::allocate_weights(c, DType::F64, arena);
  model::fill_weights_uniform(c, w, 5);
  const model::TrainableFn trainable =
      lora ? model::TrainableFn([](const model::WeightSpec&) { return false; }) : model::train_all;
  model::ModelWeights g = model::allocate_grads(ctx, c, DType::F64, arena, trainable);
  const std::vector<model::LoraSpec> specs = lora ? test::tiny_lora_specs(c) : std::vector<model::LoraSpec>{};
  model::LoraWeights lw, lg;
  if (lora) {
    lw = model::allocate_lora(c, specs, DType::F64, arena);
    test::fill_lora_random(lw, 3);
    lg = model::allocate_lora(c, specs, DType::F64, arena);
    model::zero_lora(ctx, lg);
  }
  model::RandomBatch data = model::random_batch(B, T, c.vocab_size, true, 12);
  const model::Batch batch = data.batch();
  const int64_t labels = model::count_label_tokens(batch);
  Outcome o;
  if (chunk == 0) {
    model::DecoderOptions options(policy);
    Arena host("offload", HostMemory::instance(),
               std::max<size_t>(model::Decoder::offload_bytes(c, DType::F64, B, T, specs, options), 1));
    model::Decoder d(ctx, c, DType::F64, B, T, arena, specs, options, offload ? &host : nullptr);
    o.loss = d.forward(w, batch, labels, lora ? &lw : nullptr);
    d.backward(w, g, lora ? &lg : nullptr);
  } else {
    const model::ChunkedOptions options{.chunk_size = chunk, .recompute = policy};
    model::ChunkedDecoder d(ctx, c, DType::F64, B, T, options, arena, specs);
    o.loss = d.forward(w, batch, labels, lora ? &lw : nullptr);
    d.backward(w, g, lora ? &lg : nullptr);
  }
  if (lora) {
    for (const model::LoraSpec& s : specs)
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
        o.grads.push_back(test::bytes_of(lg.matrix(s, which)));
  } else {
    for (const model::WeightSpec& s : model::weight_specs(c))
      o.grads.push_back(test::bytes_of(model::weight_of(g, s)));
  }
  return o;
}

TEST(BloomRecompute, EveryPolicyGivesTheSameBits) {
  for (bool lora : {false, true})
    for (int64_t chunk : {0, 4}) {
      const Outcome ref = run(lora, chunk, Recompute::None, false);
      for (Recompute p :
           {Recompute::None, Recompute::Full, Recompute::Selective, Recompute::Elementwise, Recompute::Norms})
        for (bool offload : {false, true}) {
          if (offload && chunk != 0) continue;
          const Outcome o = run(lora, chunk, p, offload);
          const std::string what = std::string(model::recompute_name(p)) + (offload ? "+offload" : "") +
                                   " lora=" + std::to_string(lora) + " chunk=" + std::to_string(chunk);
          EXPECT_EQ(o.loss, ref.loss) << what;
          ASSERT_EQ(o.grads.size(), ref.grads.size()) << what;
          for (size_t i = 0; i < ref.grads.size(); ++i)
            EXPECT_EQ(o.grads[i], ref.grads[i]) << what << " " << i;
        }
    }
}

}  // namespace
}  // namespace lt
