#!/usr/bin/env python3
"""Golden GGUF files of a tiny Gemma 3 (text) for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixture (tests/cli/golden/gguf_gemma3/: config.json, model.safetensors, tokenizer_config.json), made with
transformers: a Gemma3ForCausalLM of 7 layers (llama.cpp's sliding-window pattern: layers 0-4 and 6 slide,
layer 5 is global), GQA 2/1, head_dim 16 with H * HD != D, q_norm / k_norm, query_pre_attn_scalar = head_dim as
llama.cpp assumes, no soft-caps, global rope_theta 1e6 with linear scaling (factor 8) and the local base 10000,
tied embeddings; every parameter drawn at random (norm weights included, so that the converter's +1 shows) and
saved in bfloat16 (the converter widens it to float32 before the +1; the file stays small), over the
stories260K SentencePiece tokenizer.model (512 pieces; the test puts ../shared's file beside a copy of the
fixture) with vocab_size 520 and the Gemma-style added tokens of tools/make_gguf_gemma2_golden.py.

For each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's convert_hf_to_gguf.py
conventions give (Gemma3Model, text part):
  - general.architecture gemma3 and the gemma3.* keys Gemma3Model.set_gguf_parameters writes (context_length,
    embedding_length, block_count, feed_forward_length, attention.head_count, layer_norm_rms_epsilon,
    key_length, value_length, rope.freq_base of the global layers, attention.sliding_window, head_count_kv,
    and rope.scaling.type linear / rope.scaling.factor when the global layers are scaled); the global
    rope_theta and scaling are read from transformers v5's rope_parameters["full_attention"] (the v4 keys
    rope_theta / rope_scaling the converter reads);
  - tensors under gguf-py's own GEMMA3 name map (q_norm -> attn_q_norm, k_norm -> attn_k_norm,
    post_attention_layernorm -> post_attention_norm, pre_feedforward_layernorm -> ffn_norm,
    post_feedforward_layernorm -> post_ffw_norm), every "*norm.weight" plus 1 in float32, q_norm and k_norm
    included (Gemma3Model.modify_tensors), token_embd cut to the vocabulary's length (here all of it), Q/K not
    permuted, no output.weight (tied); 1-D tensors f32;
  - the vocabulary as _set_vocab_sentencepiece builds it, SpecialVocab's ids and tokenizer_config.json
    fields, then add_space_prefix false.
Every tensor of every type, read back with gguf.GGUFReader, is checked against the checkpoint's (after the
+1): f32 equal, f16 / bf16 equal to the rounded values, q8_0 within its quantization error.
tests/cli/golden/gguf_gemma3.json records per type the file's size and FNV-1a 64 hash and per tensor its type,
shape and data hash.

Usage: python3 tools/make_gguf_gemma3_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import json
import os
import tempfile

import gguf
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from make_gguf_golden import TYPES, add_special_vocab, add_tensors_and_close, check_tensors_against, describe
from make_gguf_golden import sentencepiece_vocab
from make_gguf_gemma2_golden import gemma_tensors, write_tokenizer_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
LAYERS = 7
CONFIG = Gemma3TextConfig(vocab_size=520, hidden_size=32, intermediate_size=32, num_hidden_layers=LAYERS,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                          max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=64,
                          layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                       for i in range(LAYERS)],
                          attn_logit_softcapping=None, final_logit_softcapping=None, tie_word_embeddings=True,
                          bos_token_id=1, eos_token_id=[2, 514], pad_token_id=512,
                          rope_parameters={
                              "full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                              "sliding_attention": dict(rope_type="default", rope_theta=10000.0)})


def make_fixture():
    torch.manual_seed(31)
    model = Gemma3ForCausalLM(CONFIG).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    model = model.to(torch.bfloat16)
    directory = os.path.join(OUT, "gguf_gemma3")
    model.save_pretrained(directory)
    write_tokenizer_config(directory)
    return directory


# The checkpoint's tensors in the order leantune writes them.
LAYER_TENSORS = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                 "self_attn.o_proj.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
                 "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                 "post_feedforward_layernorm.weight")


def tensors_of(model_dir, cfg, n_tokens):
    """Gemma3Model.modify_tensors: token_embd cut to the vocabulary, every *norm.weight + 1 (q_norm and k_norm
    too), names by gguf-py's map; no lm_head in a tied checkpoint."""
    return gemma_tensors(model_dir, cfg, gguf.MODEL_ARCH.GEMMA3, LAYER_TENSORS, n_tokens)


def global_rope(cfg):
    """The global layers' (rope_theta, linear factor or None) as the converter's hparams give them."""
    full = cfg["rope_parameters"]["full_attention"]
    factor = full["factor"] if full.get("rope_type", "default") == "linear" else None
    return full["rope_theta"], factor


def write(path, model_dir, spm_path, cfg, qtype, ftype):
    tokens, scores, types, tc = sentencepiece_vocab(model_dir, spm_path, cfg["vocab_size"])
    theta, factor = global_rope(cfg)
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(theta)
    assert cfg.get("attn_logit_softcapping") is None
    w.add_sliding_window(cfg["sliding_window"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    if factor is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(factor)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    add_special_vocab(w, cfg, tc)
    w.add_add_space_prefix(False)
    add_tensors_and_close(w, tensors_of(model_dir, cfg, len(tokens)), qtype)


REQUIRED_KEYS = ("gemma3.context_length", "gemma3.embedding_length", "gemma3.block_count",
                 "gemma3.feed_forward_length", "gemma3.attention.head_count", "gemma3.attention.head_count_kv",
                 "gemma3.attention.layer_norm_rms_epsilon", "gemma3.attention.key_length",
                 "gemma3.attention.value_length", "gemma3.rope.freq_base", "gemma3.attention.sliding_window",
                 "gemma3.rope.scaling.type", "gemma3.rope.scaling.factor", "tokenizer.ggml.model",
                 "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                 "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    spm_path = os.path.join(args.shared, "data", "models", "stories260K-hf", "tokenizer.model")
    model_dir = make_fixture()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["layer_types"][5] == "full_attention" and cfg["layer_types"].count("full_attention") == 1
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        n_tokens = len(sentencepiece_vocab(model_dir, spm_path, cfg["vocab_size"])[0])
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, spm_path, cfg, qtype, ftype)
            check_tensors_against(path, dict(tensors_of(model_dir, cfg, n_tokens)))
            fields = gguf.GGUFReader(path).fields
            missing = [k for k in REQUIRED_KEYS if k not in fields]
            assert not missing, missing
            files[name] = describe(path)
    golden = {"gguf_py": importlib.metadata.version("gguf"), "fixture": "tests/cli/golden/gguf_gemma3",
              "files": files}
    with open(os.path.join(OUT, "gguf_gemma3.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_gemma3.json"))


if __name__ == "__main__":
    main()
