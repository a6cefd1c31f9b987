#!/usr/bin/env python3
"""Golden GGUF files of a tiny Gemma 2 for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixture (tests/cli/golden/gguf_gemma2/: config.json, model.safetensors, tokenizer_config.json), made with
transformers: a Gemma2ForCausalLM (GQA 4/2, head_dim 16 with H * HD != D, query_pre_attn_scalar = head_dim as
llama.cpp assumes, both soft-caps, a sliding window on the even layers, tied embeddings), every parameter drawn
at random in float32 (norm weights included, so that the converter's +1 shows), over the stories260K
SentencePiece tokenizer.model (512 pieces; the test puts ../shared's file beside a copy of the fixture) with
vocab_size 520 and Gemma-style added tokens in tokenizer_config.json's added_tokens_decoder: <start_of_turn> /
<end_of_turn> special, <pad> and <unused0> not special but special-looking (the converter makes them CONTROL),
and a non-special "\u2581hello" (USER_DEFINED, written " hello"); Gemma's chat template.

For each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's convert_hf_to_gguf.py
conventions give (Gemma2Model):
  - general.architecture gemma2 and the gemma2.* keys Gemma2Model.set_gguf_parameters writes (context_length,
    embedding_length, block_count, feed_forward_length, attention.head_count / head_count_kv /
    layer_norm_rms_epsilon / key_length / value_length, attn_logit_softcapping, final_logit_softcapping,
    attention.sliding_window; no rope.freq_base: llama.cpp's default 10000 is Gemma 2's);
  - tensors under gguf-py's own GEMMA2 name map (post_attention_layernorm -> post_attention_norm,
    pre_feedforward_layernorm -> ffn_norm, post_feedforward_layernorm -> post_ffw_norm), every "*norm.weight"
    plus 1 in float32 (Gemma2Model.modify_tensors: llama.cpp's RMSNorm multiplies by w, HF's by 1 + w), Q/K not
    permuted (llama.cpp runs Gemma's RoPE in HF's NEOX layout), no output.weight (lm_head is skipped: tied);
    1-D tensors f32;
  - the vocabulary as _set_vocab_sentencepiece builds it ([PADi] up to vocab_size, the pieces, the added
    tokens), SpecialVocab's ids and tokenizer_config.json fields, then add_space_prefix false.
Every tensor of every type, read back with gguf.GGUFReader, is checked against the checkpoint's (after the
+1): f32 equal, f16 / bf16 equal to the rounded values, q8_0 within its quantization error.
tests/cli/golden/gguf_gemma2.json records per type the file's size and FNV-1a 64 hash and per tensor its type,
shape and data hash. It also writes tests/cli/golden/gguf_gemma2_small_tokenizer.model (make_small_tokenizer).

Usage: python3 tools/make_gguf_gemma2_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import io
import json
import os
import tempfile

import gguf
import numpy as np
import sentencepiece
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM

from make_gguf_golden import load_checkpoint
from make_gguf_golden import TYPES, add_special_vocab, add_tensors_and_close, check_tensors_against, describe
from make_gguf_golden import sentencepiece_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
CONFIG = Gemma2Config(vocab_size=520, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                      max_position_embeddings=256, rms_norm_eps=1e-6, sliding_window=64,
                      attn_logit_softcapping=50.0, final_logit_softcapping=30.0, tie_word_embeddings=True,
                      bos_token_id=1, eos_token_id=[2, 514], pad_token_id=512,
                      rope_parameters=dict(rope_type="default", rope_theta=10000.0))
ADDED_DECODER = {
    "512": {"content": "<pad>", "special": False},
    "513": {"content": "<start_of_turn>", "special": True},
    "514": {"content": "<end_of_turn>", "special": True},
    "515": {"content": "<unused0>", "special": False},
    "516": {"content": "\u2581hello", "special": False},
}


def make_fixture():
    torch.manual_seed(29)
    model = Gemma2ForCausalLM(CONFIG).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    directory = os.path.join(OUT, "gguf_gemma2")
    model.save_pretrained(directory)
    write_tokenizer_config(directory)
    return directory


def write_tokenizer_config(directory):
    """Gemma's chat template and the ADDED_DECODER tokens (the Gemma 3 fixture's too)."""
    with open(os.path.join(ROOT, "tests", "data", "golden", "chat_templates", "gemma.jinja")) as f:
        template = f.read()
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>", "chat_template": template, "tokenizer_class": "GemmaTokenizer",
                   "added_tokens_decoder": ADDED_DECODER}, f, indent=1)


# The checkpoint's tensors in the order leantune writes them.
LAYER_TENSORS = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                 "pre_feedforward_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                 "mlp.down_proj.weight", "post_feedforward_layernorm.weight")


def tensors_of(model_dir, cfg):
    """Gemma2Model.modify_tensors: lm_head skipped, every *norm.weight + 1, names by gguf-py's map."""
    return gemma_tensors(model_dir, cfg, gguf.MODEL_ARCH.GEMMA2, LAYER_TENSORS)


def gemma_tensors(model_dir, cfg, arch, layer_tensors, n_tokens=None):
    """The checkpoint's tensors (`layer_tensors` per layer) as float32 under gguf-py's name map of `arch`:
    every *norm.weight + 1 in float32, token_embd cut to `n_tokens` rows when given, lm_head skipped."""
    st = load_checkpoint(model_dir)
    names = gguf.get_tensor_name_map(arch, cfg["num_hidden_layers"])
    hf = ["model.embed_tokens.weight"]
    for l in range(cfg["num_hidden_layers"]):
        hf += [f"model.layers.{l}.{t}" for t in layer_tensors]
    hf.append("model.norm.weight")
    assert set(st) - set(hf) <= {"lm_head.weight"}, set(st) - set(hf)
    out = []
    for name in hf:
        data = st[name].astype(np.float32)
        if name == "model.embed_tokens.weight" and n_tokens is not None:
            data = data[:n_tokens]
        if name.endswith("norm.weight"):
            data = data + np.float32(1)
        out.append((names.get_name(name, try_suffixes=(".weight",)), data))
    return out


def write(path, model_dir, spm_path, cfg, qtype, ftype):
    w = gguf.GGUFWriter(path, "gemma2")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
    w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    w.add_sliding_window(cfg["sliding_window"])
    tokens, scores, types, tc = sentencepiece_vocab(model_dir, spm_path, cfg["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    add_special_vocab(w, cfg, tc)
    w.add_add_space_prefix(False)
    add_tensors_and_close(w, tensors_of(model_dir, cfg), qtype)


REQUIRED_KEYS = ("gemma2.context_length", "gemma2.embedding_length", "gemma2.block_count",
                 "gemma2.feed_forward_length", "gemma2.attention.head_count", "gemma2.attention.head_count_kv",
                 "gemma2.attention.layer_norm_rms_epsilon", "gemma2.attention.key_length",
                 "gemma2.attention.value_length", "gemma2.attn_logit_softcapping",
                 "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window", "tokenizer.ggml.model",
                 "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                 "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template")


SMALL_SPM = os.path.join(OUT, "gguf_gemma2_small_tokenizer.model")
SMALL_SPM_TEXT = ["Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine!",
                  "The quick brown fox jumps over the lazy dog. Is it quick? Yes, it is quick."] * 20


def make_small_tokenizer():
    """A 72-piece SentencePiece BPE model (identity normalization: no 240 KB charsmap) for the PEFT Gemma 2 base
    of tests/model/golden/peft_gemma2 (vocab_size 80), whose GGUF with and without the adapter the test
    compares; sentencepiece's trainer is deterministic on one thread."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(SMALL_SPM_TEXT), model_writer=model,
                                             vocab_size=72, model_type="bpe", num_threads=1, minloglevel=2,
                                             normalization_rule_name="identity")
    with open(SMALL_SPM, "wb") as f:
        f.write(model.getvalue())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    spm_path = os.path.join(args.shared, "data", "models", "stories260K-hf", "tokenizer.model")
    model_dir = make_fixture()
    make_small_tokenizer()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, spm_path, cfg, qtype, ftype)
            check_tensors_against(path, dict(tensors_of(model_dir, cfg)))
            fields = gguf.GGUFReader(path).fields
            missing = [k for k in REQUIRED_KEYS if k not in fields]
            assert not missing, missing
            files[name] = describe(path)
    golden = {"gguf_py": importlib.metadata.version("gguf"), "fixture": "tests/cli/golden/gguf_gemma2",
              "files": files}
    with open(os.path.join(OUT, "gguf_gemma2.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_gemma2.json"))


if __name__ == "__main__":
    main()
