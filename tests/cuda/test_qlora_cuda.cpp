// QLoRA on the GPU against the CPU: the projections dequantized on the GPU (ops/cuda/quant4.cu, through
// model/nf4_weights.h's scratch) are the CPU's bytes in every compute dtype (one f32 product, one
// rounding), and `train --device cuda` with adapter qlora gives per-step losses within GPU.md's tolerances
// of the CPU float64 QLoRA run (which tests/train/test_qlora_golden.cpp ties to bitsandbytes + PEFT),
// whole-sequence and chunked, with and without double quantization. Fused projections (BLOOM's per-head
// interleaved query_key_value, Phi-3's qkv_proj / gate_up_proj: one 4-bit weight each, each part dequantized
// run by run into the scratch) the same: parts equal the CPU's bytes, and PEFT's QLoRA trajectories
// (tools/make_qlora_fused_golden.py, float64) within GPU.md's tolerances, BLOOM chunked (ALiBi across
// chunks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/nf4_weights.h"
#include "ops/device.h"
#include "parity_support.h"
#include "support/test_context.h"
#include "train/config_enums.h"
#include "train/qlora_model.h"
#include "train/run_setup.h"
#include "train/run_training.h"
#include "train/train_test_util.h"

namespace lt::test {
namespace {

std::vector<uint8_t> host_bytes(const Tensor& t) {
  std::vector<uint8_t> out(t.bytes());
  Tensor host = t;
  host.data = out.data();
  host.device = Device::CPU;
  ops::copy(ctx, host, t);
  return out;
}

TEST(CudaQlora, DequantizedProjectionsEqualTheCpu) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  for (const bool double_quant : {false, true})
    for (const DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const train::QloraOptions o{.quant_type = ops::Quant4Type::NF4, .double_quant = double_quant};
      const train::LoadedModel cpu =
          train::load_qlora_model(ctx, dir.file("model"), o, dt, true, 9, Device::CPU);
      const train::LoadedModel gpu =
          train::load_qlora_model(ctx, dir.file("model"), o, dt, true, 9, Device::CUDA);
      int compared = 0;
      for (size_t l = 0; l < cpu.nf4->layers.size(); ++l)
        for (model::ProjId id : model::kAllProjs) {
          const std::vector<uint8_t> want =
              host_bytes(model::dequantize_to_scratch(ctx, cpu.nf4->layers[l].proj[id], cpu.nf4->scratch));
          const std::vector<uint8_t> got =
              host_bytes(model::dequantize_to_scratch(ctx, gpu.nf4->layers[l].proj[id], gpu.nf4->scratch));
          EXPECT_EQ(got, want) << dtype_name(dt) << " layer " << l << " projection " << int(id)
                               << (double_quant ? " (double quant)" : "");
          ++compared;
        }
      EXPECT_EQ(compared, 14);
    }
}

TEST(CudaQlora, StepLossesMatchTheCpuFloat64Run) {
  LT_REQUIRE_GPU();
  TempDir dir;
  write_tiny_model_dir(dir.file("model"));
  write_tiny_dataset(dir.file("data.jsonl"), 14);
  for (const bool double_quant : {true, false})
    for (const int64_t chunk : {0, 4}) {
      train::TrainConfig c = tiny_train_config(dir.path());
      c.finetune = model::Finetune::Lora;
      c.bits = 4;
      c.bnb_4bit_use_double_quant = double_quant;
      c.chunk_size = chunk;
      c.max_steps = 5;
      c.learning_rate = 2e-2;
      c.lora_r = 4;
      c.lora_alpha = 8;
      c.lora_dropout = 0.1;
      c.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      const std::string tag = std::string(double_quant ? "dq" : "nodq") + "-chunk" + std::to_string(chunk);
      train::TrainConfig cpu_c = c;
      cpu_c.output_dir = c.output_dir + "-cpu-" + tag;
      const std::vector<double> cpu = train::run_training(cpu_c, quiet_hooks()).losses;
      for (const train::Precision precision : {train::Precision::Fp32, train::Precision::Bf16}) {
        train::TrainConfig g = c;
        g.device = Device::CUDA;
        g.precision = precision;
        const std::string precision_name = train::name_of(train::kPrecisionNames, precision);
        g.output_dir = c.output_dir + "-" + precision_name + "-" + tag;
        const std::vector<double> gpu = train::run_training(g, quiet_hooks()).losses;
        ASSERT_EQ(gpu.size(), cpu.size());
        Worst w;
        for (size_t i = 0; i < cpu.size(); ++i)
          w.error = std::max(w.error, std::fabs(gpu[i] - cpu[i]) / std::fabs(cpu[i]));
        w.output = "step loss";
        const DType dt = train::compute_dtype(precision);
        report("train qlora --device cuda", dt, tag, w, tolerance(dt));
        EXPECT_LE(w.error, tolerance(dt)) << tag << " " << precision_name;
      }
    }
}

// Random projections drawn and quantized on the GPU (BLOOM's query_key_value put in the checkpoint's row
// order there before quantization) and on the host: every part of every fused weight dequantizes to the same
// bytes.
TEST(CudaQlora, FusedPartsDequantizeAsTheCpu) {
  LT_REQUIRE_GPU();
  for (const std::string family : {"bloom", "phi3"})
    for (const DType dt : {DType::F32, DType::BF16}) {
      const std::string dir = source_path("tests/model/golden/peft_" + family + "/base");
      const train::QloraOptions o{.quant_type = ops::Quant4Type::NF4, .double_quant = true};
      const train::LoadedModel cpu = train::load_qlora_model(ctx, dir, o, dt, true, 9, Device::CPU);
      const train::LoadedModel gpu = train::load_qlora_model(ctx, dir, o, dt, true, 9, Device::CUDA);
      int fused = 0;
      for (size_t l = 0; l < cpu.nf4->layers.size(); ++l)
        for (model::ProjId id : model::kAllProjs) {
          const model::Nf4Proj& p = cpu.nf4->layers[l].proj[id];
          if (p.packed.empty()) continue;  // BLOOM has no gate
          EXPECT_EQ(
              host_bytes(model::dequantize_to_scratch(ctx, gpu.nf4->layers[l].proj[id], gpu.nf4->scratch)),
              host_bytes(model::dequantize_to_scratch(ctx, p, cpu.nf4->scratch)))
              << family << " " << dtype_name(dt) << " layer " << l << " projection " << int(id);
          fused += p.fused_rows > 0;
        }
      EXPECT_EQ(fused, (family == "bloom" ? 3 : 5) * int(cpu.nf4->layers.size())) << family;
    }
}

// `train --device cuda --bits 4` of the fused-family QLoRA goldens: per-step losses within GPU.md's
// tolerances of PEFT's float64 trajectory (the CPU matches it to 1e-10:
// tests/train/test_peft_training_golden.cpp). f32 follows the learning-rate-2e-2 golden; bf16 follows the
// same run at 1e-3 (qlora_*_gentle), since at 2e-2 four AdamW steps amplify bf16 rounding: PEFT's own bf16
// run over Linear4bit lands 2.5e-2 to 4.4e-2 from the float64 Phi-3 trajectory there. Even at 1e-3 the tiny
// Phi-3 is ill-conditioned for bf16: PEFT's bf16 run of it (qlora_*_gentle_bfloat16,
// tools/make_qlora_fused_golden.py) is 1e-2 from the truth. So bf16 is held to GPU.md's tolerance or twice
// the reference library's own bf16 distance, whichever is larger (as the CPU float32 goldens are held to
// five times PEFT's float32 distance where it exceeds the tolerance).
TEST(CudaQlora, FusedFamiliesFollowThePeftGolden) {
  LT_REQUIRE_GPU();
  const std::string golden_dir = source_path("tests/train/golden/peft_training");
  for (const std::string family : {"bloom", "phi3"})
    for (const int64_t chunk : {0, 4}) {
      TempDir dir;
      train::TrainConfig c;
      c.data_path = golden_dir + "/data.jsonl";
      c.finetune = model::Finetune::Lora;
      c.lora_dropout = 0;
      c.shuffle = false;
      c.val_set_size = 0;
      c.bits = 4;
      c.save_steps = 0;
      c.eval_steps = 0;
      c.chunk_size = chunk;
      c.device = Device::CUDA;
      for (const train::Precision precision : {train::Precision::Fp32, train::Precision::Bf16}) {
        nlohmann::json g;
        const std::string golden = "qlora_" + family + (precision == train::Precision::Bf16 ? "_gentle" : "");
        std::ifstream(golden_dir + "/" + golden + ".json") >> g;
        ASSERT_FALSE(g.is_null()) << golden;
        c.base_model = source_path(g["base_model"].get<std::string>());
        c.init_adapter = source_path(g["init_adapter"].get<std::string>());
        apply_golden_schedule(c, g);
        const std::vector<double> want = g["losses"].get<std::vector<double>>();
        const DType dt = train::compute_dtype(precision);
        double bound = tolerance(dt);
        if (precision == train::Precision::Bf16) {
          nlohmann::json peft_bf16;
          std::ifstream(golden_dir + "/" + golden + "_bfloat16.json") >> peft_bf16;
          const std::vector<double> reference = peft_bf16.at("losses").get<std::vector<double>>();
          ASSERT_EQ(reference.size(), want.size()) << golden;
          for (size_t i = 0; i < want.size(); ++i)
            bound = std::max(bound, 2 * std::fabs(reference[i] - want[i]) / std::fabs(want[i]));
        }
        train::TrainConfig run = c;
        run.precision = precision;
        const std::string tag = golden + "-chunk" + std::to_string(chunk);
        run.output_dir = dir.file(tag + "-" + train::name_of(train::kPrecisionNames, precision));
        const std::vector<double> got = train::run_training(run, quiet_hooks()).losses;
        ASSERT_EQ(got.size(), want.size());
        Worst w;
        for (size_t i = 0; i < want.size(); ++i)
          w.error = std::max(w.error, std::fabs(got[i] - want[i]) / std::fabs(want[i]));
        w.output = "step loss";
        report("train qlora fused --device cuda", dt, tag, w, bound);
        EXPECT_LE(w.error, bound) << tag;
      }
    }
}

}  // namespace
}  // namespace lt::test
