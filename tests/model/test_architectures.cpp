// The architecture registry (model/arch/) and the BlockSpec: each architecture file resolves from its class
// name and model_type and gives its block; choices whose ops have not landed are refused at load with "not
// supported yet"; tensors are named by the architecture's table.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "model/arch/architecture.h"
#include "model/block_spec.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/weights.h"
#include "model_test_util.h"

namespace lt::model {
namespace {

using nlohmann::json;
using test::expect_error_mentions;

json config_for(const std::string& class_name, const std::string& model_type) {
  json j =
      json::parse(R"({"hidden_act": "silu", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5})");
  j["architectures"] = {class_name};
  j["model_type"] = model_type;
  return j;
}

TEST(Architectures, EveryRegisteredFileResolvesByClassAndModelType) {
  std::set<Architecture> seen;
  for (const ArchitectureDef* def : architectures()) {
    EXPECT_TRUE(seen.insert(def->arch).second) << def->class_name << " registered twice";
    EXPECT_EQ(&architecture_def(def->arch), def);
    const ModelConfig by_class = parse_model_config(config_for(def->class_name, def->model_type), "x.json");
    EXPECT_EQ(by_class.arch, def->arch);
    EXPECT_EQ(by_class.architecture_name, def->class_name);
    json only_type = config_for(def->class_name, def->model_type);
    only_type.erase("architectures");
    EXPECT_EQ(parse_model_config(only_type, "x.json").arch, def->arch);
    // Llama's block, with per-head q/k norms in Qwen3 and fused weights in Phi-3; Gemma 2's, Gemma 3's and
    // BLOOM's own.
    if (def->arch == Architecture::Gemma2) {
      EXPECT_EQ(describe_block(by_class.block),
                "rms(1+w) norm, geglu MLP, rope positions, sequential residual, embedding scale 8, logit "
                "soft-cap 30, post-norms, attention soft-cap 50, query_pre_attn_scalar 256");
      continue;
    }
    if (def->arch == Architecture::Gemma3) {
      EXPECT_EQ(describe_block(by_class.block),
                "rms(1+w) norm, geglu MLP, rope positions, sequential residual, per-head q/k norm, embedding "
                "scale 8, post-norms, query_pre_attn_scalar 256");
      continue;
    }
    if (def->arch == Architecture::Bloom) {
      EXPECT_EQ(
          describe_block(by_class.block),
          "layernorm+bias norm, gelu MLP, alibi positions, sequential residual, fused qkv, embedding norm");
      continue;
    }
    EXPECT_EQ(describe_block(by_class.block),
              std::string("rms norm, swiglu MLP, rope positions, sequential residual") +
                  (def->arch == Architecture::Qwen3 ? ", per-head q/k norm" : "") +
                  (def->arch == Architecture::Phi3 ? ", fused qkv, fused gate_up" : ""));
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(supported_class_names(),
            "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
            "Gemma2ForCausalLM, BloomForCausalLM, Gemma3ForCausalLM");
}

TEST(Architectures, ArchitectureFilesSetBiasesAndWindows) {
  json llama = config_for("LlamaForCausalLM", "llama");
  llama["attention_bias"] = true;
  const ModelConfig l = parse_model_config(llama, "x.json");
  EXPECT_TRUE(l.qkv_bias && l.o_bias && !l.mlp_bias);
  const ModelConfig q = parse_model_config(config_for("Qwen2ForCausalLM", "qwen2"), "x.json");
  EXPECT_TRUE(q.qkv_bias && !q.o_bias && !q.mlp_bias);
  EXPECT_FALSE(q.bos_token_id.has_value());
  json mistral = config_for("MistralForCausalLM", "mistral");
  mistral.erase("num_key_value_heads");  // MistralConfig's default: 8
  mistral["num_attention_heads"] = 8;
  const ModelConfig m = parse_model_config(mistral, "x.json");
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.layer_window, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(m.bos_token_id, 1);
}

// Phi3Config: fused qkv_proj / gate_up_proj (one weight each, one LoRA module each), no biases whatever the
// file says, eos 32000 by default, a window on every layer when sliding_window is set, partial_rotary_factor
// (top level or in the RoPE dict) as rotary dims; dropouts refused naming their fields; LongRoPE ("su" or
// "longrope") read with its factor lists (of rotary dims / 2 entries, else refused naming the field).
TEST(Architectures, Phi3FusedWeightsAndItsDefaults) {
  json j = config_for("Phi3ForCausalLM", "phi3");
  j["vocab_size"] = 32064;
  j["attention_bias"] = true;
  const ModelConfig c = parse_model_config(j, "x.json");
  EXPECT_TRUE(c.block.fused_qkv && c.block.fused_gate_up);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{32000});
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.layer_window, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(c.block.rotary_dim, 0);
  std::set<std::string> names;
  for (const WeightSpec& s : weight_specs(c)) names.insert(s.hf_name);
  EXPECT_TRUE(names.count("model.layers.1.self_attn.qkv_proj.weight"));
  EXPECT_TRUE(names.count("model.layers.1.mlp.gate_up_proj.weight"));
  EXPECT_FALSE(names.count("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_FALSE(names.count("model.layers.1.mlp.up_proj.weight"));
  EXPECT_EQ(lora_module_path(c, 1, LoraModule::V), "model.layers.1.self_attn.qkv_proj");
  EXPECT_EQ(lora_module_path(c, 1, LoraModule::Up), "model.layers.1.mlp.gate_up_proj");
  EXPECT_EQ(lora_out_features(c, LoraModule::Q), c.q_dim() + 2 * c.kv_dim());
  EXPECT_EQ(lora_out_features(c, LoraModule::Gate), 2 * c.intermediate_size);
  EXPECT_EQ(lora_target_list(c), "qkv_proj, o_proj, gate_up_proj, down_proj");

  j["sliding_window"] = 2047;
  j["partial_rotary_factor"] = 0.75;  // head_dim 16: 12 dims rotate
  const ModelConfig w = parse_model_config(j, "x.json");
  EXPECT_EQ(w.layer_window, (std::vector<int64_t>{2047, 2047}));
  EXPECT_EQ(w.block.rotary_dim, 12);
  EXPECT_EQ(w.rope_params(1, 1).rotary_dim, 12);
  json saved = model_config_json(w, "float32");
  EXPECT_EQ(saved["sliding_window"], 2047);
  EXPECT_EQ(saved["partial_rotary_factor"], 0.75);
  const ModelConfig again = parse_model_config(saved, "saved.json");
  EXPECT_EQ(again.block.rotary_dim, 12);
  EXPECT_EQ(again.layer_window, w.layer_window);
  EXPECT_TRUE(again.block.fused_qkv);

  json drop = config_for("Phi3ForCausalLM", "phi3");
  drop["resid_pdrop"] = 0.1;
  expect_error_mentions([&] { parse_model_config(drop, "m/config.json"); },
                        {"m/config.json", "'resid_pdrop'", "0.1"});
  json longrope = config_for("Phi3ForCausalLM", "phi3");
  longrope["rope_scaling"] = {{"type", "su"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}};
  expect_error_mentions([&] { parse_model_config(longrope, "m/config.json"); },
                        {"m/config.json", "'rope_scaling.short_factor'", "[1.0]", "list of"});
  const int64_t half = parse_model_config(config_for("Phi3ForCausalLM", "phi3"), "x.json").head_dim / 2;
  longrope["rope_scaling"]["short_factor"] = std::vector<double>(size_t(half), 1.0);
  longrope["rope_scaling"]["long_factor"] = std::vector<double>(size_t(half), 2.0);
  longrope["max_position_embeddings"] = 8192;
  longrope["original_max_position_embeddings"] = 1024;
  const ModelConfig lr = parse_model_config(longrope, "m/config.json");
  EXPECT_EQ(lr.rope_type, ops::RopeType::LongRope);
  EXPECT_EQ(lr.rope_original_max_position, 1024);
  EXPECT_DOUBLE_EQ(lr.rope_attention_factor, std::sqrt(1 + std::log(8.0) / std::log(1024.0)));
  EXPECT_EQ(lr.rope_params(1, 1).long_factor, std::vector<double>(size_t(half), 2.0));
  // A saved config reads back to the same LongRoPE (top-level original_max_position_embeddings included:
  // Phi3Config prefers it over the dict's).
  const json saved_lr = model_config_json(lr, "float32");
  EXPECT_EQ(saved_lr["original_max_position_embeddings"], 1024);
  const ModelConfig back = parse_model_config(saved_lr, "saved.json");
  EXPECT_EQ(back.rope_type, ops::RopeType::LongRope);
  EXPECT_EQ(back.rope_short_factor, lr.rope_short_factor);
  EXPECT_EQ(back.rope_long_factor, lr.rope_long_factor);
  EXPECT_EQ(back.rope_original_max_position, 1024);
  EXPECT_DOUBLE_EQ(back.rope_attention_factor, lr.rope_attention_factor);
  json llama = config_for("LlamaForCausalLM", "llama");
  llama["partial_rotary_factor"] = 0.5;
  expect_error_mentions([&] { parse_model_config(llama, "m/config.json"); },
                        {"'partial_rotary_factor'", "not supported for LlamaForCausalLM"});
}

// Qwen3Config: head_dim 128 when absent, attention_bias on q/k/v and o, q_norm / k_norm (HD) per layer,
// Qwen2's windows.
TEST(Architectures, Qwen3HasPerHeadNormsAndItsDefaults) {
  json j = config_for("Qwen3ForCausalLM", "qwen3");
  const ModelConfig plain = parse_model_config(j, "x.json");
  EXPECT_EQ(plain.head_dim, 128);
  EXPECT_TRUE(plain.block.qk_norm);
  EXPECT_FALSE(plain.qkv_bias || plain.o_bias || plain.mlp_bias);
  EXPECT_FALSE(plain.bos_token_id.has_value());
  j["attention_bias"] = true;
  j["head_dim"] = 8;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["max_window_layers"] = 1;
  const ModelConfig q = parse_model_config(j, "x.json");
  EXPECT_TRUE(q.qkv_bias && q.o_bias && !q.mlp_bias);
  EXPECT_EQ(q.layer_window, (std::vector<int64_t>{0, 16}));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const WeightSpec& s : weight_specs(q)) shapes[s.hf_name] = s.shape;
  for (const char* name :
       {"model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"})
    EXPECT_EQ(shapes[name], (std::vector<int64_t>{8})) << name;
  EXPECT_EQ(shapes.count("model.layers.0.self_attn.o_proj.bias"), 1u);
  // Llama has no such tensors.
  for (const WeightSpec& s :
       weight_specs(parse_model_config(config_for("LlamaForCausalLM", "llama"), "x.json")))
    EXPECT_EQ(s.hf_name.find("_norm"), std::string::npos) << s.hf_name;
}

TEST(Architectures, WeightNamesComeFromTheArchitectureTable) {
  const ModelConfig q = parse_model_config(config_for("Qwen2ForCausalLM", "qwen2"), "x.json");
  const std::vector<WeightSpec> specs = weight_specs(q);
  std::set<std::string> names;
  for (const WeightSpec& s : specs) names.insert(s.hf_name);
  const HfTensorNames& n = *architecture_def(q.arch).names;
  EXPECT_TRUE(names.count(n.embed));
  EXPECT_TRUE(names.count(std::string(n.layer_prefix) + "1." + n.proj[ProjId::Down] + ".weight"));
  EXPECT_TRUE(names.count(std::string(n.layer_prefix) + "0." + n.proj[ProjId::K] + ".bias"));
  EXPECT_TRUE(names.count(std::string(n.layer_prefix) + "0." + n.attn_norm + ".weight"));
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_proj.bias"));  // Qwen2: q/k/v biases
  EXPECT_FALSE(names.count("model.layers.0.self_attn.o_proj.bias"));
}

TEST(Architectures, ChoicesWithoutOpsAreRefusedAtLoad) {
  EXPECT_NO_THROW(check_block_supported(BlockSpec{}, 64, "m/config.json"));
  // LayerNorm with bias, the plain GELU MLP and ALiBi landed with BLOOM.
  EXPECT_NO_THROW(check_block_supported(
      {.norm = NormKind::LayerNormBias, .mlp = MlpKind::Gelu, .positions = PositionKind::Alibi}, 64,
      "m/config.json"));
  EXPECT_NO_THROW(check_block_supported({.rotary_dim = 32}, 64, "m/config.json"));  // partial rotary landed
  expect_error_mentions([] { check_block_supported({.rotary_dim = 33}, 64, "m/config.json"); },
                        {"rotary_dim 33", "even"});
  expect_error_mentions(
      [] { check_block_supported({.residual = ResidualKind::Parallel}, 64, "m/config.json"); },
      {"parallel", "not supported yet"});
  EXPECT_NO_THROW(check_block_supported({.fused_qkv = true, .fused_gate_up = true}, 64, "m/config.json"));
  // Gemma's choices landed: (1 + w) norms, GeGLU, embedding scale, soft-caps, post-norms.
  EXPECT_NO_THROW(check_block_supported({.norm = NormKind::RmsOnePlus,
                                         .mlp = MlpKind::GeGlu,
                                         .embedding_scale = 8.0,
                                         .logit_softcap = 30.0,
                                         .post_norms = true,
                                         .attention_softcap = 50.0,
                                         .query_pre_attn_scalar = 256.0},
                                        64, "m/config.json"));
  expect_error_mentions([] { check_block_supported({.logit_softcap = -1.0}, 64, "m/config.json"); },
                        {"m/config.json", "soft-cap -1"});
  // A GELU-gated Llama-family MLP (GeGLU) is named as such.
  json j = config_for("LlamaForCausalLM", "llama");
  j["hidden_act"] = "gelu_pytorch_tanh";
  expect_error_mentions([&] { parse_model_config(j, "m/config.json"); },
                        {"'hidden_act'", "gelu_pytorch_tanh", "GeGLU", "not supported yet"});
}

}  // namespace
}  // namespace lt::model
