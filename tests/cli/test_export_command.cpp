// `leantune export --merge`: the merged checkpoint loads with leantune and gives, without adapters, the loss
// of the base model with the adapter (float64 storage: to rounding; the base's float32: to float32
// rounding of the merged weights), and PEFT's golden loss; bad invocations give one message and exit 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "cli/commands.h"
#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/peft_adapter.h"
#include "io/safetensors.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

struct CliRun {
  int code = 0;
  std::string out, err;
};

CliRun leantune(std::vector<std::string> args) {
  args.insert(args.begin(), "leantune");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  CliRun r;
  r.code = cli::run_main(int(argv.size()), argv.data());
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

const std::string kGolden = "tests/model/golden/peft_llama";

// `golden`'s batch and the loss of `checkpoint` on it (with `adapter_dir`'s adapter when not empty).
double golden_batch_loss(const std::string& checkpoint, const std::string& adapter_dir,
                         const std::string& golden_dir = kGolden) {
  auto golden = io::SafetensorsFile::open(test::source_path(golden_dir + "/golden.safetensors"));
  const io::SafetensorsEntry* ids_e = golden->find("input_ids");
  const int64_t B = ids_e->shape[0], T = ids_e->shape[1];
  std::vector<int32_t> ids(size_t(B * T)), labels(size_t(B * T)), positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) {
    int64_t a, b;
    std::memcpy(&a, ids_e->data + i * 8, 8);
    std::memcpy(&b, golden->find("labels")->data + i * 8, 8);
    ids[size_t(i)] = int32_t(a), labels[size_t(i)] = int32_t(b), positions[size_t(i)] = int32_t(i % T);
  }
  model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                     .positions = Tensor(positions.data(), DType::I32, {B, T}),
                     .segments = Tensor(),
                     .labels = Tensor(labels.data(), DType::I32, {B, T})};
  const model::ModelConfig config = model::load_model_config(checkpoint);
  std::vector<model::LoraSpec> specs;
  io::LoraAdapterConfig adapter;
  if (!adapter_dir.empty()) {
    adapter = io::read_adapter_config(adapter_dir);
    specs = io::lora_specs(config, adapter);
  }
  Arena arena("export-test", HostMemory::instance(),
              model::weights_bytes(config, DType::F64) +
                  (specs.empty() ? 0 : model::lora_bytes(specs, DType::F64)) +
                  model::Decoder::arena_bytes(config, DType::F64, B, T, specs));
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  io::load_hf_weights(checkpoint, config, w);
  model::Decoder decoder(ctx, config, DType::F64, B, T, arena, specs);
  if (specs.empty()) return decoder.forward(w, batch, model::count_label_tokens(batch));
  model::LoraWeights lora = model::allocate_lora(config, specs, DType::F64, arena);
  io::load_peft_adapter_weights(adapter_dir, config, adapter, lora);
  return decoder.forward(w, batch, model::count_label_tokens(batch), &lora);
}

// PEFT's loss on `golden_dir`'s batch (golden.safetensors, float64).
double peft_golden_loss(const std::string& golden_dir) {
  double loss;
  std::memcpy(
      &loss,
      io::SafetensorsFile::open(test::source_path(golden_dir + "/golden.safetensors"))->find("loss")->data,
      8);
  return loss;
}

TEST(ExportCommand, MergedCheckpointGivesTheAdaptedLoss) {
  const std::string base = test::source_path(kGolden + "/base"),
                    adapter = test::source_path(kGolden + "/adapter");
  const double with_adapter = golden_batch_loss(base, adapter);
  const double base_only = golden_batch_loss(base, "");
  ASSERT_GT(std::abs(with_adapter - base_only), 1e-3);
  const double peft_loss = peft_golden_loss(kGolden);

  test::TempDir tmp;
  CliRun r = leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir",
                       tmp.file("merged64"), "--dtype", "float64"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("merged 14 LoRA adapters"), std::string::npos) << r.out;
  // Where the work is, step by step, on stderr.
  EXPECT_NE(r.err.find("export: reading " + base + "\nexport: merging 14 LoRA adapters of " + adapter +
                       "\nexport: writing " + tmp.file("merged64") + "\n"),
            std::string::npos)
      << r.err;
  const double merged64 = golden_batch_loss(tmp.file("merged64"), "");
  EXPECT_NEAR(merged64, with_adapter, 1e-12 * with_adapter);
  EXPECT_NEAR(merged64, peft_loss, 1e-12 * peft_loss);

  // Default dtype: the base's (float32); its files as transformers expects, the base's extras copied.
  r = leantune(
      {"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir", tmp.file("merged")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.file("merged/config.json")));
  EXPECT_TRUE(fs::exists(tmp.file("merged/model.safetensors")));
  EXPECT_TRUE(fs::exists(tmp.file("merged/generation_config.json")));
  auto file = io::SafetensorsFile::open(tmp.file("merged/model.safetensors"));
  for (const io::SafetensorsEntry& e : file->entries()) {
    EXPECT_EQ(e.dtype, io::StDType::F32) << e.name;
    EXPECT_EQ(e.name.find("lora"), std::string::npos) << e.name;
  }
  const double merged32 = golden_batch_loss(tmp.file("merged"), "");
  EXPECT_NEAR(merged32, with_adapter, 1e-6 * with_adapter);
  EXPECT_NE(merged32, base_only);
  std::printf("[export] adapter loss %.15f, merged f64 %.15f, merged f32 %.15f, PEFT %.15f\n", with_adapter,
              merged64, merged32, peft_loss);

  // Sharded output: several shards and an index, same loss.
  r = leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir",
                tmp.file("sharded"), "--max_shard_gb", "0.00002"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.file("sharded/model.safetensors.index.json")));
  EXPECT_EQ(golden_batch_loss(tmp.file("sharded"), ""), merged32);
}

// Gemma 3 (tools/make_gemma3_golden.py's peft_gemma3: q/k norms, a local and a global RoPE): the merged
// checkpoint, config.json included (layer_types, rope_parameters per layer type), gives PEFT's loss.
TEST(ExportCommand, Gemma3MergedCheckpointGivesPeftsLoss) {
  const std::string golden = "tests/model/golden/peft_gemma3";
  const std::string base = test::source_path(golden + "/base"),
                    adapter = test::source_path(golden + "/adapter");
  const double peft_loss = peft_golden_loss(golden);
  test::TempDir tmp;
  const CliRun r = leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir",
                             tmp.file("merged"), "--dtype", "float64"});
  ASSERT_EQ(r.code, 0) << r.err;
  const model::ModelConfig merged = model::load_model_config(tmp.file("merged"));
  EXPECT_EQ(merged.arch, model::Architecture::Gemma3);
  EXPECT_EQ(merged.layer_local_rope, model::load_model_config(base).layer_local_rope);
  EXPECT_NEAR(golden_batch_loss(tmp.file("merged"), "", golden), peft_loss, 1e-12 * peft_loss);
  EXPECT_GT(std::abs(golden_batch_loss(base, "", golden) - peft_loss), 1e-3);
}

TEST(ExportCommand, BadInvocationsFailWithOneMessage) {
  const std::string base = test::source_path(kGolden + "/base"),
                    adapter = test::source_path(kGolden + "/adapter");
  test::TempDir tmp;
  CliRun r =
      leantune({"export", "--base_model", base, "--adapter", adapter, "--output_dir", tmp.file("out")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--merge"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.file("out")));

  r = leantune({"export", "--base_model", base, "--adapter", tmp.file("nothing"), "--merge", "--output_dir",
                tmp.file("out")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nothing"), std::string::npos) << r.err;

  // The Qwen2 adapter does not fit the Llama base: the message names the tensor and the expected shape.
  r = leantune({"export", "--base_model", base, "--adapter",
                test::source_path("tests/model/golden/peft_qwen2/adapter"), "--merge", "--output_dir",
                tmp.file("out")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("lora_B.weight"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.file("out")));

  r = leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir", base});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input directory"), std::string::npos) << r.err;

  r = leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir",
                tmp.file("out"), "--dtype", "int8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("int8"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt
