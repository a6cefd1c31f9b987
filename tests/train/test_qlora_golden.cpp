// QLoRA parity with transformers + bitsandbytes + PEFT (tools/make_qlora_golden.py): peft_llama's float32
// base quantized by bitsandbytes to NF4 with double quantization (its checkpoint, base4/), PEFT's adapter on
// top, one forward/backward on a padded batch. The golden computes QLoRA's math (x @ dequant(W)^T + lora(x))
// in float64 from bitsandbytes' dequantized weights; leantune holds the projections in 4 bits and dequantizes
// each into its scratch right before the GEMM. Also: the 4-bit bytes leantune makes when it quantizes the
// float32 base on load equal bitsandbytes' (its CUDA kernel's choices, which the golden records).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/arena.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/decoder.h"
#include "model/lora.h"
#include "model/nf4_weights.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/qlora_model.h"

namespace lt {
namespace {

const std::string kPeft = "tests/model/golden/peft_llama";
const std::string kGolden = "tests/model/golden/qlora_llama/golden.safetensors";
const std::string kBnbBase = "tests/model/golden/qlora_llama/base4";

// A golden entry's bytes (checked to be `dtype`).
std::vector<uint8_t> raw(const io::SafetensorsFile& file, const std::string& name, io::StDType dtype) {
  const io::SafetensorsEntry* e = file.find(name);
  EXPECT_NE(e, nullptr) << name;
  if (!e) return {};
  EXPECT_EQ(e->dtype, dtype) << name;
  return std::vector<uint8_t>(e->data, e->data + (e->end - e->begin));
}

template <class T>
std::vector<T> golden_values(const io::SafetensorsFile& file, const std::string& name, io::StDType dtype) {
  const std::vector<uint8_t> bytes = raw(file, name, dtype);
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.bytes());
}

// peft_llama's float32 base quantized on load by leantune (the QLoRA recipe: NF4, double quantization).
train::LoadedModel quantized_on_load(DType dtype) {
  return train::load_qlora_model(
      ctx, test::source_path(kPeft + "/base"),
      train::QloraOptions{.quant_type = ops::Quant4Type::NF4, .double_quant = true}, dtype,
      /*random_init=*/false, 0, Device::CPU);
}

// bitsandbytes' own 4-bit model of that base (save_pretrained), its codes as stored.
train::LoadedModel bitsandbytes_checkpoint(DType dtype) {
  return train::load_qlora_model(ctx, test::source_path(kBnbBase), train::QloraOptions{}, dtype, false, 0,
                                 Device::CPU);
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Quantize-on-load gives bitsandbytes' 4-bit codes byte for byte. The double-quantization offset is the mean
// of the block scales: leantune rounds the exact mean once, torch sums in float32 in an order of its own
// (CPU vector width, CUDA tree), so the two may differ by one ulp (TRAINING.md); where they agree, every
// nested byte agrees too.
TEST(QloraGolden, QuantizedOnLoadEqualsBitsandbytesBytes) {
  const train::LoadedModel m = quantized_on_load(DType::F64);
  ASSERT_NE(m.nf4, nullptr);
  auto golden = io::SafetensorsFile::open(test::source_path(kGolden));
  int compared = 0, offsets_equal = 0;
  for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
    const std::optional<model::ProjId> id = model::projection_of(spec.kind);
    if (!id) {
      EXPECT_FALSE(model::weight_of(m.weights, spec).empty()) << spec.hf_name << " stays dense";
      continue;
    }
    EXPECT_TRUE(model::weight_of(m.weights, spec).empty()) << spec.hf_name << " has no dense copy";
    const model::Nf4Proj& p = m.nf4->layers[size_t(spec.layer)].proj[*id];
    const std::string g = "nf4." + spec.hf_name;
    EXPECT_EQ(tensor_bytes(p.packed), raw(*golden, g + ".packed", io::StDType::U8)) << spec.hf_name;
    const std::vector<float> offset = golden_values<float>(*golden, g + ".offset", io::StDType::F32);
    ASSERT_EQ(offset.size(), 1u);
    const int64_t ulps = int64_t(bits_of(p.offset)) - int64_t(bits_of(offset[0]));
    EXPECT_LE(std::abs(ulps), 1) << spec.hf_name << ": offset " << p.offset << " vs " << offset[0];
    if (ulps == 0) {
      ++offsets_equal;
      EXPECT_EQ(tensor_bytes(p.qabsmax), raw(*golden, g + ".qabsmax", io::StDType::U8)) << spec.hf_name;
      EXPECT_EQ(tensor_bytes(p.nested_absmax), raw(*golden, g + ".nested_absmax", io::StDType::F32))
          << spec.hf_name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 7 * m.config.num_layers);
  EXPECT_GT(offsets_equal, 0) << "the nested bytes were compared somewhere";
  std::printf("[qlora bytes] %d projections: packed codes equal; offsets equal in %d (others 1 ulp apart)\n",
              compared, offsets_equal);
}

// bitsandbytes' checkpoint loads as its own bytes (what the float64 golden is computed from).
TEST(QloraGolden, BitsandbytesCheckpointLoadsAsStored) {
  const train::LoadedModel m = bitsandbytes_checkpoint(DType::F64);
  ASSERT_NE(m.nf4, nullptr);
  EXPECT_TRUE(m.nf4->double_quant);
  auto golden = io::SafetensorsFile::open(test::source_path(kGolden));
  int compared = 0;
  for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
    const std::optional<model::ProjId> id = model::projection_of(spec.kind);
    if (!id) continue;
    const model::Nf4Proj& p = m.nf4->layers[size_t(spec.layer)].proj[*id];
    const std::string g = "nf4." + spec.hf_name;
    EXPECT_EQ(tensor_bytes(p.packed), raw(*golden, g + ".packed", io::StDType::U8)) << spec.hf_name;
    EXPECT_EQ(tensor_bytes(p.qabsmax), raw(*golden, g + ".qabsmax", io::StDType::U8)) << spec.hf_name;
    EXPECT_EQ(tensor_bytes(p.nested_absmax), raw(*golden, g + ".nested_absmax", io::StDType::F32))
        << spec.hf_name;
    EXPECT_EQ(bits_of(p.offset),
              bits_of(golden_values<float>(*golden, g + ".offset", io::StDType::F32).at(0)))
        << spec.hf_name;
    ++compared;
  }
  EXPECT_EQ(compared, 7 * m.config.num_layers);
}

struct GoldenErrors {
  double loss = 0, worst_grad = 0;
  std::string worst_name;
  size_t compared = 0, golden_grads = 0;
};

GoldenErrors run_qlora_golden(DType dtype) {
  train::LoadedModel m = bitsandbytes_checkpoint(dtype);
  const model::ModelConfig& config = m.config;
  const io::LoraAdapterConfig adapter = io::read_adapter_config(test::source_path(kPeft + "/adapter"));
  const std::vector<model::LoraSpec> specs = io::lora_specs(config, adapter);
  auto golden = io::SafetensorsFile::open(test::source_path(kGolden));
  const std::vector<int64_t> ids64 = golden_values<int64_t>(*golden, "input_ids", io::StDType::I64);
  const std::vector<int64_t> labels64 = golden_values<int64_t>(*golden, "labels", io::StDType::I64);
  const int64_t B = golden->find("input_ids")->shape[0], T = golden->find("input_ids")->shape[1];
  std::vector<int32_t> ids(ids64.begin(), ids64.end()), labels(labels64.begin(), labels64.end());
  std::vector<int32_t> positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) positions[size_t(i)] = int32_t(i % T);  // right padding
  const model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                           .positions = Tensor(positions.data(), DType::I32, {B, T}),
                           .segments = Tensor(),
                           .labels = Tensor(labels.data(), DType::I32, {B, T})};

  const model::TrainableFn frozen = [](const model::WeightSpec&) { return false; };
  Arena arena("qlora-golden", HostMemory::instance(),
              model::grads_bytes(config, dtype, frozen) + 2 * model::lora_bytes(specs, dtype) +
                  model::Decoder::arena_bytes(config, dtype, B, T, specs));
  model::ModelWeights grads = model::allocate_grads(ctx, config, dtype, arena, frozen);
  model::LoraWeights lora = model::allocate_lora(config, specs, dtype, arena);
  io::load_peft_adapter_weights(test::source_path(kPeft + "/adapter"), config, adapter, lora);
  model::LoraWeights lora_grads = model::allocate_lora(config, specs, dtype, arena);
  model::zero_lora(ctx, lora_grads);

  model::Decoder decoder(ctx, config, dtype, B, T, arena, specs);
  const double loss = decoder.forward(m.weights, batch, model::count_label_tokens(batch), &lora);
  decoder.backward(m.weights, grads, &lora_grads);

  GoldenErrors r;
  const double want = golden_values<double>(*golden, "loss", io::StDType::F64).at(0);
  r.loss = std::abs(loss - want) / std::abs(want);
  for (const model::LoraTensor& t : model::lora_tensors(lora, lora_grads)) {
    const double e = test::max_rel_diff(test::values(t.grad),
                                        golden_values<double>(*golden, "grad." + t.name, io::StDType::F64));
    if (e > r.worst_grad || r.compared == 0) r.worst_grad = e, r.worst_name = t.name;
    ++r.compared;
  }
  for (const io::SafetensorsEntry& e : golden->entries()) r.golden_grads += e.name.rfind("grad.", 0) == 0;
  return r;
}

void expect_qlora_golden(DType dtype, double tolerance) {
  const GoldenErrors r = run_qlora_golden(dtype);
  EXPECT_EQ(r.compared, r.golden_grads) << "every PEFT adapter tensor has its gradient here";
  EXPECT_GT(r.compared, 0u);
  EXPECT_LE(r.loss, tolerance) << "loss";
  EXPECT_LE(r.worst_grad, tolerance) << "gradient of " << r.worst_name;
  std::printf("[qlora parity] %s: loss %.2e, worst of %zu adapter gradients %.2e (%s)\n",
              std::string(dtype_name(dtype)).c_str(), r.loss, r.compared, r.worst_grad, r.worst_name.c_str());
}

// float64: the dequantized weights are exact in f64 and the rest is the PEFT golden's float64 math; what
// remains is the BLAS kernels' summation order (a few ulps of f64).
TEST(QloraGolden, LossAndAdapterGradientsFloat64) {
  expect_qlora_golden(DType::F64, 1e-12);
}

// float32: the same dequantized values (code * absmax is an f32 product either way), f32 arithmetic after.
TEST(QloraGolden, LossAndAdapterGradientsFloat32) {
  expect_qlora_golden(DType::F32, 1e-4);
}

}  // namespace
}  // namespace lt
