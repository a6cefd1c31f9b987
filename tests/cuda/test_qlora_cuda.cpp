// QLoRA on the GPU against the CPU: the projections dequantized on the GPU (ops/cuda/quant4.cu, through
// model/nf4_weights.h's scratch) are the CPU's bytes in every compute dtype (one f32 product, one
// rounding), and `train --device cuda` with adapter qlora gives per-step losses within GPU.md's tolerances
// of the CPU float64 QLoRA run (which tests/train/test_qlora_golden.cpp ties to bitsandbytes + PEFT),
// whole-sequence and chunked, with and without double quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

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

}  // namespace
}  // namespace lt::test
