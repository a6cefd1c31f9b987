// QLoRA through the trainer. The property: training LoRA over 4-bit projections equals training LoRA over a
// dense checkpoint holding those projections' dequantized values (bitsandbytes' code * absmax in f32), bit
// for bit, in float64 and float32, whole-sequence, chunked and under recompute policies: the GEMMs see the
// same values in the same order, only where they come from differs (dequantized into a scratch right before
// each GEMM). With tests/train/test_qlora_golden.cpp (the dequantized values and the math equal
// bitsandbytes + PEFT) this ties QLoRA training to the reference libraries. Also: an interrupted QLoRA run
// that resumes equals the uninterrupted one, and a 4-bit checkpoint as base_model trains as the dense
// checkpoint quantized on load does.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/memory_plan.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/checkpoint.h"
#include "train/config_enums.h"
#include "train/qlora_model.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::train {
namespace {

const std::vector<std::string> kAllProjections = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"};

// dir/base: the tiny model with random float32 weights (a real checkpoint); dir/dequantized: the same with
// every projection replaced by its NF4 (double-quantized) dequantization; dir/data.jsonl.
void write_bases(const test::TempDir& dir) {
  test::write_tiny_model_dir(dir.file("config_only"));
  test::write_tiny_dataset(dir.file("data.jsonl"), 9);
  const model::ModelConfig config = model::load_model_config(dir.file("config_only"));
  Arena arena("bases", HostMemory::instance(), model::weights_bytes(config, DType::F32));
  model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
  model::init_random(ctx, config, w, 5);
  io::save_hf_checkpoint(dir.file("base"), config, w, {.dtype = DType::F32});
  const io::Bnb4Weights q = io::quantize_projections(
      config, w, io::Bnb4Config{.quant_type = ops::Quant4Type::NF4, .double_quant = true});
  for (const model::WeightSpec& spec : model::weight_specs(config))
    if (io::is_quantized_kind(spec.kind))
      ops::dequantize_weight_4bit(q.projections.at(spec.hf_name), DType::F32, model::weight_of(w, spec).data);
  io::save_hf_checkpoint(dir.file("dequantized"), config, w, {.dtype = DType::F32});
}

TrainConfig lora_config(const test::TempDir& dir, const std::string& base, const std::string& out) {
  TrainConfig c = test::tiny_train_config(dir.path(), out);
  c.base_model = dir.file(base);
  c.random_init = false;
  c.finetune = model::Finetune::Lora;
  c.lora_r = 4;
  c.lora_alpha = 8;
  c.lora_dropout = 0.1;  // the masks come from (seed, step, micro-batch): the same in both runs
  c.lora_target_modules = kAllProjections;
  c.max_steps = 3;
  c.learning_rate = 5e-2;
  return c;
}

// The adapter file's tensors, raw bytes by name.
std::map<std::string, std::vector<uint8_t>> adapter_bytes(const std::string& dir) {
  auto file = io::SafetensorsFile::open(dir + "/" + io::kAdapterWeightsFile);
  std::map<std::string, std::vector<uint8_t>> out;
  for (const io::SafetensorsEntry& e : file->entries())
    out[e.name] = std::vector<uint8_t>(e.data, e.data + (e.end - e.begin));
  return out;
}

struct Setting {
  const char* name;
  Precision precision;
  int64_t chunk_size;
  std::optional<model::Recompute> recompute;  // nullopt: auto
};

class QloraTrainer : public ::testing::TestWithParam<Setting> {};

TEST_P(QloraTrainer, EqualsLoraOverTheDequantizedBase) {
  test::TempDir dir;
  write_bases(dir);
  TrainConfig qlora = lora_config(dir, "base", "qlora");
  qlora.bits = 4;
  TrainConfig dense = lora_config(dir, "dequantized", "lora");
  for (TrainConfig* c : {&qlora, &dense}) {
    c->precision = GetParam().precision;
    c->chunk_size = GetParam().chunk_size;
    c->recompute = GetParam().recompute;
  }
  qlora.torch_dtype = "float32";
  const TrainResult a = run_training(qlora, test::quiet_hooks());
  const TrainResult b = run_training(dense, test::quiet_hooks());
  ASSERT_EQ(a.losses.size(), 3u);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_LT(a.losses.back(), a.losses.front()) << "the adapters learn";
  const auto qa = adapter_bytes(qlora.output_dir), da = adapter_bytes(dense.output_dir);
  ASSERT_EQ(qa.size(), 2 * 7 * 2u);
  for (const auto& [name, bytes] : qa) EXPECT_EQ(bytes, da.at(name)) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Settings, QloraTrainer,
    ::testing::Values(Setting{"fp64", Precision::Fp64, 0, std::nullopt},
                      Setting{"fp32", Precision::Fp32, 0, std::nullopt},
                      Setting{"chunked", Precision::Fp64, 4, std::nullopt},
                      Setting{"recompute_full", Precision::Fp64, 0, model::Recompute::Full},
                      Setting{"recompute_selective", Precision::Fp32, 0, model::Recompute::Selective}),
    [](const ::testing::TestParamInfo<Setting>& info) { return std::string(info.param.name); });

// The same run over `leantune quantize`'s kind of 4-bit checkpoint (the codes read as stored) and over the
// dense base quantized on load: the same bytes, so the same training.
TEST(QloraTrainer, FourBitCheckpointTrainsAsQuantizedOnLoad) {
  test::TempDir dir;
  write_bases(dir);
  {
    const model::ModelConfig config = model::load_model_config(dir.file("base"));
    Arena arena("base", HostMemory::instance(), model::weights_bytes(config, DType::F32));
    model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
    io::load_hf_weights(dir.file("base"), config, w);
    const io::Bnb4Weights q = io::quantize_projections(
        config, w, io::Bnb4Config{.quant_type = ops::Quant4Type::NF4, .double_quant = true});
    io::save_bnb4_checkpoint(dir.file("base4"), config, w, q);
  }
  TrainConfig on_load = lora_config(dir, "base", "on_load");
  TrainConfig stored = lora_config(dir, "base4", "stored");
  on_load.bits = stored.bits = 4;
  const TrainResult a = run_training(on_load, test::quiet_hooks());
  const TrainResult b = run_training(stored, test::quiet_hooks());
  EXPECT_EQ(a.losses, b.losses);
}

// eval and generate read a 4-bit checkpoint through load_model: dequantized, each projection the values
// QLoRA trains with, so it is the dense dequantized checkpoint bit for bit (f32 widened exactly to f64); a
// run that is not QLoRA refuses a 4-bit base by name.
TEST(QloraTrainer, FourBitCheckpointLoadsForEvalAsItsDequantizedWeights) {
  test::TempDir dir;
  write_bases(dir);
  const model::ModelConfig config = model::load_model_config(dir.file("base"));
  {
    Arena arena("base", HostMemory::instance(), model::weights_bytes(config, DType::F32));
    model::ModelWeights w = model::allocate_weights(config, DType::F32, arena);
    io::load_hf_weights(dir.file("base"), config, w);
    const io::Bnb4Weights q = io::quantize_projections(
        config, w, io::Bnb4Config{.quant_type = ops::Quant4Type::NF4, .double_quant = true});
    io::save_bnb4_checkpoint(dir.file("base4"), config, w, q);
  }
  for (DType dt : {DType::F64, DType::F32}) {
    const LoadedModel four = load_model(ctx, dir.file("base4"), dt, false, 0);
    const LoadedModel dense = load_model(ctx, dir.file("dequantized"), dt, false, 0);
    for (const model::WeightSpec& spec : model::weight_specs(config)) {
      const Tensor& a = model::weight_of(four.weights, spec);
      const Tensor& b = model::weight_of(dense.weights, spec);
      ASSERT_EQ(a.bytes(), b.bytes()) << spec.hf_name;
      EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << dtype_name(dt) << " " << spec.hf_name;
    }
  }
  TrainConfig lora16 = lora_config(dir, "base4", "lora16");
  try {
    run_training(lora16, test::quiet_hooks());
    FAIL() << "a 4-bit base trained without bits 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4-bit (bitsandbytes) checkpoint"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("base4"), std::string::npos) << e.what();
  }
}

// A QLoRA run stopped by SIGINT and resumed (the base quantized again on load) equals the uninterrupted one.
TEST(QloraTrainer, InterruptedThenResumedEqualsUninterrupted) {
  test::TempDir dir;
  write_bases(dir);
  TrainConfig base = lora_config(dir, "base", "full");
  base.bits = 4;
  base.max_steps = 4;
  TrainConfig full = base;
  const TrainResult straight = run_training(full, test::quiet_hooks());
  ASSERT_EQ(straight.losses.size(), 4u);

  TrainConfig part = base;
  part.output_dir = dir.file("resumed");
  const auto [first, second] = test::run_interrupted_then_resumed(part, 2);
  ASSERT_TRUE(first.interrupted);
  EXPECT_EQ(second.start_step, 2);
  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(resumed, straight.losses);
  const auto a = adapter_bytes(full.output_dir), b = adapter_bytes(part.output_dir);
  ASSERT_FALSE(a.empty());
  for (const auto& [name, bytes] : a) EXPECT_EQ(bytes, b.at(name)) << name;

  // Resuming with another quantization is refused naming the key.
  TrainConfig other = part;
  other.bnb_4bit_quant_type = ops::Quant4Type::FP4;
  other.resume = part.output_dir + "/checkpoint-2";
  other.output_dir = dir.file("other");
  test::expect_error_mentions([&] { run_training(other, test::quiet_hooks()); }, {"bnb_4bit_quant_type"});
}

// The memory plan of a QLoRA run counts what the loader allocates: the dense rest, the 4-bit projections
// (0.5 byte a weight plus the scales: f32 per 64 weights, or with double quantization a byte per 64 and the
// nested f32 scales and map) and the one-projection dequantization scratch, instead of dense projections.
TEST(QloraMemoryPlan, CountsTheFourBitWeightsTheLoaderAllocates) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.file("model"));
  for (const bool double_quant : {false, true}) {
    const LoadedModel m = load_qlora_model(ctx, dir.file("model"), QloraOptions{.double_quant = double_quant},
                                           DType::F64, /*random_init=*/true, 1, Device::CPU);
    model::MemoryPlanSettings s;
    s.dtype = DType::F64;
    s.state_dtype = DType::F64;
    s.batch = 1;
    s.seq_len = 8;
    s.method = model::FinetuneMethod::Lora;
    s.lora = model::lora_specs(m.config, [](const std::string&) -> std::optional<model::LoraModuleSetting> {
      return model::LoraModuleSetting{.rank = 2, .alpha = 4};
    });
    model::MemoryPlan dense = model::plan_memory(m.config, s);
    s.nf4_double_quant = double_quant;
    const model::MemoryPlan qlora = model::plan_memory(m.config, s);
    size_t planned = 0;
    for (const model::MemoryPlanRow& row : qlora.rows)
      if (row.name == "weights" || row.name.starts_with("weights.nf4")) planned += row.bytes;
    const size_t allocated = m.arena->capacity() + m.nf4_arena->capacity();
    EXPECT_EQ(planned, allocated);
    for (const Arena* a : {m.arena.get(), m.nf4_arena.get()})  // sized exactly (up to the last alignment)
      EXPECT_LT(a->capacity() - a->used(), 256u) << a->name();
    EXPECT_LT(qlora.bytes(model::MemoryCategory::Weights), dense.bytes(model::MemoryCategory::Weights));
    EXPECT_EQ(qlora.total - planned, dense.total - dense.bytes(model::MemoryCategory::Weights))
        << "only the weights' rows change";
  }
}

}  // namespace
}  // namespace lt::train
