// LoRA parity with PEFT: tiny Llama / Qwen2 bases with adapters saved by PeftModel.save_pretrained and the
// float64 loss and every lora_A / lora_B gradient on one padded batch (tools/make_peft_golden.py). The
// adapters are loaded from PEFT's files, so names, shapes, rank_pattern / alpha_pattern and rsLoRA scaling
// all have to agree for the numbers to match.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/decoder.h"
#include "model/hf_layout.h"
#include "model/lora.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

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

struct GoldenRun {
  double loss_error = 0, worst_grad = 0;
  std::string worst_name;
  size_t compared = 0, golden_grads = 0;
};

GoldenRun run_golden(const std::string& name, DType dtype) {
  const std::string dir = test::source_path("tests/model/golden/" + name);
  const model::ModelConfig config = model::load_model_config(dir + "/base");
  const io::LoraAdapterConfig adapter = io::read_adapter_config(dir + "/adapter");
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);

  auto golden = io::SafetensorsFile::open(dir + "/golden.safetensors");
  std::vector<int32_t> ids = golden_ints(*golden, "input_ids"), labels = golden_ints(*golden, "labels");
  const int64_t B = golden->find("input_ids")->shape[0], T = golden->find("input_ids")->shape[1];
  std::vector<int32_t> positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) positions[size_t(i)] = int32_t(i % T);  // HF's default, right padding
  model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                     .positions = Tensor(positions.data(), DType::I32, {B, T}),
                     .segments = Tensor(),
                     .labels = Tensor(labels.data(), DType::I32, {B, T})};

  const model::TrainableFn frozen = [](const model::WeightSpec&) { return false; };
  Arena arena("peft-golden", HostMemory::instance(),
              model::weights_bytes(config, dtype) + model::grads_bytes(config, dtype, frozen) +
                  2 * model::lora_bytes(specs, dtype) +
                  model::Decoder::arena_bytes(config, dtype, B, T, specs));
  model::ModelWeights weights = model::allocate_weights(config, dtype, arena);
  io::load_hf_weights(dir + "/base", config, weights);
  model::ModelWeights grads = model::allocate_grads(ctx, config, dtype, arena, frozen);
  model::LoraWeights lora = model::allocate_lora(config, specs, dtype, arena);
  io::load_peft_adapter_weights(dir + "/adapter", config, adapter, lora);
  model::LoraWeights lora_grads = model::allocate_lora(config, specs, dtype, arena);
  model::zero_lora(ctx, lora_grads);

  model::Decoder decoder(ctx, config, dtype, B, T, arena, specs);
  const double loss = decoder.forward(weights, batch, model::count_label_tokens(batch), &lora);
  decoder.backward(weights, grads, &lora_grads);

  GoldenRun r;
  const double want = golden_doubles(*golden, "loss").at(0);
  r.loss_error = std::abs(loss - want) / std::abs(want);
  for (const model::LoraTensor& t : model::lora_tensors(lora, lora_grads)) {
    std::vector<double> got = to_doubles(t.grad);
    if (model::qkv_interleaved_per_head(config) &&
        t.name.find("query_key_value.lora_B") != std::string::npos) {
      Tensor view = t.grad;  // BLOOM's fused B: rows in the adapter file's order (model/hf_layout.h)
      view.data = got.data();
      view.dtype = DType::F64;
      model::qkv_rows_to_hf(config, view);
    }
    const double e = test::max_rel_diff(got, golden_doubles(*golden, "grad." + t.name));
    if (e > r.worst_grad || r.compared == 0) r.worst_grad = e, r.worst_name = t.name;
    ++r.compared;
  }
  for (const io::SafetensorsEntry& e : golden->entries()) r.golden_grads += e.name.rfind("grad.", 0) == 0;
  return r;
}

void expect_golden(const std::string& name, DType dtype, double tolerance) {
  GoldenRun r = run_golden(name, dtype);
  EXPECT_EQ(r.compared, r.golden_grads) << "every PEFT adapter tensor has its gradient here";
  EXPECT_GT(r.compared, 0u);
  EXPECT_LE(r.loss_error, tolerance) << name << " loss";
  EXPECT_LE(r.worst_grad, tolerance) << name << " gradient of " << r.worst_name;
  std::printf("[peft parity] %s %s: loss %.2e, worst of %zu adapter gradients %.2e (%s)\n", name.c_str(),
              std::string(dtype_name(dtype)).c_str(), r.loss_error, r.compared, r.worst_grad,
              r.worst_name.c_str());
}

TEST(PeftGolden, LlamaAllModulesWithPatternsFloat64) {
  expect_golden("peft_llama", DType::F64, 1e-9);
}
TEST(PeftGolden, LlamaAllModulesWithPatternsFloat32) {
  expect_golden("peft_llama", DType::F32, 1e-4);
}
TEST(PeftGolden, Qwen2BiasesRsloraFloat64) {
  expect_golden("peft_qwen2", DType::F64, 1e-9);
}
TEST(PeftGolden, Qwen2BiasesRsloraFloat32) {
  expect_golden("peft_qwen2", DType::F32, 1e-4);
}
TEST(PeftGolden, Qwen3QkNormBiasesAllModulesFloat64) {
  expect_golden("peft_qwen3", DType::F64, 1e-12);
}
TEST(PeftGolden, Qwen3QkNormBiasesAllModulesFloat32) {
  expect_golden("peft_qwen3", DType::F32, 1e-5);
}
TEST(PeftGolden, Phi3FusedModulesFloat64) {
  expect_golden("peft_phi3", DType::F64, 1e-12);
}
TEST(PeftGolden, Phi3FusedModulesFloat32) {
  expect_golden("peft_phi3", DType::F32, 1e-5);
}
TEST(PeftGolden, Gemma2AllModulesFloat64) {
  expect_golden("peft_gemma2", DType::F64, 1e-12);
}
// Gemma's sandwich norms normalize small branch outputs (their rounding is scaled up with them) and PEFT's
// large random adapters push scores into tanh's flat part: the float64 run already differs from torch by
// ~1e-13 (~500 ulps, the conditioning of these gradients), so float32 (ulp 6e-8) gets 500 x 6e-8 = 3e-5.
TEST(PeftGolden, Gemma2AllModulesFloat32) {
  expect_golden("peft_gemma2", DType::F32, 3e-5);
}
TEST(PeftGolden, Gemma3AllModulesFloat64) {
  expect_golden("peft_gemma3", DType::F64, 1e-12);
}
TEST(PeftGolden, Gemma3AllModulesFloat32) {
  expect_golden("peft_gemma3", DType::F32, 1e-5);
}

// BLOOM: one adapter on the fused query_key_value (B's rows interleaved per head in the file) plus dense,
// dense_h_to_4h (rank_pattern 3) and dense_4h_to_h, over ALiBi, LayerNorm with bias and the GELU MLP.
TEST(PeftGolden, BloomFusedQueryKeyValueFloat64) {
  expect_golden("peft_bloom", DType::F64, 1e-12);
}
TEST(PeftGolden, BloomFusedQueryKeyValueFloat32) {
  expect_golden("peft_bloom", DType::F32, 1e-5);
}

// PEFT's BLOOM adapter read and written back byte for byte: the fused B goes through the engine's row order
// and back.
TEST(PeftGolden, BloomAdapterRoundTripsByteForByte) {
  const std::string dir = test::source_path("tests/model/golden/peft_bloom");
  const model::ModelConfig config = model::load_model_config(dir + "/base");
  const io::LoraAdapterConfig adapter = io::read_adapter_config(dir + "/adapter");
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
  ASSERT_EQ(specs.size(), size_t(4 * config.num_layers));
  Arena arena("bloom-adapter", HostMemory::instance(), model::lora_bytes(specs, DType::F32));
  model::LoraWeights lora = model::allocate_lora(config, specs, DType::F32, arena);
  io::load_peft_adapter_weights(dir + "/adapter", config, adapter, lora);
  test::TempDir out;
  io::save_peft_adapter(out.path(), config, adapter, lora, DType::F32);
  auto theirs = io::SafetensorsFile::open(dir + "/adapter/adapter_model.safetensors");
  auto ours = io::SafetensorsFile::open(out.file("adapter_model.safetensors"));
  ASSERT_EQ(ours->entries().size(), theirs->entries().size());
  for (const io::SafetensorsEntry& e : theirs->entries()) {
    const io::SafetensorsEntry* o = ours->find(e.name);
    ASSERT_NE(o, nullptr) << e.name;
    EXPECT_EQ(o->shape, e.shape) << e.name;
    EXPECT_EQ(std::memcmp(o->data, e.data, size_t(e.numel()) * 4), 0) << e.name;
  }
}

// PEFT's Phi-3 adapter: one adapter per fused module (qkv_proj: A (r, D), B (q+k+v, r); gate_up_proj: B (2F,
// r)), read and written back under PEFT's names and shapes, byte for byte.
TEST(PeftGolden, Phi3FusedAdapterRoundTripsByteForByte) {
  const std::string dir = test::source_path("tests/model/golden/peft_phi3");
  const model::ModelConfig config = model::load_model_config(dir + "/base");
  const io::LoraAdapterConfig adapter = io::read_adapter_config(dir + "/adapter");
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
  ASSERT_EQ(specs.size(), size_t(4 * config.num_layers));
  for (const model::LoraSpec& s : specs) {
    if (s.module_path.ends_with("qkv_proj")) {
      EXPECT_EQ(s.out, config.q_dim() + 2 * config.kv_dim());
      EXPECT_EQ(s.rank, 4);
    }
    if (s.module_path.ends_with("gate_up_proj")) {
      EXPECT_EQ(s.out, 2 * config.intermediate_size);
      EXPECT_EQ(s.rank, 3);  // rank_pattern
    }
  }
  Arena arena("phi3-adapter", HostMemory::instance(), model::lora_bytes(specs, DType::F32));
  model::LoraWeights lora = model::allocate_lora(config, specs, DType::F32, arena);
  io::load_peft_adapter_weights(dir + "/adapter", config, adapter, lora);
  test::TempDir out;
  io::save_peft_adapter(out.path(), config, adapter, lora, DType::F32);
  auto theirs = io::SafetensorsFile::open(dir + "/adapter/adapter_model.safetensors");
  auto ours = io::SafetensorsFile::open(out.file("adapter_model.safetensors"));
  ASSERT_EQ(ours->entries().size(), theirs->entries().size());
  for (const io::SafetensorsEntry& e : theirs->entries()) {
    const io::SafetensorsEntry* o = ours->find(e.name);
    ASSERT_NE(o, nullptr) << e.name;
    EXPECT_EQ(o->shape, e.shape) << e.name;
    EXPECT_EQ(o->dtype, e.dtype) << e.name;
    EXPECT_EQ(std::memcmp(o->data, e.data, size_t(e.numel()) * 4), 0) << e.name;
  }
}

// The goldens exercise what they claim: patterns change ranks and alphas, rsLoRA the scaling, Qwen2 has
// biases, all seven projections are adapted in the Llama case.
TEST(PeftGolden, CasesExerciseTheFeatures) {
  const std::string llama_dir = test::source_path("tests/model/golden/peft_llama");
  const model::ModelConfig llama = model::load_model_config(llama_dir + "/base");
  const io::LoraAdapterConfig la = io::read_adapter_config(llama_dir + "/adapter");
  std::vector<model::LoraSpec> specs = io::lora_specs(llama, la);
  EXPECT_EQ(specs.size(), size_t(7 * llama.num_layers));
  std::set<int64_t> ranks;
  std::set<double> scalings;
  for (const model::LoraSpec& s : specs) ranks.insert(s.rank), scalings.insert(s.scaling);
  EXPECT_EQ(ranks, (std::set<int64_t>{2, 3, 4}));
  EXPECT_GE(scalings.size(), 3u);
  for (const model::LoraSpec& s : specs)
    if (s.module_path == "model.layers.1.self_attn.q_proj") {
      EXPECT_EQ(s.rank, 3);
    }

  const std::string qwen_dir = test::source_path("tests/model/golden/peft_qwen2");
  const model::ModelConfig qwen = model::load_model_config(qwen_dir + "/base");
  const io::LoraAdapterConfig qa = io::read_adapter_config(qwen_dir + "/adapter");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_TRUE(qa.use_rslora);
  for (const model::LoraSpec& s : io::lora_specs(qwen, qa)) EXPECT_DOUBLE_EQ(s.scaling, qa.lora_alpha / 2.0);

  const std::string qwen3_dir = test::source_path("tests/model/golden/peft_qwen3");
  const model::ModelConfig qwen3 = model::load_model_config(qwen3_dir + "/base");
  EXPECT_TRUE(qwen3.block.qk_norm);
  EXPECT_TRUE(qwen3.qkv_bias);
  EXPECT_TRUE(qwen3.o_bias);
  EXPECT_EQ(io::lora_specs(qwen3, io::read_adapter_config(qwen3_dir + "/adapter")).size(),
            size_t(7 * qwen3.num_layers));
}

}  // namespace
}  // namespace lt
