// Whole-model parity with Hugging Face transformers: tiny Llama / Qwen2 / Mistral checkpoints and their
// float64 logits, loss and every parameter gradient on one padded batch (tools/make_golden_models.py), and
// the real stories260K model's loss on a sentence. Lives with the io tests because it loads HF checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/hf_layout.h"
#include "model/weights.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

// A golden tensor as doubles (from F64) or ints (from I64).
std::vector<double> golden_doubles(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsEntry* e = file.find(name);
  EXPECT_NE(e, nullptr) << name;
  if (!e) return {};
  EXPECT_EQ(e->dtype, io::StDType::F64) << name;
  std::vector<double> v(size_t(e->numel()));
  std::memcpy(v.data(), e->data, v.size() * sizeof(double));
  return v;
}

std::vector<int32_t> golden_ints(const io::SafetensorsFile& file, const std::string& name) {
  const io::SafetensorsEntry* e = file.find(name);
  EXPECT_NE(e, nullptr) << name;
  if (!e) return {};
  EXPECT_EQ(e->dtype, io::StDType::I64) << name;
  std::vector<int32_t> v(size_t(e->numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x;
    std::memcpy(&x, e->data + i * sizeof(int64_t), sizeof(int64_t));
    v[i] = int32_t(x);
  }
  return v;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  convert_elements(v.data(), DType::F64, t.data, t.dtype, v.size());
  return v;
}

// Normwise: max |a - b| / max |b|.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  return test::max_rel_diff(got, want);
}

struct ParityResult {
  double loss = 0, logits = 0, worst_grad = 0;
  std::string worst_grad_name;
};

ParityResult run_parity(const std::string& name, DType dtype) {
  const std::string dir = test::source_path("tests/model/golden/" + name);
  model::ModelConfig config = model::load_model_config(dir);
  Arena weight_arena("weights", HostMemory::instance(),
                     model::weights_bytes(config, dtype) + model::grads_bytes(config, dtype));
  model::ModelWeights weights = model::allocate_weights(config, dtype, weight_arena);
  io::load_hf_weights(dir, config, weights);
  model::ModelWeights grads = model::allocate_grads(ctx, config, dtype, weight_arena);

  auto golden = io::SafetensorsFile::open(dir + "/golden.safetensors");
  std::vector<int32_t> ids = golden_ints(*golden, "input_ids");
  std::vector<int32_t> mask = golden_ints(*golden, "attention_mask");
  std::vector<int32_t> labels = golden_ints(*golden, "labels");
  const io::SafetensorsEntry* ids_entry = golden->find("input_ids");
  const int64_t B = ids_entry->shape[0], T = ids_entry->shape[1], V = config.vocab_size;
  std::vector<int32_t> positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i)
    positions[size_t(i)] = int32_t(i % T);  // HF's default with right padding

  model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                     .positions = Tensor(positions.data(), DType::I32, {B, T}),
                     .segments = Tensor(),
                     .labels = Tensor(labels.data(), DType::I32, {B, T})};
  Arena act_arena("activations", HostMemory::instance(),
                  model::Decoder::arena_bytes(config, dtype, B, T, {}, model::DecoderOptions::plain_head()));
  model::Decoder decoder(ctx, config, dtype, B, T, act_arena, {}, model::DecoderOptions::plain_head());
  const double loss = decoder.forward(weights, batch, model::count_label_tokens(batch));

  ParityResult r;
  const double want_loss = golden_doubles(*golden, "loss").at(0);
  r.loss = std::abs(loss - want_loss) / std::abs(want_loss);

  // Logits of real (attention_mask 1) positions: padded queries see padded keys here, not in HF.
  std::vector<double> got_logits = to_doubles(decoder.logits()),
                      want_logits = golden_doubles(*golden, "logits");
  std::vector<double> got_real, want_real;
  for (int64_t i = 0; i < B * T; ++i) {
    if (!mask[size_t(i)]) continue;
    got_real.insert(got_real.end(), got_logits.begin() + i * V, got_logits.begin() + (i + 1) * V);
    want_real.insert(want_real.end(), want_logits.begin() + i * V, want_logits.begin() + (i + 1) * V);
  }
  r.logits = rel_error(got_real, want_real);

  decoder.backward(weights, grads);
  size_t compared = 0;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    std::vector<double> want = golden_doubles(*golden, "grad." + spec.hf_name);
    std::vector<double> got = to_doubles(model::weight_of(grads, spec));
    if (model::has_hf_row_order(config, spec)) {  // BLOOM's query_key_value: rows in the checkpoint's order
      Tensor view = model::weight_of(grads, spec);
      view.data = got.data();
      view.dtype = DType::F64;
      model::qkv_rows_to_hf(config, view);
    }
    double e = rel_error(got, want);
    if (e > r.worst_grad || compared == 0) {
      r.worst_grad = e;
      r.worst_grad_name = spec.hf_name;
    }
    ++compared;
  }
  size_t golden_grads = 0;
  for (const io::SafetensorsEntry& e : golden->entries()) golden_grads += e.name.rfind("grad.", 0) == 0;
  EXPECT_EQ(compared, golden_grads) << "every HF parameter has a gradient here";
  return r;
}

void expect_parity(const std::string& name, DType dtype, double tolerance) {
  ParityResult r = run_parity(name, dtype);
  EXPECT_LE(r.loss, tolerance) << name << " loss";
  EXPECT_LE(r.logits, tolerance) << name << " logits";
  EXPECT_LE(r.worst_grad, tolerance) << name << " gradient " << r.worst_grad_name;
  std::printf("[parity] %s %s: loss %.2e logits %.2e worst gradient %.2e (%s)\n", name.c_str(),
              std::string(dtype_name(dtype)).c_str(), r.loss, r.logits, r.worst_grad,
              r.worst_grad_name.c_str());
}

TEST(ModelGolden, LlamaFloat64) {
  expect_parity("llama", DType::F64, 1e-9);
}
TEST(ModelGolden, LlamaFloat32) {
  expect_parity("llama", DType::F32, 1e-4);
}
TEST(ModelGolden, Qwen2Float64) {
  expect_parity("qwen2", DType::F64, 1e-9);
}
TEST(ModelGolden, Qwen2Float32) {
  expect_parity("qwen2", DType::F32, 1e-4);
}
TEST(ModelGolden, MistralFloat64) {
  expect_parity("mistral", DType::F64, 1e-9);
}
TEST(ModelGolden, MistralFloat32) {
  expect_parity("mistral", DType::F32, 1e-4);
}
TEST(ModelGolden, Qwen3Float64) {
  expect_parity("qwen3", DType::F64, 1e-12);
}
TEST(ModelGolden, Qwen3Float32) {
  expect_parity("qwen3", DType::F32, 1e-5);
}
TEST(ModelGolden, Phi3FusedPartialRotaryFloat64) {
  expect_parity("phi3", DType::F64, 1e-12);
}
TEST(ModelGolden, Phi3FusedPartialRotaryFloat32) {
  expect_parity("phi3", DType::F32, 1e-5);
}
// Phi-3 LongRoPE with partial rotary (tools/make_phi3_golden.py): original_max_position_embeddings 8, which
// the batch's largest position + 1 (10) passes: transformers takes long_factor for the whole batch; with 10
// it does not (10 is not past 10): short_factor. cos/sin carry the attention factor either way.
TEST(ModelGolden, Phi3LongropeLongFactorsFloat64) {
  expect_parity("phi3_longrope", DType::F64, 1e-12);
}
TEST(ModelGolden, Phi3LongropeShortFactorsFloat64) {
  expect_parity("phi3_longrope_short", DType::F64, 1e-12);
}
TEST(ModelGolden, Phi3LongropeFloat32) {
  expect_parity("phi3_longrope", DType::F32, 1e-5);
}
TEST(ModelGolden, Phi3LongropeConfigReadsBothFactorSets) {
  for (const char* name : {"phi3_longrope", "phi3_longrope_short"}) {
    const model::ModelConfig c =
        model::load_model_config(test::source_path("tests/model/golden/" + std::string(name)));
    EXPECT_EQ(c.rope_type, ops::RopeType::LongRope) << name;
    EXPECT_EQ(c.block.rotary_dim, 4) << name;
    EXPECT_EQ(c.rope_short_factor, (std::vector<double>{1.0, 1.25})) << name;
    EXPECT_EQ(c.rope_long_factor, (std::vector<double>{3.0, 7.5})) << name;
  }
}
// Gemma 2 (tools/make_gemma2_golden.py): (1 + w) norms, GeGLU, the embedding scale, sandwich norms,
// query_pre_attn_scalar, attention and final soft-caps, a sliding and a global layer.
TEST(ModelGolden, Gemma2Float64) {
  expect_parity("gemma2", DType::F64, 1e-12);
}
TEST(ModelGolden, Gemma2Float32) {
  expect_parity("gemma2", DType::F32, 1e-5);
}
// Gemma 3 (tools/make_gemma3_golden.py): Gemma 2's block with q_norm / k_norm and no soft-caps, a sliding
// layer with the local RoPE base and a global one with another base and linear scaling.
TEST(ModelGolden, Gemma3Float64) {
  expect_parity("gemma3", DType::F64, 1e-12);
}
TEST(ModelGolden, Gemma3Float32) {
  expect_parity("gemma3", DType::F32, 1e-5);
}

// BLOOM: ALiBi with 3 heads (slopes of a head count that is not a power of two), LayerNorm with bias (and the
// embedding LayerNorm), BLOOM's GELU MLP, the per-head interleaved query_key_value, biases, a tied head.
TEST(ModelGolden, BloomFloat64) {
  expect_parity("bloom", DType::F64, 1e-12);
}
TEST(ModelGolden, BloomFloat32) {
  expect_parity("bloom", DType::F32, 1e-5);
}

// The golden configs are what the tests claim: llama3 scaling, biases + tying, a window shorter than T.
TEST(ModelGolden, ConfigsExerciseTheFeatures) {
  model::ModelConfig llama = model::load_model_config(test::source_path("tests/model/golden/llama"));
  EXPECT_EQ(llama.rope_type, ops::RopeType::Llama3);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_NE(llama.num_heads * llama.head_dim, llama.hidden_size);
  EXPECT_LT(llama.num_kv_heads, llama.num_heads);
  model::ModelConfig qwen = model::load_model_config(test::source_path("tests/model/golden/qwen2"));
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.o_bias);
  EXPECT_TRUE(qwen.tie_word_embeddings);
  // Qwen3: per-head q/k norms, GQA with H * HD != D, tied embeddings, a window on layer 1 only.
  model::ModelConfig qwen3 = model::load_model_config(test::source_path("tests/model/golden/qwen3"));
  EXPECT_TRUE(qwen3.block.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
  EXPECT_NE(qwen3.num_heads * qwen3.head_dim, qwen3.hidden_size);
  EXPECT_LT(qwen3.num_kv_heads, qwen3.num_heads);
  EXPECT_EQ(qwen3.window_for_layer(0), 0);
  EXPECT_EQ(qwen3.window_for_layer(1), 4);
  // Phi-3: fused qkv_proj / gate_up_proj (the weight table holds them under their HF names), 4 of the 8
  // dims of each head rotate, a window of 4 on every layer.
  model::ModelConfig phi3 = model::load_model_config(test::source_path("tests/model/golden/phi3"));
  EXPECT_TRUE(phi3.block.fused_qkv && phi3.block.fused_gate_up);
  EXPECT_EQ(phi3.block.rotary_dim, 4);
  EXPECT_EQ(phi3.head_dim, 8);
  EXPECT_LT(phi3.num_kv_heads, phi3.num_heads);
  for (int64_t l = 0; l < phi3.num_layers; ++l) EXPECT_EQ(phi3.window_for_layer(l), 4);
  size_t fused = 0;
  for (const model::WeightSpec& spec : model::weight_specs(phi3)) {
    fused += spec.kind == model::WeightKind::AttnQkv || spec.kind == model::WeightKind::FfnGateUp;
    EXPECT_EQ(spec.hf_name.find("q_proj."), std::string::npos) << spec.hf_name;
    EXPECT_EQ(spec.hf_name.find("gate_proj."), std::string::npos) << spec.hf_name;
  }
  EXPECT_EQ(fused, size_t(2 * phi3.num_layers));
  model::ModelConfig mistral = model::load_model_config(test::source_path("tests/model/golden/mistral"));
  auto golden = io::SafetensorsFile::open(test::source_path("tests/model/golden/mistral/golden.safetensors"));
  const int64_t T = golden->find("input_ids")->shape[1];
  for (int64_t l = 0; l < mistral.num_layers; ++l) {
    EXPECT_GT(mistral.window_for_layer(l), 0);
    EXPECT_LT(mistral.window_for_layer(l), T);
  }
}

// The real pretrained model from ../shared: transformers' float32 loss on a tokenized sentence.
TEST(ModelGolden, Stories260KLoss) {
  LT_REQUIRE_SHARED(dir, "data/models/stories260K-hf");
  nlohmann::json golden;
  std::ifstream(test::source_path("tests/model/golden/stories260K_loss.json")) >> golden;
  std::vector<int32_t> ids = golden["input_ids"].get<std::vector<int32_t>>();
  const double hf_loss_f32 = golden["loss_float32"].get<double>();
  // The reference, as tools/make_golden_models.py recorded it from transformers 5.23 (float32 model):
  // 0.18035539984703064 nats per token on the 32 tokens of the sentence (BOS included).
  EXPECT_DOUBLE_EQ(hf_loss_f32, 0.18035539984703064);
  const double exact_loss_f64 = golden["loss_float64_exact"].get<double>();
  const int64_t T = int64_t(ids.size());
  std::vector<int32_t> positions(ids.size());
  for (int64_t t = 0; t < T; ++t) positions[size_t(t)] = int32_t(t);

  model::ModelConfig config = model::load_model_config(dir);
  for (DType dtype : {DType::F32, DType::F64}) {
    Arena arena("stories", HostMemory::instance(),
                model::weights_bytes(config, dtype) + model::Decoder::arena_bytes(config, dtype, 1, T));
    model::ModelWeights weights = model::allocate_weights(config, dtype, arena);
    io::load_hf_weights(dir, config, weights);
    model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {1, T}),
                       .positions = Tensor(positions.data(), DType::I32, {1, T}),
                       .segments = Tensor(),
                       .labels = Tensor(ids.data(), DType::I32, {1, T})};
    model::Decoder decoder(ctx, config, dtype, 1, T, arena);
    const double loss = decoder.forward(weights, batch, model::count_label_tokens(batch));
    EXPECT_LT(loss, 1.5) << "nats per token";
    if (dtype == DType::F32) {
      EXPECT_NEAR(loss, hf_loss_f32, 1e-5 * hf_loss_f32) << "transformers' float32 loss";
    } else {
      EXPECT_NEAR(loss, exact_loss_f64, 1e-10 * exact_loss_f64) << "float64 loss";
      EXPECT_NEAR(loss, hf_loss_f32, 1e-5 * hf_loss_f32) << "transformers' float32 loss";
    }
    std::printf("[stories260K] %s loss %.10f (transformers f32 %.10f, exact f64 %.10f)\n",
                std::string(dtype_name(dtype)).c_str(), loss, hf_loss_f32, exact_loss_f64);
  }
}

}  // namespace
}  // namespace lt
