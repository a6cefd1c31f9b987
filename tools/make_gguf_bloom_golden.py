#!/usr/bin/env python3
"""Golden GGUF files of a tiny BLOOM for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

Fixture (tests/cli/golden/gguf_bloom/: config.json, model.safetensors, tokenizer.json, tokenizer_config.json),
made with transformers and tokenizers: a BloomForCausalLM (4 heads, tied embeddings, no seq_length in
config.json, as bloom-560m's), every parameter drawn at random in float32 (biases and LayerNorms included),
and a BLOOM-style byte-level BPE tokenizer.json trained here on a few sentences (BLOOM's pre-tokenizer: its
Split regex, then ByteLevel without regex; <unk> <s> </s> <pad> special at ids 0-3), with config.json's
vocab_size above the tokenizer's so that the converter's [PADi] holes show, as bloom-560m's 250880 > 250680.

For each type f32, f16, bf16 and q8_0, gguf-py's GGUFWriter writes the file llama.cpp's convert_hf_to_gguf.py
conventions give (BloomModel):
  - general.architecture bloom and the bloom.* keys BloomModel.set_gguf_parameters writes: context_length =
    config.json's seq_length, else n_embed (sic), embedding_length, feed_forward_length = 4 n_embed,
    block_count, attention.head_count, head_count_kv = n_head, attention.layer_norm_epsilon; no positions
    (llama.cpp runs BLOOM with ALiBi);
  - tensors under gguf-py's own BLOOM name map (after the converter strips "transformer."), with
    query_key_value's weight and bias re-ordered as BloomModel.modify_tensors does, from BLOOM's per-head
    interleave [H, 3, HD] to all q rows, then k, then v; 1-D tensors (norms, biases) f32; no output.weight
    (tied: the checkpoint has no lm_head);
  - the vocabulary as _set_vocab_gpt2 / get_vocab_base take it from transformers' AutoTokenizer: every id below
    vocab_size (holes [PADi] UNUSED; added tokens CONTROL when special or special-looking, else USER_DEFINED),
    tokenizer.ggml.pre "bloom" (the converter recognizes bigscience/bloom's tokenizer by a hash of its
    tokenization; this tiny vocabulary has its own hash, so the name is given here by BLOOM's Split regex, as
    leantune recognizes it), the merges, then the special ids as tools/make_gguf_golden.py's SpecialVocab.
Every tensor of every type, read back with gguf.GGUFReader, is checked against the checkpoint's (after the
re-order): f32 equal, f16 / bf16 equal to the rounded values, q8_0 within its quantization error.
tests/cli/golden/gguf_bloom.json records per type the file's size and FNV-1a 64 hash and per tensor its type,
shape and data hash.

Usage: python3 tools/make_gguf_bloom_golden.py
"""
import importlib.metadata
import json
import os
import re
import tempfile

import gguf
import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, BloomConfig, BloomForCausalLM

from make_gguf_golden import load_checkpoint
from make_gguf_golden import TYPES, add_special_vocab, add_tensors_and_close, check_tensors_against, describe
from make_gguf_golden import looks_special

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "cli", "golden")
BLOOM_SPLIT = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
CORPUS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine!",
    "The quick brown fox jumps over the lazy dog... Is it quick? Yes, it is quick.",
    "Il était une fois une petite fille qui aimait jouer dehors. Elle riait, chantait et dansait.",
    "La niña jugaba en el parque con su perro. ¿Dónde está la pelota? Aquí está.",
    "从前有一个小女孩。她喜欢在阳光下玩耍，唱歌、跳舞。",
    "एक समय की बात है। एक छोटी लड़की थी।",
]
CONFIG = BloomConfig(vocab_size=320, hidden_size=32, n_layer=2, n_head=4, layer_norm_epsilon=1e-5,
                     bos_token_id=1, eos_token_id=2, pad_token_id=3, hidden_dropout=0.0, attention_dropout=0.0,
                     tie_word_embeddings=True)


def make_tokenizer(directory):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(BLOOM_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_prefix_space": False, "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                   "unk_token": "<unk>", "padding_side": "left", "tokenizer_class": "BloomTokenizer"}, f, indent=1)


def make_fixture():
    torch.manual_seed(31)
    model = BloomForCausalLM(CONFIG).to(torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    directory = os.path.join(OUT, "gguf_bloom")
    model.save_pretrained(directory)
    make_tokenizer(directory)
    return directory


def tensors_of(model_dir, cfg):
    """BloomModel.modify_tensors: "transformer." stripped, query_key_value re-ordered, names by gguf-py's map
    (the order is leantune's)."""
    st = load_checkpoint(model_dir)
    assert "lm_head.weight" not in st
    H, D, L = cfg["n_head"], cfg["hidden_size"], cfg["n_layer"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BLOOM, L)
    hf = ["word_embeddings.weight", "word_embeddings_layernorm.weight", "word_embeddings_layernorm.bias"]
    for l in range(L):
        hf += [f"h.{l}.{t}" for t in (
            "input_layernorm.weight", "input_layernorm.bias", "self_attention.query_key_value.weight",
            "self_attention.query_key_value.bias", "self_attention.dense.weight", "self_attention.dense.bias",
            "post_attention_layernorm.weight", "post_attention_layernorm.bias", "mlp.dense_h_to_4h.weight",
            "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias")]
    hf += ["ln_f.weight", "ln_f.bias"]
    assert sorted("transformer." + n for n in hf) == sorted(st), set(st) ^ {"transformer." + n for n in hf}
    out = []
    for name in hf:
        data = st["transformer." + name].astype(np.float32)
        if re.match(r"h\.\d+\.self_attention\.query_key_value\.weight", name):
            w = data.reshape(H, 3, D // H, D)
            data = np.concatenate([w[:, 0].reshape(-1, D), w[:, 1].reshape(-1, D), w[:, 2].reshape(-1, D)])
        elif re.match(r"h\.\d+\.self_attention\.query_key_value\.bias", name):
            b = data.reshape(H, 3, D // H)
            data = np.concatenate([b[:, 0].reshape(D), b[:, 1].reshape(D), b[:, 2].reshape(D)])
        out.append((names.get_name(name, try_suffixes=(".weight", ".bias")), data))
    return out


def gpt2_vocab(model_dir, vocab_size):
    """get_vocab_base, from transformers' tokenizer as the converter reads it."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert max(tokenizer.vocab.values()) < vocab_size
    reverse = {i: t for t, i in tokenizer.vocab.items()}
    added = tokenizer.get_added_vocab()
    decoder = tokenizer.added_tokens_decoder
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        token = reverse[i]
        if token in added:
            if not decoder[i].normalized:
                token = tokenizer.decode(tokenizer.encode(token, add_special_tokens=False))
            if decoder[i].special or looks_special(token):
                types.append(gguf.TokenType.CONTROL)
            else:
                token = token.replace("\u2581", " ")
                types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
        tokens.append(token)
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    assert tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == BLOOM_SPLIT
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tokens, types, merges


def write(path, model_dir, cfg, qtype, ftype):
    w = gguf.GGUFWriter(path, "bloom")
    n_embed = cfg["hidden_size"]
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg.get("seq_length", n_embed))
    w.add_embedding_length(n_embed)
    w.add_feed_forward_length(4 * n_embed)
    w.add_block_count(cfg["n_layer"])
    w.add_head_count(cfg["n_head"])
    w.add_head_count_kv(cfg["n_head"])
    w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    tokens, types, merges = gpt2_vocab(model_dir, cfg["vocab_size"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("bloom")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        add_special_vocab(w, cfg, json.load(f))
    add_tensors_and_close(w, tensors_of(model_dir, cfg), qtype)


REQUIRED_KEYS = ("bloom.context_length", "bloom.embedding_length", "bloom.feed_forward_length",
                 "bloom.block_count", "bloom.attention.head_count", "bloom.attention.head_count_kv",
                 "bloom.attention.layer_norm_epsilon", "tokenizer.ggml.model", "tokenizer.ggml.pre",
                 "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges")


def main():
    model_dir = make_fixture()
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    assert "seq_length" not in cfg
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, cfg, qtype, ftype)
            check_tensors_against(path, dict(tensors_of(model_dir, cfg)))
            fields = gguf.GGUFReader(path).fields
            missing = [k for k in REQUIRED_KEYS if k not in fields]
            assert not missing, missing
            files[name] = describe(path)
    golden = {"gguf_py": importlib.metadata.version("gguf"), "fixture": "tests/cli/golden/gguf_bloom",
              "files": files}
    with open(os.path.join(OUT, "gguf_bloom.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(OUT, "gguf_bloom.json"))


if __name__ == "__main__":
    main()
