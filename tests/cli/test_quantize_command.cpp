// `leantune quantize`, `dequantize`, `info` of a 4-bit checkpoint, `export --merge` onto a 4-bit base, and
// the refusal of QLoRA training until the decoder takes NF4 weights. The bytes themselves are proven against
// bitsandbytes in tests/io (test_quant4_golden.cpp, test_bnb4_checkpoint.cpp); here the commands wire them.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "cli/cli_test_util.h"
#include "io/bnb4_checkpoint.h"
#include "io/safetensors.h"
#include "support/test_support.h"
#include "train/train_test_util.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

const std::string kBase =
    "tests/model/golden/peft_llama/base";  // float32 Llama with a PEFT adapter beside it

// The bytes of every tensor of a checkpoint directory, by name.
std::map<std::string, std::string> tensor_bytes(const std::string& dir) {
  auto reader = io::CheckpointReader::open(dir);
  std::map<std::string, std::string> out;
  for (const std::string& name : reader->names()) {
    const io::SafetensorsEntry& e = reader->entry(name);
    out[name] = std::string(reinterpret_cast<const char*>(e.data), size_t(e.end - e.begin));
  }
  return out;
}

TEST(QuantizeCommand, WritesA4BitCheckpointThatInfoAndDequantizeRead) {
  test::TempDir tmp;
  const std::string base = test::source_path(kBase), q = tmp.file("q"), d = tmp.file("d");
  test::CliResult r = test::run_cli({"quantize", base, q, "--quant_type", "nf4", "--double_quant"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("to nf4 (double quant) from float32"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("quantize: reading " + base + "\nquantize: quantizing the projections of "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("quantize: writing " + q + "\n"), std::string::npos) << r.err;
  const std::optional<io::Bnb4Config> quant = io::read_bnb4_quantization(q);
  ASSERT_TRUE(quant.has_value());
  EXPECT_EQ(quant->quant_type, ops::Quant4Type::NF4);
  EXPECT_TRUE(quant->double_quant);
  EXPECT_EQ(quant->compute_dtype, DType::F32);

  r = test::run_cli({"info", q});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bitsandbytes 4-bit checkpoint: nf4 with double quant"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(this checkpoint)"), std::string::npos) << r.out;

  r = test::run_cli({"dequantize", q, d});
  ASSERT_EQ(r.code, 0) << r.err;
  // The dequantized file holds bitsandbytes' values (code * absmax): quantizing it again gives the same
  // codes.
  const std::string q2 = tmp.file("q2");
  ASSERT_EQ(test::run_cli({"quantize", d, q2, "--double_quant"}).code, 0);
  const auto a = tensor_bytes(q), b = tensor_bytes(q2);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) {
    if (name.ends_with("_proj.weight")) {
      EXPECT_EQ(bytes, b.at(name)) << name;
    }
  }
}

TEST(QuantizeCommand, InfoShows4BitSizesOfAPlainModel) {
  test::CliResult r = test::run_cli({"info", test::source_path(kBase), "--bits", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4-bit (bitsandbytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with double quant"), std::string::npos) << r.out;
  r = test::run_cli({"info", test::source_path(kBase), "--bits", "8"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--bits 8"), std::string::npos) << r.err;
}

TEST(QuantizeCommand, MergeOntoA4BitBaseGoesIntoTheDequantizedWeightsAndSaysSo) {
  test::TempDir tmp;
  const std::string base = test::source_path(kBase),
                    adapter = test::source_path("tests/model/golden/peft_llama/adapter");
  const std::string q = tmp.file("q"), d = tmp.file("d");
  ASSERT_EQ(test::run_cli({"quantize", base, q, "--quant_type", "fp4"}).code, 0);
  ASSERT_EQ(test::run_cli({"dequantize", q, d, "--dtype", "float32"}).code, 0);

  test::CliResult from4 = test::run_cli(
      {"export", "--base_model", q, "--adapter", adapter, "--merge", "--output_dir", tmp.file("m4")});
  ASSERT_EQ(from4.code, 0) << from4.err;
  EXPECT_NE(from4.out.find("DEQUANTIZED fp4 weights"), std::string::npos) << from4.out;
  test::CliResult from16 = test::run_cli(
      {"export", "--base_model", d, "--adapter", adapter, "--merge", "--output_dir", tmp.file("m16")});
  ASSERT_EQ(from16.code, 0) << from16.err;
  EXPECT_NE(from16.out.find("merged into the float32 weights"), std::string::npos) << from16.out;
  // Merging onto the 4-bit base is merging onto its dequantized weights: the same bytes.
  EXPECT_EQ(tensor_bytes(tmp.file("m4")), tensor_bytes(tmp.file("m16")));
  // The merged checkpoint is a plain one (transformers loads it without bitsandbytes).
  EXPECT_FALSE(io::read_bnb4_quantization(tmp.file("m4")).has_value());
}

TEST(QuantizeCommand, BadInvocationsFailWithOneMessage) {
  test::TempDir tmp;
  const std::string base = test::source_path(kBase);
  test::CliResult r = test::run_cli({"quantize", base, tmp.file("q"), "--quant_type", "int4"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--quant_type 'int4'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.file("q")));
  r = test::run_cli({"quantize", base, base});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("quantize: output_dir"), std::string::npos) << r.err;
  r = test::run_cli({"dequantize", base, tmp.file("d")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("not a 4-bit checkpoint"), std::string::npos) << r.err;
  ASSERT_EQ(test::run_cli({"quantize", base, tmp.file("q")}).code, 0);
  r = test::run_cli({"quantize", tmp.file("q"), tmp.file("qq")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("already a 4-bit checkpoint"), std::string::npos) << r.err;
}

// adapter qlora, bits 4 and load_in_4bit each train LoRA over 4-bit projections (the equalities with
// bitsandbytes + PEFT and with LoRA over the dequantized weights are tests/train/test_qlora_*.cpp); the run
// says so, and QLoRA settings without finetune lora, or a compute dtype other than the run's, are refused
// naming the key.
TEST(QuantizeCommand, QloraTrainingRunsAndSaysSo) {
  test::TempDir tmp;
  test::write_tiny_model_dir(tmp.file("model"));
  test::write_tiny_dataset(tmp.file("data.jsonl"), 12);
  auto train = [&](const std::string& out, const std::vector<std::string>& args) {
    std::vector<std::string> cmd = {"train",
                                    "--base_model",
                                    tmp.file("model"),
                                    "--data_path",
                                    tmp.file("data.jsonl"),
                                    "--output_dir",
                                    tmp.file(out),
                                    "--random_init",
                                    "--device",
                                    "cpu",
                                    "--precision",
                                    "fp32",
                                    "--val_set_size",
                                    "4",
                                    "--max_steps",
                                    "2"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return test::run_cli(cmd);
  };
  int run = 0;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--finetune", "lora", "--adapter", "qlora"},
           {"--finetune", "lora", "--bits", "4", "--bnb_4bit_quant_type", "fp4"},
           {"--finetune", "lora", "--load_in_4bit", "true", "--bnb_4bit_use_double_quant", "false"}}) {
    const std::string out = "out" + std::to_string(run++);
    std::vector<std::string> lora = args;
    lora.insert(lora.end(), {"--lora_target_modules", "q_proj,v_proj,down_proj"});
    test::CliResult r = train(out, lora);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("QLoRA: 14 projections quantized to"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(tmp.file(out + "/adapter_model.safetensors")));
  }
  for (const auto& [args, key] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--finetune", "full", "--bits", "4"}, "'bits'"},
           {{"--finetune", "full", "--load_in_4bit", "true"}, "'load_in_4bit'"},
           {{"--finetune", "lora", "--adapter", "qlora", "--bnb_4bit_compute_dtype", "bfloat16"},
            "'bnb_4bit_compute_dtype'"},
           {{"--finetune", "lora", "--adapter", "qlora", "--bnb_4bit_quant_type", "int4"},
            "bnb_4bit_quant_type"}}) {
    test::CliResult r = train("refused", args);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp.file("refused/metrics.jsonl")));
  }
}

}  // namespace
}  // namespace lt
