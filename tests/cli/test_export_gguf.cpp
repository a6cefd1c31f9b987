// `leantune export --gguf TYPE`: the tiny real Llama (../shared stories260K-hf, SentencePiece tokenizer) as
// a GGUF file byte-identical to the one gguf-py's GGUFWriter writes under llama.cpp's convert_hf_to_gguf
// conventions (tools/make_gguf_golden.py: tensor names, the Q/K RoPE permutation, f32 norms, the
// SentencePiece vocabulary, the hyperparameters), for f32, f16, bf16 and q8_0; a mismatch names the tensor.
// Qwen2 and Qwen3 with a BPE tokenizer.json likewise (tools/make_gguf_qwen_golden.py), Phi-3
// (tools/make_gguf_phi3_golden.py), Llama 3, Gemma 2, Gemma 3 and BLOOM; with --adapter, the merged model.
// Bad arguments, and models llama.cpp would run differently than trained, are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace lt::cli {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string fnv1a64(std::string_view data) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

size_t padded(size_t n) {
  return (n + 31) / 32 * 32;
}

// The bytes of a tensor of `type` and `shape` (q8_0: 34 bytes per 32 elements).
size_t tensor_bytes(const std::string& type, const nlohmann::json& shape) {
  size_t count = 1;
  for (const auto& d : shape) count *= d.get<size_t>();
  if (type == "f32") return count * 4;
  if (type == "q8_0") return count / 32 * 34;
  return count * 2;
}

// Exports `model` as each type of `files` (the golden's per-type entries) and compares the bytes; a mismatch
// names the tensor.
void expect_equal_to_gguf_py(const std::string& model, const nlohmann::json& files,
                             const test::TempDir& dir) {
  for (const auto& [type, expected] : files.items()) {
    SCOPED_TRACE(type);
    const std::string out = dir.file(fs::path(model).filename().string() + "-" + type);
    test::CliResult r = test::run_cli({"export", "--base_model", model, "--gguf", type, "--output_dir", out});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string path = out + "/model-" + type + ".gguf";
    ASSERT_TRUE(fs::exists(path)) << r.out;
    const std::string bytes = read_bytes(path);
    EXPECT_EQ(bytes.size(), expected["bytes"].get<size_t>());
    if (fnv1a64(bytes) == expected["fnv1a64"].get<std::string>()) continue;
    // Which part differs: the data section is the file's tail, tensors back to back, each padded to 32.
    size_t data_bytes = 0;
    for (const auto& t : expected["tensors"]) data_bytes += padded(tensor_bytes(t["type"], t["shape"]));
    ASSERT_LE(data_bytes, bytes.size());
    size_t offset = bytes.size() - data_bytes;
    ADD_FAILURE() << "the file differs from gguf-py's; header+metadata hash "
                  << fnv1a64(std::string_view(bytes).substr(0, offset));
    for (const auto& t : expected["tensors"]) {
      const size_t n = tensor_bytes(t["type"], t["shape"]);
      EXPECT_EQ(fnv1a64(std::string_view(bytes).substr(offset, n)), t["fnv1a64"].get<std::string>())
          << t["name"].get<std::string>();
      offset += padded(n);
    }
  }
}

TEST(ExportGguf, EqualsGgufPyUnderTheConverterConventions) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_stories260K.json")));
  test::TempDir dir;
  expect_equal_to_gguf_py(model, golden["files"], dir);
}

// The same Llama with what an HF Llama 2 / Mistral repo ships beside tokenizer.model (tests/cli/golden/
// gguf_llama_added): tokenizer_config.json's added_tokens_decoder (special, special-looking and user-defined
// tokens, one past vocab_size), chat_template, add_bos_token and add_prefix_space; added_tokens.json; and a
// tokenizer.json the converter does not read. Byte-identical to gguf-py under _create_vocab_sentencepiece.
TEST(ExportGguf, SentencePieceWithAnHfReposAddedTokensEqualsGgufPy) {
  LT_REQUIRE_SHARED(base, "data/models/stories260K-hf");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_stories260K.json")));
  const nlohmann::json& entry = golden["with_added_tokens"];
  test::TempDir dir;
  fs::create_directories(dir.file("with_added"));
  const std::string model = dir.file("with_added/stories260K-hf");  // general.name: the dir's name
  fs::copy(base, model);
  for (const auto& f : fs::directory_iterator(test::source_path(entry["overlay"].get<std::string>())))
    fs::copy_file(f.path(), model + "/" + f.path().filename().string());
  expect_equal_to_gguf_py(model, entry["files"], dir);
}

// Qwen2 (q/k/v biases, tied embeddings) and Qwen3 (q/k norms, head_dim with H * HD != D, an lm_head) with a
// GPT-2-style BPE tokenizer.json: byte-identical to gguf-py under the converter's Qwen2Model / Qwen3Model
// conventions, whose f32 tensors tools/make_gguf_qwen_golden.py checked equal to the HF checkpoint with
// gguf's GGUFReader. The fixtures lack tokenizer.json (a ../shared file): it is put beside a copy.
TEST(ExportGguf, QwenFamiliesEqualGgufPyWithTheirBpeVocabulary) {
  LT_REQUIRE_SHARED(tokenizer, "data/tokenizers/tiny/qwen_style_tokenizer.json");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_qwen.json")));
  ASSERT_EQ(golden["models"].size(), 2u);
  test::TempDir dir;
  for (const auto& [arch, entry] : golden["models"].items()) {
    SCOPED_TRACE(arch);
    const std::string fixture = test::source_path(entry["fixture"].get<std::string>());
    const std::string model =
        dir.file(fs::path(fixture).filename().string());  // general.name: the dir's name
    fs::copy(fixture, model);
    fs::copy_file(tokenizer, model + "/tokenizer.json");
    expect_equal_to_gguf_py(model, entry["files"], dir);
  }
}

// Phi-3 (fused qkv_proj / gate_up_proj kept fused, partial rotary, a sliding window) with its SentencePiece
// vocabulary and Phi-3-style added tokens: byte-identical to gguf-py under the converter's Phi3MiniModel
// conventions, whose f32 tensors tools/make_gguf_phi3_golden.py checked equal to the HF checkpoint with
// gguf's GGUFReader. The fixture lacks tokenizer.model (a ../shared file): it is put beside a copy.
TEST(ExportGguf, Phi3EqualsGgufPyWithItsFusedWeightsAndAddedTokens) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_phi3.json")));
  test::TempDir dir;
  const std::string fixture = test::source_path(golden["fixture"].get<std::string>());
  const std::string model = dir.file(fs::path(fixture).filename().string());  // general.name: the dir's name
  fs::copy(fixture, model);
  fs::copy_file(spm, model + "/tokenizer.model");
  expect_equal_to_gguf_py(model, golden["files"], dir);
}

// Llama 3 (RoPE scaling as llama.cpp's rope_freqs tensor, H * HD != D, tied embeddings) with Llama 3's BPE
// tokenizer.json (pre llama-bpe, added special tokens): byte-identical to gguf-py under the converter's
// LlamaModel conventions (tools/make_gguf_llama3_golden.py, which computes rope_freqs with the converter's
// own float32 torch code and reads the f32 file back with GGUFReader). The fixture's tokenizer.json is
// ../shared's tiny Llama-3-style one with the golden's added tokens appended, as the script does.
TEST(ExportGguf, Llama3EqualsGgufPyWithRopeFreqsAndItsBpeVocabulary) {
  LT_REQUIRE_SHARED(tokenizer, "data/tokenizers/tiny/llama3_style_tokenizer.json");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_llama3.json")));
  test::TempDir dir;
  const std::string fixture = test::source_path(golden["fixture"].get<std::string>());
  const std::string model = dir.file(fs::path(fixture).filename().string());  // general.name: the dir's name
  fs::copy(fixture, model);
  nlohmann::json tj = nlohmann::json::parse(read_bytes(tokenizer));
  tj["added_tokens"] = nlohmann::json::array();
  for (size_t i = 0; i < golden["added_tokens"].size(); ++i)
    tj["added_tokens"].push_back({{"id", 2000 + i},
                                  {"content", golden["added_tokens"][i]},
                                  {"single_word", false},
                                  {"lstrip", false},
                                  {"rstrip", false},
                                  {"normalized", false},
                                  {"special", true}});
  std::ofstream(model + "/tokenizer.json") << tj.dump();
  expect_equal_to_gguf_py(model, golden["files"], dir);
}

// Copies the fixture `golden` names into `dir` (under its own name: general.name is the directory's name).
std::string copy_fixture(const nlohmann::json& golden, const test::TempDir& dir) {
  const std::string fixture = test::source_path(golden["fixture"].get<std::string>());
  const std::string model = dir.file(fs::path(fixture).filename().string());
  fs::copy(fixture, model);
  return model;
}

// Each case's keys set over a copy of the golden's fixture (with the tokenizer.model `spm` beside it):
// export --gguf fails naming the case's message, and leaves no file.
void expect_config_patches_refused(const nlohmann::json& golden, const std::string& spm,
                                   const std::vector<std::pair<nlohmann::json, std::string>>& cases) {
  for (const auto& [patch, message] : cases) {
    SCOPED_TRACE(patch.dump());
    test::TempDir dir;
    const std::string model = copy_fixture(golden, dir);
    fs::copy_file(spm, model + "/tokenizer.model");
    nlohmann::json config = nlohmann::json::parse(read_bytes(model + "/config.json"));
    for (const auto& [key, value] : patch.items()) config[key] = value;  // null kept (merge_patch drops it)
    std::ofstream(model + "/config.json") << config.dump();
    const test::CliResult r =
        test::run_cli({"export", "--base_model", model, "--gguf", "f32", "--output_dir", dir.file("out")});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("out") + "/model-f32.gguf"));
  }
}

// Phi-3 with LongRoPE is refused by name (llama.cpp takes its factors as rope_factors_short/long tensors,
// not written yet), and no file is left behind.
TEST(ExportGguf, Phi3LongropeIsRefused) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_phi3.json")));
  const nlohmann::json longrope = {{"rope_type", "longrope"},
                                   {"rope_theta", 10000.0},
                                   {"partial_rotary_factor", 0.5},
                                   {"short_factor", {1.0, 1.5}},
                                   {"long_factor", {2.0, 4.0}}};  // head_dim 8, 4 rotary dims
  expect_config_patches_refused(golden, spm, {{{{"rope_parameters", longrope}}, "RoPE type 'longrope'"}});
}

// Gemma 2 (sandwich norms, H * HD != D, soft-caps, a sliding window, tied embeddings) with its SentencePiece
// vocabulary and Gemma-style added tokens: byte-identical to gguf-py under the converter's Gemma2Model
// conventions (every RMSNorm weight + 1, no rope.freq_base, add_space_prefix false), whose tensors
// tools/make_gguf_gemma2_golden.py checked against the HF checkpoint with gguf's GGUFReader for every type
// (q8_0 within its quantization error). The fixture lacks tokenizer.model (a ../shared file): it is put
// beside a copy.
TEST(ExportGguf, Gemma2EqualsGgufPyWithItsNormsShiftedByOne) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_gemma2.json")));
  test::TempDir dir;
  const std::string model = copy_fixture(golden, dir);
  fs::copy_file(spm, model + "/tokenizer.model");
  expect_equal_to_gguf_py(model, golden["files"], dir);
}

// What llama.cpp's gemma2 would run differently than the model was trained is refused by name before the
// weights are read (the untied config has no lm_head in this checkpoint), and no file is left behind.
TEST(ExportGguf, Gemma2ThatLlamaCppWouldRunDifferentlyIsRefused) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_gemma2.json")));
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"query_pre_attn_scalar", 12}}, "query_pre_attn_scalar 12"},
      {{{"tie_word_embeddings", false}}, "tie_word_embeddings false"},
      {{{"attn_logit_softcapping", nullptr}}, "null attn_logit_softcapping"},
      {{{"layer_types", {"full_attention", "sliding_attention"}}}, "layer 0 has sliding window 0"},
      {{{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}}}, "rope_theta 500000"},
  };
  expect_config_patches_refused(golden, spm, cases);
}

// Gemma 3 text (7 layers: llama.cpp's five sliding then one global, q_norm / k_norm, H * HD != D, global
// rope_theta 1e6 with linear scaling, no soft-caps, tied embeddings, bfloat16) with its SentencePiece
// vocabulary and Gemma-style added tokens: byte-identical to gguf-py under the converter's Gemma3Model
// conventions (every RMSNorm weight + 1, q_norm and k_norm too; rope.freq_base and rope.scaling of the
// global layers; add_space_prefix false), whose tensors tools/make_gguf_gemma3_golden.py checked against the
// HF checkpoint with gguf's GGUFReader for every type (q8_0 within its quantization error).
TEST(ExportGguf, Gemma3EqualsGgufPyWithItsNormsShiftedByOne) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_gemma3.json")));
  test::TempDir dir;
  const std::string model = copy_fixture(golden, dir);
  fs::copy_file(spm, model + "/tokenizer.model");
  expect_equal_to_gguf_py(model, golden["files"], dir);
}

// What llama.cpp's gemma3 hard-codes otherwise (the sliding pattern, the local RoPE base, no soft-caps, the
// query scaling, no biases, a tied head) is refused by name before the weights are read (this checkpoint has
// neither biases nor lm_head), and no file is left behind.
TEST(ExportGguf, Gemma3ThatLlamaCppWouldRunDifferentlyIsRefused) {
  LT_REQUIRE_SHARED(spm, "data/models/stories260K-hf/tokenizer.model");
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_gemma3.json")));
  nlohmann::json all_sliding = nlohmann::json::array();
  for (int l = 0; l < 7; ++l) all_sliding.push_back("sliding_attention");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"query_pre_attn_scalar", 12}}, "query_pre_attn_scalar 12"},
      {{{"tie_word_embeddings", false}}, "tie_word_embeddings false"},
      {{{"attention_bias", true}}, "attention_bias true"},
      {{{"final_logit_softcapping", 30.0}}, "final_logit_softcapping 30"},
      {{{"attn_logit_softcapping", 50.0}}, "attn_logit_softcapping 50"},
      {{{"layer_types", all_sliding}}, "layer 5 has sliding window 64"},
      {{{"rope_parameters",
         {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}}}},
       "rope_local_base_freq 20000"},
  };
  expect_config_patches_refused(golden, spm, cases);
}

// BLOOM (ALiBi, LayerNorms with biases, the fused query_key_value, tied embeddings, no seq_length) with a
// BLOOM-style byte-level BPE tokenizer.json: byte-identical to gguf-py under the converter's BloomModel
// conventions (query_key_value re-ordered from the per-head interleave to q, k, v blocks; context_length =
// n_embed without seq_length; pre "bloom"), whose tensors tools/make_gguf_bloom_golden.py checked against the
// HF checkpoint with gguf's GGUFReader for every type (q8_0 within its quantization error).
TEST(ExportGguf, BloomEqualsGgufPyWithItsQkvReorderedAndItsBpeVocabulary) {
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_bloom.json")));
  test::TempDir dir;
  expect_equal_to_gguf_py(copy_fixture(golden, dir), golden["files"], dir);
}

// A BLOOM whose tokenizer.json is not BLOOM's (here Qwen's pre-tokenizer regex) is refused by name: llama.cpp
// would split its text with BLOOM's regex.
TEST(ExportGguf, BloomWithAnotherPreTokenizerIsRefused) {
  const nlohmann::json golden =
      nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_bloom.json")));
  test::TempDir dir;
  const std::string model = copy_fixture(golden, dir);
  nlohmann::json tj = nlohmann::json::parse(read_bytes(model + "/tokenizer.json"));
  tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{N}| ?\\p{L}+";
  std::ofstream(model + "/tokenizer.json") << tj.dump();
  const test::CliResult r =
      test::run_cli({"export", "--base_model", model, "--gguf", "q8_0", "--output_dir", dir.file("out")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("is not BLOOM's"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("out") + "/model-q8_0.gguf"));
}

// `export --adapter --gguf` of the PEFT golden `family` (tests/model/golden/peft_FAMILY/{base,adapter}, the
// base copied to DIR/base/FAMILY and given a tokenizer by `prepare`) equals, byte for byte, the GGUF of the
// checkpoint `export --merge` writes, and differs from the base's GGUF.
void expect_adapter_gguf_equals_merged_gguf(const std::string& family,
                                            const std::function<void(const std::string&)>& prepare) {
  SCOPED_TRACE(family);
  const std::string golden = test::source_path("tests/model/golden/peft_" + family);
  test::TempDir dir;
  fs::create_directories(dir.file("base"));
  fs::create_directories(dir.file("merged"));
  const std::string base = dir.file("base/" + family);  // general.name: the directory's name, in both
  fs::copy(golden + "/base", base);
  prepare(base);
  auto run = [](const std::vector<std::string>& args) {
    const test::CliResult r = test::run_cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  const std::string adapter = golden + "/adapter", merged = dir.file("merged/" + family);
  run({"export", "--base_model", base, "--adapter", adapter, "--gguf", "f32", "--output_dir", dir.file("g")});
  run({"export", "--base_model", base, "--adapter", adapter, "--merge", "--output_dir", merged});
  run({"export", "--base_model", merged, "--gguf", "f32", "--output_dir", dir.file("gm")});
  run({"export", "--base_model", base, "--gguf", "f32", "--output_dir", dir.file("gb")});
  const std::string with_adapter = read_bytes(dir.file("g") + "/model-f32.gguf");
  const std::string of_base = read_bytes(dir.file("gb") + "/model-f32.gguf");
  ASSERT_FALSE(with_adapter.empty());
  EXPECT_TRUE(with_adapter == read_bytes(dir.file("gm") + "/model-f32.gguf"));
  EXPECT_EQ(with_adapter.size(), of_base.size());
  EXPECT_FALSE(with_adapter == of_base);
}

// With --adapter the GGUF holds the merged model (whose checkpoint test_export_bloom.cpp and the PEFT merge
// tests check against W + scaling B A): BLOOM's LoRA on the fused, per-head interleaved query_key_value and
// its other projections; Gemma 2's and Gemma 3's on every projection, with the norms shifted by one after
// the merge. The bases get a tokenizer of at most their 80 ids: BLOOM the fixture's tokenizer.json cut to
// them, Gemma 2 and 3 a 72-piece tokenizer.model (tools/make_gguf_gemma2_golden.py). BLOOM's base gets a
// seq_length (without one the converter writes n_embed as the context length, while a saved config.json
// names BLOOM's default 2048); Gemma's query_pre_attn_scalar is set to its head_dim, as llama.cpp assumes,
// and Gemma 3's two layers both slide with the local base 10000 (llama.cpp's pattern and base).
TEST(ExportGguf, WithAnAdapterEqualsTheGgufOfTheMergedCheckpoint) {
  expect_adapter_gguf_equals_merged_gguf("bloom", [](const std::string& base) {
    nlohmann::json tj =
        nlohmann::json::parse(read_bytes(test::source_path("tests/cli/golden/gguf_bloom/tokenizer.json")));
    nlohmann::json vocab = nlohmann::json::object();
    for (const auto& [token, id] : tj["model"]["vocab"].items())
      if (id.get<int64_t>() < 80) vocab[token] = id;
    tj["model"]["vocab"] = vocab;
    tj["model"]["merges"] = nlohmann::json::array();
    std::ofstream(base + "/tokenizer.json") << tj.dump();
    nlohmann::json config = nlohmann::json::parse(read_bytes(base + "/config.json"));
    ASSERT_EQ(config["vocab_size"], 80);
    config["seq_length"] = 64;
    std::ofstream(base + "/config.json") << config.dump();
  });
  expect_adapter_gguf_equals_merged_gguf("gemma2", [](const std::string& base) {
    fs::copy_file(test::source_path("tests/cli/golden/gguf_gemma2_small_tokenizer.model"),
                  base + "/tokenizer.model");
    nlohmann::json config = nlohmann::json::parse(read_bytes(base + "/config.json"));
    ASSERT_EQ(config["vocab_size"], 80);
    config["query_pre_attn_scalar"] = config["head_dim"];
    std::ofstream(base + "/config.json") << config.dump();
  });
  expect_adapter_gguf_equals_merged_gguf("gemma3", [](const std::string& base) {
    fs::copy_file(test::source_path("tests/cli/golden/gguf_gemma2_small_tokenizer.model"),
                  base + "/tokenizer.model");
    nlohmann::json config = nlohmann::json::parse(read_bytes(base + "/config.json"));
    ASSERT_EQ(config["vocab_size"], 80);
    config["query_pre_attn_scalar"] = config["head_dim"];
    config["layer_types"] = {"sliding_attention", "sliding_attention"};
    config["rope_parameters"]["sliding_attention"]["rope_theta"] = 10000.0;
    std::ofstream(base + "/config.json") << config.dump();
  });
}

TEST(ExportGguf, DefaultTypeIsTheModelsSixteenBitOneAndBadArgumentsAreRefused) {
  LT_REQUIRE_SHARED(model, "data/models/stories260K-hf");
  test::TempDir dir;
  // A float32 checkpoint: the converter's default outtype, f16.
  test::CliResult r =
      test::run_cli({"export", "--base_model", model, "--gguf", "--output_dir", dir.file("d")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir.file("d") + "/model-f16.gguf"));

  r = test::run_cli({"export", "--base_model", model, "--gguf", "q4_k", "--output_dir", dir.file("e")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--gguf 'q4_k', expected f32, f16, bf16 or q8_0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("e") + "/model-q4_k.gguf"));

  r = test::run_cli({"export", "--base_model", model, "--output_dir", dir.file("f")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--gguf"), std::string::npos) << r.err;

  // What is not written yet is refused by name (this test Llama has no tokenizer).
  r = test::run_cli({"export", "--base_model", test::source_path("tests/model/golden/peft_llama/base"),
                     "--gguf", "f32", "--output_dir", dir.file("g")});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("not written to GGUF yet"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt::cli
