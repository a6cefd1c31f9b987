// LoRA in the model: module names and shapes, PEFT's initialization, merged == unmerged (loss and logits),
// dropout masks (reproducible from the stream, mean 1 - p, the same whether a sequence runs whole or in
// chunks, absent in evaluation), and the decoder's checks of the adapters it is given.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "lora_test_util.h"
#include "model/arch/architecture.h"
#include "model/lora_layer.h"
#include "model/lora_merge.h"
#include "model/random_model.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using test::values;

TEST(LoraSpecs, NamesShapesAndScaling) {
  const model::ModelConfig c = test::tiny_config(false);  // D 8, F 12, H*HD 24, KVH*HD 12
  std::vector<model::LoraSpec> specs =
      model::lora_specs(c, [](const std::string& path) -> std::optional<model::LoraModuleSetting> {
        if (path.ends_with("q_proj")) return model::LoraModuleSetting{.rank = 4, .alpha = 8};
        if (path.ends_with("down_proj"))
          return model::LoraModuleSetting{.rank = 4, .alpha = 8, .use_rslora = true};
        return std::nullopt;
      });
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].module_path, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(specs[0].in, 8);
  EXPECT_EQ(specs[0].out, 24);
  EXPECT_DOUBLE_EQ(specs[0].scaling, 2.0);  // alpha / r
  EXPECT_EQ(specs[1].module_path, "model.layers.0.mlp.down_proj");
  EXPECT_EQ(specs[1].in, 12);
  EXPECT_EQ(specs[1].out, 8);
  EXPECT_DOUBLE_EQ(specs[1].scaling, 4.0);  // alpha / sqrt(r)
  EXPECT_EQ(specs[3].layer, 1);
  EXPECT_EQ(model::lora_tensor_name(specs[0], model::LoraMatrix::A),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(model::lora_tensor_name(specs[1], model::LoraMatrix::B),
            "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  for (int i = 0; i < model::kLoraModuleCount; ++i) {
    const auto m = model::LoraModule(i);
    EXPECT_EQ(model::lora_module_from_name(model::lora_module_name(m)), m);
  }
  EXPECT_EQ(model::lora_out_features(c, model::LoraModule::K), 12);
  EXPECT_EQ(model::lora_in_features(c, model::LoraModule::O), 24);
  EXPECT_FALSE(model::lora_module_from_name("lm_head").has_value());

  EXPECT_THROW(
      model::lora_specs(c, [](const std::string&) { return std::optional<model::LoraModuleSetting>(); }),
      Error);
  EXPECT_THROW(model::lora_specs(c,
                                 [](const std::string&) {
                                   return std::optional<model::LoraModuleSetting>({.rank = 0, .alpha = 1});
                                 }),
               Error);
}

// PEFT's reset_lora_parameters: A ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B = 0.
TEST(LoraInit, PeftDefaultGaussianAndNoInit) {
  model::ModelConfig c = test::tiny_config(false);
  c.intermediate_size = 600;  // down_proj's A has 16 x 600 values: enough for the moments
  std::vector<model::LoraSpec> specs = model::lora_specs(c, [](const std::string& path) {
    return path.ends_with("down_proj") ? std::optional<model::LoraModuleSetting>({.rank = 16, .alpha = 32})
                                       : std::nullopt;
  });
  Arena arena("init", HostMemory::instance(), 3 * model::lora_bytes(specs, DType::F64));
  model::LoraWeights w = model::allocate_lora(c, specs, DType::F64, arena);
  model::LoraWeights again = model::allocate_lora(c, specs, DType::F64, arena);
  const model::LoraSpec& s = specs[0];

  model::init_lora(w, model::LoraInit::Default, 5);
  std::vector<double> a = values(w.matrix(s, model::LoraMatrix::A));
  const double bound = 1.0 / std::sqrt(600.0);
  double sum2 = 0, top = 0;
  for (double x : a) sum2 += x * x, top = std::max(top, std::abs(x));
  EXPECT_LE(top, bound);
  EXPECT_GT(top, 0.99 * bound);
  EXPECT_NEAR(std::sqrt(sum2 / double(a.size())), bound / std::sqrt(3.0), 0.03 * bound);  // U's std
  for (double x : values(w.matrix(s, model::LoraMatrix::B))) ASSERT_EQ(x, 0.0);
  model::init_lora(again, model::LoraInit::Default, 5);
  EXPECT_EQ(values(again.matrix(s, model::LoraMatrix::A)), a) << "same seed, same values";
  model::init_lora(again, model::LoraInit::Default, 6);
  EXPECT_NE(values(again.matrix(s, model::LoraMatrix::A)), a);
  EXPECT_NE(values(w.layers[0][model::LoraModule::Down].a), values(w.layers[1][model::LoraModule::Down].a))
      << "each adapter has its own stream";

  model::init_lora(w, model::LoraInit::Gaussian, 5);
  sum2 = 0;
  for (double x : values(w.matrix(s, model::LoraMatrix::A))) sum2 += x * x;
  EXPECT_NEAR(std::sqrt(sum2 / double(a.size())), 1.0 / 16, 0.05 / 16);  // std 1/r

  model::init_lora(w, model::LoraInit::NoInit, 5);
  std::vector<double> b = values(w.matrix(s, model::LoraMatrix::B));
  top = 0;
  for (double x : b) top = std::max(top, std::abs(x));
  EXPECT_GT(top, 0.5 * 0.25);
  EXPECT_LE(top, 0.25);  // nn.Linear(r, out)'s bound 1/sqrt(16)
  EXPECT_EQ(model::lora_init_from_name("gaussian"), model::LoraInit::Gaussian);
  EXPECT_FALSE(model::lora_init_from_name("pissa").has_value());
}

// A model with adapters equals the model whose weights have them merged in (float64); fused: Phi-3's
// qkv_proj / gate_up_proj adapters merge into the fused weights.
void check_merge(bool fused) {
  test::TinyLoraModel m(DType::F64, false, 17, test::TinyBatch::B, test::TinyBatch::T, 0, false, fused);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  const double with_adapters = m.decoder->forward(m.weights, batch, n, &m.lora);
  const std::vector<double> logits = values(m.decoder->logits());
  const double base_only = m.decoder->forward(m.weights, batch, n);
  EXPECT_GT(std::abs(with_adapters - base_only), 1e-3) << "the adapters must change the model";

  model::merge_lora(ctx, m.config, m.weights, m.lora);
  const double merged = m.decoder->forward(m.weights, batch, n);
  const std::vector<double> merged_logits = values(m.decoder->logits());
  EXPECT_NEAR(merged, with_adapters, 1e-12 * std::abs(with_adapters));
  EXPECT_LE(test::max_rel_diff(merged_logits, logits), 1e-12);
  std::printf("[lora merge] fused=%d loss with adapters %.15f, merged %.15f, logits rel diff %.2e\n", fused,
              with_adapters, merged, test::max_rel_diff(merged_logits, logits));
}

TEST(LoraMerge, MergedEqualsUnmerged) {
  check_merge(false);
}
TEST(LoraMerge, FusedModulesMergedEqualsUnmerged) {
  check_merge(true);
}

// Zero B (PEFT's init) leaves the model unchanged.
TEST(LoraMerge, FreshAdaptersChangeNothing) {
  test::TinyLoraModel m(DType::F64, false, 18);
  model::init_lora(m.lora, model::LoraInit::Default, 1);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  EXPECT_EQ(m.decoder->forward(m.weights, batch, n, &m.lora), m.decoder->forward(m.weights, batch, n));
}

TEST(LoraDropout, MaskIsReproducibleWithMeanOneMinusP) {
  const model::LoraDropout d{.p = 0.1, .seed = 42, .step = 7, .micro_batch = 2};
  const uint64_t stream = model::lora_dropout_stream(d, 3, model::LoraModule::V, 1);
  EXPECT_EQ(stream, model::lora_dropout_stream(d, 3, model::LoraModule::V, 1));
  std::set<uint64_t> streams;
  for (int64_t step : {7, 8})
    for (int64_t mb : {2, 3})
      for (int64_t layer : {3, 4})
        for (model::LoraModule m : {model::LoraModule::V, model::LoraModule::Q})
          for (int64_t row : {0, 1})
            streams.insert(model::lora_dropout_stream({.p = 0.1, .seed = 42, .step = step, .micro_batch = mb},
                                                      layer, m, row));
  EXPECT_EQ(streams.size(), 32u) << "each (step, micro-batch, layer, module, row) has its own stream";

  const int n = 200000;
  int kept = 0, same = 0;
  const uint64_t other = model::lora_dropout_stream({.p = 0.1, .seed = 42, .step = 8, .micro_batch = 2}, 3,
                                                    model::LoraModule::V, 1);
  for (int i = 0; i < n; ++i) {
    const bool k = model::lora_dropout_keeps(d, stream, uint64_t(i));
    EXPECT_EQ(k, model::lora_dropout_keeps(d, stream, uint64_t(i)));
    kept += k;
    same += k == model::lora_dropout_keeps(d, other, uint64_t(i));
  }
  const double mean = double(kept) / n;
  EXPECT_NEAR(mean, 0.9, 4 * std::sqrt(0.09 / n));  // 4 sigma
  EXPECT_NEAR(double(same) / n, 0.9 * 0.9 + 0.1 * 0.1, 0.01) << "another step draws an independent mask";
}

// Dropout in the decoder: the same (seed, step, micro-batch) gives the same loss, another step another one,
// and p = 0 (evaluation) is the plain adapter forward.
TEST(LoraDropout, DecoderLossDependsOnlyOnTheStream) {
  test::TinyLoraModel m(DType::F64, false, 19);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  const model::LoraDropout d{.p = 0.25, .seed = 3, .step = 10, .micro_batch = 0};
  const double a = m.decoder->forward(m.weights, batch, n, &m.lora, d);
  const double b = m.decoder->forward(m.weights, batch, n, &m.lora, d);
  EXPECT_EQ(a, b);
  const double other = m.decoder->forward(m.weights, batch, n, &m.lora, {.p = 0.25, .seed = 3, .step = 11});
  EXPECT_NE(a, other);
  const double eval = m.decoder->forward(m.weights, batch, n, &m.lora, {.p = 0, .seed = 3, .step = 10});
  EXPECT_NE(a, eval);
  EXPECT_EQ(eval, m.decoder->forward(m.weights, batch, n, &m.lora));
  EXPECT_THROW(m.decoder->forward(m.weights, batch, n, &m.lora, {.p = 1.0}), Error);
}

// One projection's adapter over a whole row equals the same rows run as two chunks at their q_offsets:
// the dropout mask follows the token's position, not the chunking.
TEST(LoraDropout, ChunkedEqualsWhole) {
  const model::ModelConfig c = test::tiny_config(false);
  const int64_t B = 2, T = 7, C1 = 3, in = c.hidden_size, out = c.q_dim(), r = 3;
  std::vector<model::LoraSpec> specs = model::lora_specs(c, [](const std::string& p) {
    return p.ends_with("q_proj") ? std::optional<model::LoraModuleSetting>({.rank = 3, .alpha = 6})
                                 : std::nullopt;
  });
  Arena arena("chunks", HostMemory::instance(), size_t(1) << 20);
  model::LoraWeights lora = model::allocate_lora(c, specs, DType::F64, arena);
  test::fill_lora_random(lora, 4);
  std::vector<double> x = test::random_values(size_t(B * T * in), 8);  // (B, T, in)
  std::vector<double> scratch(size_t(B * T * in)), t(size_t(B * T * r));
  auto run = [&](int64_t q_offset, int64_t C, const std::vector<double>& xs) {
    std::vector<double> y(size_t(B * C * out), 0.5), xc = xs;
    model::LoraPass pass;
    pass.weights = &lora.layers[1];
    pass.dropout = {.p = 0.4, .seed = 9, .step = 2, .micro_batch = 1};
    pass.scratch_in = Tensor(scratch.data(), DType::F64, {B * C, in});
    model::ChunkInfo chunk;
    chunk.batch = B;
    chunk.tokens = C;
    chunk.q_offset = q_offset;
    model::lora_forward(ctx, pass, 1, model::LoraModule::Q, chunk, Tensor(xc.data(), DType::F64, {B * C, in}),
                        Tensor(t.data(), DType::F64, {B * C, r}), Tensor(y.data(), DType::F64, {B * C, out}));
    return y;
  };
  auto rows = [&](const std::vector<double>& full, int64_t W, int64_t off, int64_t C) {
    std::vector<double> o;
    for (int64_t b = 0; b < B; ++b)
      o.insert(o.end(), full.begin() + (b * T + off) * W, full.begin() + (b * T + off + C) * W);
    return o;
  };
  const std::vector<double> whole = run(0, T, x);
  const std::vector<double> first = run(0, C1, rows(x, in, 0, C1));
  const std::vector<double> second = run(C1, T - C1, rows(x, in, C1, T - C1));
  // Equal within float64 rounding, not bit for bit: the chunks reach OpenBLAS as GEMMs of B*C rows instead of
  // B*T, and OpenBLAS picks its kernel (and the order of a row's sums) by the CPU and the matrix size. A mask
  // that followed the chunking would differ by O(1) (p = 0.4), far above 1e-12.
  EXPECT_LE(test::max_rel_diff(first, rows(whole, out, 0, C1)), 1e-12);
  EXPECT_LE(test::max_rel_diff(second, rows(whole, out, C1, T - C1)), 1e-12);
  // The adapter really dropped something: without dropout the output differs.
  std::vector<double> y(size_t(B * T * out), 0.5), xc = x;
  model::LoraPass no_dropout;
  no_dropout.weights = &lora.layers[1];
  model::ChunkInfo whole_row;
  whole_row.batch = B;
  whole_row.tokens = T;
  model::lora_forward(ctx, no_dropout, 1, model::LoraModule::Q, whole_row,
                      Tensor(xc.data(), DType::F64, {B * T, in}), Tensor(t.data(), DType::F64, {B * T, r}),
                      Tensor(y.data(), DType::F64, {B * T, out}));
  EXPECT_NE(y, whole);
}

TEST(LoraDecoder, RefusesAdaptersItWasNotPlannedFor) {
  test::TinyLoraModel m(DType::F64, false, 20);
  test::TinyBatch data;
  model::Batch batch = data.batch();
  const int64_t n = model::count_label_tokens(batch);
  // A decoder planned without LoRA refuses adapters; one planned for them refuses others.
  Arena arena("plain", HostMemory::instance(), model::Decoder::arena_bytes(m.config, DType::F64, 2, 7));
  model::Decoder plain(ctx, m.config, DType::F64, 2, 7, arena);
  EXPECT_THROW(plain.forward(m.weights, batch, n, &m.lora), Error);
  std::vector<model::LoraSpec> fewer(m.specs.begin(), m.specs.end() - 1);
  Arena arena2("fewer", HostMemory::instance(), model::lora_bytes(fewer, DType::F64));
  model::LoraWeights other = model::allocate_lora(m.config, fewer, DType::F64, arena2);
  EXPECT_THROW(m.decoder->forward(m.weights, batch, n, &other), Error);
  // Gradients for adapters after a forward without them.
  m.decoder->forward(m.weights, batch, n);
  EXPECT_THROW(m.decoder->backward(m.weights, m.grads, &m.lora_grads), Error);
}

}  // namespace
}  // namespace lt

namespace lt::model {
namespace {

// An adapter's module path is its base projection's weight name without ".weight", for every registered
// architecture (the names come from the architecture's file), and its features are that weight's shape.
TEST(LoraSpecs, ModulePathsAreTheArchitecturesProjectionNames) {
  for (const ArchitectureDef* def : architectures()) {
    SCOPED_TRACE(def->class_name);
    // BLOOM's block is its own (fused query_key_value, no gate): its tiny config; the others share Llama's.
    ModelConfig c = def->arch == Architecture::Bloom ? tiny_random_config(Architecture::Bloom, 1)
                                                     : test::tiny_config(false);
    c.arch = def->arch;
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const WeightSpec& w : weight_specs(c)) shapes[w.hf_name] = w.shape;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int i = 0; i < kLoraModuleCount; ++i) {
        const LoraModule m = LoraModule(i);
        const std::vector<LoraModule> parts = lora_module_parts(c, m);
        if (parts.empty()) continue;  // a later part of a fused module, or a projection the block lacks
        const std::string weight = lora_module_path(c, l, m) + ".weight";
        ASSERT_TRUE(shapes.count(weight)) << weight;
        EXPECT_EQ(shapes[weight], (std::vector<int64_t>{lora_out_features(c, m), lora_in_features(c, m)}))
            << weight;
        const char* name = parts.size() > 1 ? def->names->qkv : def->names->proj[m];
        EXPECT_TRUE(weight.find(std::string(name)) != std::string::npos) << weight;
      }
  }
}

}  // namespace
}  // namespace lt::model
