// `leantune export` of a BLOOM adapter (tools/make_bloom_golden.py's peft_bloom): the merged checkpoint holds
// exactly the base's tensor names, its query_key_value is W + scaling * B A computed from the two files in
// their own (per-head interleaved) row order, and it gives PEFT's golden loss without the adapter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "cli/commands.h"
#include "core/arena.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

const std::string kGolden = "tests/model/golden/peft_bloom";

int leantune(std::vector<std::string> args, std::string* err) {
  args.insert(args.begin(), "leantune");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = cli::run_main(int(argv.size()), argv.data());
  ::testing::internal::GetCapturedStdout();
  *err = ::testing::internal::GetCapturedStderr();
  return code;
}

std::vector<double> doubles(const io::SafetensorsEntry& e) {
  std::vector<double> v(size_t(e.numel()));
  convert_elements(v.data(), DType::F64, e.data, *io::to_dtype(e.dtype), v.size());
  return v;
}

// The golden batch's loss with the checkpoint alone.
double golden_loss(const std::string& checkpoint) {
  auto golden = io::SafetensorsFile::open(test::source_path(kGolden + "/golden.safetensors"));
  const io::SafetensorsEntry* ids_e = golden->find("input_ids");
  const int64_t B = ids_e->shape[0], T = ids_e->shape[1];
  std::vector<int32_t> ids(size_t(B * T)), labels(size_t(B * T)), positions(size_t(B * T));
  for (int64_t i = 0; i < B * T; ++i) {
    int64_t a, b;
    std::memcpy(&a, ids_e->data + i * 8, 8);
    std::memcpy(&b, golden->find("labels")->data + i * 8, 8);
    ids[size_t(i)] = int32_t(a), labels[size_t(i)] = int32_t(b), positions[size_t(i)] = int32_t(i % T);
  }
  const model::Batch batch{.input_ids = Tensor(ids.data(), DType::I32, {B, T}),
                           .positions = Tensor(positions.data(), DType::I32, {B, T}),
                           .segments = Tensor(),
                           .labels = Tensor(labels.data(), DType::I32, {B, T})};
  const model::ModelConfig config = model::load_model_config(checkpoint);
  Arena arena(
      "bloom-export", HostMemory::instance(),
      model::weights_bytes(config, DType::F64) + model::Decoder::arena_bytes(config, DType::F64, B, T));
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  io::load_hf_weights(checkpoint, config, w);
  model::Decoder decoder(ctx, config, DType::F64, B, T, arena);
  return decoder.forward(w, batch, model::count_label_tokens(batch));
}

TEST(ExportBloom, MergedCheckpointKeepsHfNamesAndRowOrder) {
  const std::string base = test::source_path(kGolden + "/base"),
                    adapter = test::source_path(kGolden + "/adapter");
  test::TempDir tmp;
  std::string err;
  ASSERT_EQ(leantune({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir",
                      tmp.file("merged"), "--dtype", "float64"},
                     &err),
            0)
      << err;
  auto theirs = io::SafetensorsFile::open(base + "/model.safetensors");
  auto ours = io::SafetensorsFile::open(tmp.file("merged/model.safetensors"));
  std::set<std::string> base_names, merged_names;
  for (const io::SafetensorsEntry& e : theirs->entries()) base_names.insert(e.name);
  for (const io::SafetensorsEntry& e : ours->entries()) merged_names.insert(e.name);
  EXPECT_EQ(merged_names, base_names);

  // query_key_value of layer 1: W + (alpha / r) B A from the files as PEFT and transformers wrote them.
  auto lora = io::SafetensorsFile::open(adapter + "/adapter_model.safetensors");
  const std::string module = "transformer.h.1.self_attention.query_key_value";
  const io::SafetensorsEntry* a_e = lora->find("base_model.model." + module + ".lora_A.weight");
  const io::SafetensorsEntry* b_e = lora->find("base_model.model." + module + ".lora_B.weight");
  ASSERT_TRUE(a_e && b_e);
  const std::vector<double> w = doubles(*theirs->find(module + ".weight")), a = doubles(*a_e),
                            b = doubles(*b_e), got = doubles(*ours->find(module + ".weight"));
  const int64_t out = b_e->shape[0], r = b_e->shape[1], in = a_e->shape[1];
  const double scaling = 8.0 / 4.0;  // lora_alpha / r of the golden adapter
  std::vector<double> want(w);
  for (int64_t i = 0; i < out; ++i)
    for (int64_t j = 0; j < in; ++j) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k) s += b[size_t(i * r + k)] * a[size_t(k * in + j)];
      want[size_t(i * in + j)] += scaling * s;
    }
  EXPECT_LE(test::max_rel_diff(got, want), 1e-14);
  EXPECT_GT(test::max_rel_diff(got, w), 1e-3);  // the adapter changed it

  double peft_loss;
  std::memcpy(
      &peft_loss,
      io::SafetensorsFile::open(test::source_path(kGolden + "/golden.safetensors"))->find("loss")->data, 8);
  EXPECT_NEAR(golden_loss(tmp.file("merged")), peft_loss, 1e-12 * peft_loss);
}

}  // namespace
}  // namespace lt
