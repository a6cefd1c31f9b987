#!/usr/bin/env python3
"""Golden GGUF files for `leantune export --gguf` (tests/cli/test_export_gguf.cpp).

For ../shared's tiny real Llama (stories260K-hf: fp32 safetensors, SentencePiece tokenizer.model), writes
with gguf-py's own GGUFWriter the file llama.cpp's convert_hf_to_gguf.py conventions give, for each type
f32, f16, bf16 and q8_0:
  - tensors renamed to llama.cpp's names; q_proj / k_proj rows permuted back to interleaved RoPE pairs
    (LlamaModel.permute, with num_key_value_heads for K); 1-D tensors f32; 2-D tensors converted by
    gguf.quants.quantize (q8_0: rows not a multiple of 32 fall back to f16); no output.weight when tied;
  - the vocabulary as _set_vocab_sentencepiece takes it (IdToPiece, GetScore, the Is* token types), padded
    with [PADi] to config.json's vocab_size, then added_tokens.json and tokenizer_config.json's
    added_tokens_decoder as _create_vocab_sentencepiece reads them; the special ids config.json gives
    (SpecialVocab), tokenizer_config.json's add_bos/add_eos_token, chat_template and add_prefix_space;
  - the llama.* hyperparameters and general.* keys, in the order leantune writes them.
The files themselves are not kept: tests/cli/golden/gguf_stories260K.json records, per type, the file's size
and FNV-1a 64 hash, and per tensor its type, shape and data hash, so a mismatch points at the tensor.

Usage: python3 tools/make_gguf_golden.py [--shared ../shared]
"""
import argparse
import importlib.metadata
import json
import os
import shutil
import tempfile

import gguf
import numpy as np
import sentencepiece
import torch
from safetensors import safe_open

TYPES = {
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    arr = np.frombuffer(data, dtype=np.uint8)
    for b in arr.tolist():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def load_checkpoint(model_dir):
    """Every tensor of the checkpoint in `model_dir` (model.safetensors or its model-*-of-*.safetensors shards)
    as a float32 array: the converter widens bfloat16 to float32 before its transforms."""
    files = sorted(f for f in os.listdir(model_dir) if f.startswith("model") and f.endswith(".safetensors"))
    assert files, f"{model_dir} has no model*.safetensors"
    out = {}
    for name in files:
        with safe_open(os.path.join(model_dir, name), framework="pt") as st:
            for key in st.keys():
                out[key] = st.get_tensor(key).to(torch.float32).numpy()
    return out


def permute(w, n_head, n_head_kv):  # convert_hf_to_gguf.py LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensors_of(model_dir, cfg):
    st = load_checkpoint(model_dir)
    H, KVH = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        b = f"blk.{l}."
        out += [
            (b + "attn_norm.weight", st[p + "input_layernorm.weight"]),
            (b + "attn_q.weight", permute(st[p + "self_attn.q_proj.weight"], H, H)),
            (b + "attn_k.weight", permute(st[p + "self_attn.k_proj.weight"], H, KVH)),
            (b + "attn_v.weight", st[p + "self_attn.v_proj.weight"]),
            (b + "attn_output.weight", st[p + "self_attn.o_proj.weight"]),
            (b + "ffn_norm.weight", st[p + "post_attention_layernorm.weight"]),
            (b + "ffn_gate.weight", st[p + "mlp.gate_proj.weight"]),
            (b + "ffn_up.weight", st[p + "mlp.up_proj.weight"]),
            (b + "ffn_down.weight", st[p + "mlp.down_proj.weight"]),
        ]
    out.append(("output_norm.weight", st["model.norm.weight"]))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("output.weight", st["lm_head.weight"]))
    return out


def write(path, model_dir, cfg, qtype, ftype):
    w = gguf.GGUFWriter(path, "llama")
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    HD = cfg.get("head_dim") or D // H
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(D)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_dimension_count(HD)
    w.add_head_count(H)
    w.add_head_count_kv(cfg.get("num_key_value_heads", H))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rope = cfg.get("rope_parameters") or {}
    w.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if HD * H != D:
        w.add_key_length(HD)
        w.add_value_length(HD)
    # _set_vocab_sentencepiece
    tokens, scores, types, tc = sentencepiece_vocab(model_dir, os.path.join(model_dir, "tokenizer.model"),
                                                    cfg["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    add_special_vocab(w, cfg, tc)
    if "add_prefix_space" in tc:  # LlamaModel.set_vocab, after the special tokens
        w.add_add_space_prefix(tc["add_prefix_space"])
    add_tensors_and_close(w, tensors_of(model_dir, cfg), qtype)


def sentencepiece_vocab(model_dir, spm_path, vocab_size):
    """_create_vocab_sentencepiece: tokens, scores, token types, and tokenizer_config.json's fields."""
    sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    # _create_vocab_sentencepiece: [PADi] at -10000 up to vocab_size, the pieces, then the added tokens.
    tokens = [f"[PAD{i}]".encode("utf-8") for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [gguf.TokenType.UNUSED] * vocab_size
    for i in range(sp.vocab_size()):
        t = gguf.TokenType.NORMAL
        if sp.IsUnknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.IsControl(i):
            t = gguf.TokenType.CONTROL
        elif sp.IsUnused(i):
            t = gguf.TokenType.UNUSED
        elif sp.IsByte(i):
            t = gguf.TokenType.BYTE
        tokens[i], scores[i], types[i] = sp.IdToPiece(i).encode("utf-8"), sp.GetScore(i), t
    added_path = os.path.join(model_dir, "added_tokens.json")
    if os.path.exists(added_path):
        with open(added_path, encoding="utf-8") as f:
            for key, i in json.load(f).items():
                if i < vocab_size:
                    tokens[i], scores[i], types[i] = key.encode("utf-8"), -1000.0, gguf.TokenType.USER_DEFINED
    tc = {}
    if os.path.exists(os.path.join(model_dir, "tokenizer_config.json")):
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            tc = json.load(f)
    for i, data in tc.get("added_tokens_decoder", {}).items():
        i, token = int(i), data["content"]
        if i >= vocab_size:
            continue
        if data.get("special") or looks_special(token):
            types[i] = gguf.TokenType.CONTROL
        else:
            token = token.replace("\u2581", " ")
            types[i] = gguf.TokenType.USER_DEFINED
        tokens[i], scores[i] = token.encode("utf-8"), -1000.0
    return tokens, scores, types, tc


def add_special_vocab(w, cfg, tc):
    """SpecialVocab: the ids config.json gives (null or absent: none), then tokenizer_config.json's
    add_bos_token / add_eos_token and chat_template."""
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    if eos is not None:
        w.add_eos_token_id(eos)
    if cfg.get("pad_token_id") is not None:
        w.add_pad_token_id(cfg["pad_token_id"])
    if "add_bos_token" in tc:
        w.add_add_bos_token(tc["add_bos_token"])
    if "add_eos_token" in tc:
        w.add_add_eos_token(tc["add_eos_token"])
    if "chat_template" in tc:
        w.add_chat_template(tc["chat_template"])


def looks_special(token):
    """convert_hf_to_gguf.py does_token_look_special."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<\uff5c") and token.endswith("\uff5c>"))
            or (token.startswith("<unused") and token.endswith(">")))


def add_tensors_and_close(w, tensors, qtype):
    """The converter's tensor types: 1-D f32, others `qtype` (f16 where q8_0 cannot take the rows)."""
    for name, t in tensors:
        t = t.astype(np.float32)
        q = gguf.GGMLQuantizationType.F32 if t.ndim == 1 else qtype
        try:
            data = gguf.quants.quantize(t, q)
        except gguf.QuantError:
            q = gguf.GGMLQuantizationType.F16
            data = gguf.quants.quantize(t, q)
        w.add_tensor(name, data, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_tensors_against(path, expected):
    """Reads `path` back with gguf.GGUFReader and checks every tensor against `expected` (name -> float32
    array, the checkpoint's tensors after the converter's transforms): the same names and shapes; f32 equal,
    f16 and bf16 equal to the values rounded to that type, q8_0 within its quantization error (half a step
    of its block's scale, plus what rounding that scale to f16 moves the codes)."""
    reader = gguf.GGUFReader(path)
    got = {t.name: t for t in reader.tensors}
    assert set(got) == set(expected), set(got) ^ set(expected)
    for name, want in expected.items():
        t = got[name]
        want = want.astype(np.float32)
        shape = [int(x) for x in reversed(t.shape.tolist())]
        assert shape == list(want.shape), (name, shape, want.shape)
        kind = t.tensor_type
        data = gguf.quants.dequantize(np.array(t.data), kind).reshape(want.shape)
        if kind == gguf.GGMLQuantizationType.F32:
            assert np.array_equal(data, want), name
        elif kind == gguf.GGMLQuantizationType.F16:
            assert np.array_equal(data, want.astype(np.float16).astype(np.float32)), name
        elif kind == gguf.GGMLQuantizationType.BF16:
            rounded = torch.from_numpy(want).to(torch.bfloat16).to(torch.float32).numpy()
            assert np.array_equal(data, rounded), name
        else:
            assert kind == gguf.GGMLQuantizationType.Q8_0, (name, kind)
            # q = round(x / d) is within half a step of x / d; the stored scale is d rounded to f16, which
            # moves a code q (|q| <= 127) by at most 127 |f16(d) - d|.
            blocks = want.reshape(-1, 32).astype(np.float64)
            d = np.abs(blocks).max(axis=1) / 127
            d16 = d.astype(np.float16).astype(np.float64)
            bound = 0.5 * d + 127 * np.abs(d16 - d) + 1e-7 * np.abs(blocks).max(axis=1)
            err = np.abs(data.reshape(-1, 32) - blocks)
            assert (err <= bound[:, None]).all(), (name, float(err.max()))


def describe(path):
    reader = gguf.GGUFReader(path)
    tensors = []
    for t in reader.tensors:
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name.lower(),
            "shape": [int(x) for x in reversed(t.shape.tolist())],
            "fnv1a64": fnv1a64(bytes(t.data.tobytes())),
        })
    with open(path, "rb") as f:
        data = f.read()
    return {"bytes": len(data), "fnv1a64": fnv1a64(data), "tensors": tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    args = ap.parse_args()
    model_dir = os.path.join(args.shared, "data", "models", "stories260K-hf")
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    golden = {"model": "stories260K-hf", "gguf_py": importlib.metadata.version("gguf"),
              "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"model-{name}.gguf")
            write(path, model_dir, cfg, qtype, ftype)
            golden["files"][name] = describe(path)
        # The same model with an HF repo's tokenizer files beside tokenizer.model (tests/cli/golden/
        # gguf_llama_added: tokenizer_config.json with added_tokens_decoder, chat_template, add_bos_token,
        # add_prefix_space; added_tokens.json; a tokenizer.json the converter does not read).
        overlay = os.path.join(os.path.dirname(__file__), "..", "tests", "cli", "golden", "gguf_llama_added")
        added_dir = os.path.join(tmp, "with_added", "stories260K-hf")
        shutil.copytree(model_dir, added_dir)
        for f in os.listdir(overlay):
            shutil.copy(os.path.join(overlay, f), added_dir)
        golden["with_added_tokens"] = {"overlay": "tests/cli/golden/gguf_llama_added", "files": {}}
        for name, (qtype, ftype) in TYPES.items():
            path = os.path.join(tmp, f"added-{name}.gguf")
            write(path, added_dir, cfg, qtype, ftype)
            golden["with_added_tokens"]["files"][name] = describe(path)
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "cli", "golden", "gguf_stories260K.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
