#!/usr/bin/env python3
"""Writes the seed corpus of the libFuzzer harnesses (tests/fuzz): for each reader a few small valid files
of its format and a few broken ones, so that fuzzing starts from inputs that reach deep into the parser.

    python3 tools/make_fuzz_corpus.py tests/fuzz/corpus
"""
import base64
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, offset, body = {}, 0, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        body += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([0x80 | (v & 0x7F)])
        v >>= 7
    return out + bytes([v])


def field_bytes(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def sp_piece(text, kind, score=-1.0):
    return field_bytes(1, field_bytes(1, text.encode()) + bytes([2 << 3 | 5]) + struct.pack("<f", score) +
                       varint(3 << 3) + varint(kind))


def main(out):
    shutil.rmtree(out, ignore_errors=True)

    # safetensors
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    bf16 = struct.pack("<2H", 0x3F80, 0xC000)
    write(f"{out}/safetensors/two_tensors.safetensors",
          safetensors({"a.weight": ("F32", [2, 2], f32), "b": ("BF16", [2], bf16)}, {"format": "pt"}))
    write(f"{out}/safetensors/empty_tensor.safetensors", safetensors({"e": ("F16", [0, 3], b"")}))
    write(f"{out}/safetensors/truncated.safetensors", safetensors({"a": ("F32", [4], f32)})[:-3])
    # A number beyond double's range: nlohmann throws out_of_range from inside its parser (a fuzzer finding).
    overflow = b'{"a": {"dtype": "F32", "shape": [8888e88888888882], "data_offsets": [0, 16]}}'
    write(f"{out}/safetensors/number_overflow.safetensors", struct.pack("<Q", len(overflow)) + overflow + f32)

    # config.json
    os.makedirs(f"{out}/model_config")
    for name in ["Llama-3.1-8B", "Llama-3.1-8B-v5", "Mistral-7B-v0.1", "Qwen2.5-1.5B-v5",
                 "synthetic-qwen2-layer-types", "synthetic-llama-biases"]:
        shutil.copy(f"{ROOT}/tests/model/configs/{name}.json", f"{out}/model_config/{name}.json")
    write(f"{out}/model_config/tiny.json", json.dumps({
        "model_type": "llama", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}))

    # tokenizer.json
    tiny = {
        "version": "1.0", "normalizer": None, "pre_tokenizer": None, "decoder": None,
        "added_tokens": [{"id": 3, "content": "<s>", "special": True},
                         {"id": 4, "content": "</s>", "special": True}],
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [3], "tokens": ["<s>"]}}},
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
    write(f"{out}/tokenizer_json/tiny.json", json.dumps(tiny))
    byte_vocab = {chr(c) if 33 <= c <= 126 else f"<0x{c:02X}>": c for c in range(256)}
    byte_level = {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+|\\w+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "decoder": {"type": "ByteLevel"},
        "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True}],
        "post_processor": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": dict(byte_vocab, **{"He": 257}), "merges": [["H", "e"]],
                  "ignore_merges": False}}
    write(f"{out}/tokenizer_json/byte_level.json", json.dumps(byte_level))
    metaspace = {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1,
                                                          "stop": 0}]},
        "model": {"type": "BPE", "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "\u2581a": 3},
                  "merges": ["\u2581 a"], "unk_token": "<unk>", "byte_fallback": False, "fuse_unk": True}}
    write(f"{out}/tokenizer_json/metaspace.json", json.dumps(metaspace))
    write(f"{out}/tokenizer_json/broken.json", json.dumps(tiny)[:-20])

    # SentencePiece .model and tiktoken (one harness: load_tokenizer tells them apart)
    model = (sp_piece("<unk>", 2) + sp_piece("\u2581", 1, -1.0) + sp_piece("a", 1, -2.0) +
             sp_piece("\u2581a", 1, -0.5) + sp_piece("<0x41>", 6) +
             field_bytes(2, varint(3 << 3) + varint(2)))
    write(f"{out}/sentencepiece/tiny.model", model)
    ranks = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    ranks += f"{base64.b64encode(b'He').decode()} 256\n{base64.b64encode(b'llo').decode()} 257\n"
    write(f"{out}/sentencepiece/tiktoken.model", ranks)

    # vocab.json + NUL + merges.txt
    gpt2 = {chr(c) if 33 <= c <= 126 else chr(256 + c): c for c in range(256)}
    gpt2.update({"He": 256, "ll": 257, "<|endoftext|>": 258})
    write(f"{out}/vocab_merges/gpt2.bin", json.dumps(gpt2).encode() + b"\0#version: 0.2\nH e\nl l\n")

    # dataset records: first byte odd -> JSONL, even -> JSON array
    rec = [{"instruction": "Say hi", "input": "", "output": "hi"},
           {"instruction": "Add", "input": "1 2", "output": "3"}]
    write(f"{out}/dataset_records/alpaca.jsonl", b"\x01" + "\n".join(json.dumps(r) for r in rec).encode())
    write(f"{out}/dataset_records/alpaca.json", b"\x00" + json.dumps(rec).encode())
    write(f"{out}/dataset_records/chat.jsonl", b"\x01" + json.dumps(
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}).encode())
    write(f"{out}/dataset_records/bad.jsonl", b"\x01{\"instruction\": 3}\nnot json\n\n[1, 2]\n")

    # CSV dataset records (data/csv_records.h): first byte odd -> tab-separated, even -> comma-separated
    write(f"{out}/csv_records/alpaca.csv",
          b"\x00\xef\xbb\xbfinstruction,input,output\r\nSay hi,,hi\r\n\"Add, \"\"two\"\"\",\"1\n2\",3\r\n")
    write(f"{out}/csv_records/alpaca.tsv", b"\x01instruction\tinput\toutput\nSay hi\t \thi\n\nAdd\t1 2\t3")
    write(f"{out}/csv_records/bad_rows.csv", b"\x00instruction,output\na,b,c\nonly\nok,fine\n")
    write(f"{out}/csv_records/bad_quote.csv", b"\x00instruction,output\nx\"y,z\n\"open,end\n")
    write(f"{out}/csv_records/bad_header.csv", b"\x00a,a\n1,2\n")

    # adapter_config.json
    base = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8, "lora_alpha": 16, "lora_dropout": 0.05,
            "target_modules": ["q_proj", "v_proj"], "bias": "none", "use_rslora": False}
    write(f"{out}/adapter_config/list.json", json.dumps(base))
    write(f"{out}/adapter_config/regex.json", json.dumps(dict(
        base, target_modules=r".*\.layers\.[01]\..*(q_proj|v_proj)", exclude_modules=["layers.0.mlp"],
        rank_pattern={"q_proj": 4}, alpha_pattern={r"layers\.1\..*": 32})))

    # trainer_state.json
    write(f"{out}/trainer_state/state.json", json.dumps({
        "global_step": 3, "epoch": 0.5, "data": {"epoch": 0, "index": 12},
        "rng": {"seed": 42, "offset": 7}, "scheduler": {"last_lr": 1e-4, "total_steps": 6},
        "loss_scaler": {"scale": 65536.0, "good_steps": 3},
        "log_history": [{"step": 1, "loss": 2.5}, {"step": 2, "loss": 2.25}]}, indent=2))
    write(f"{out}/trainer_state/number_overflow.json", '{"global_step": 8888e88888888882, "epoch": 0}')

    # A number beyond double's range in every other JSON reader (fuzzer findings: nlohmann throws out_of_range
    # from inside its parser, which a reader catching only parse_error let escape).
    write(f"{out}/adapter_config/number_overflow.json", '{"peft_type": "LORA", "r": 3e3337198}')
    write(f"{out}/model_config/number_overflow.json", '{"hidden_size": 1e55555555}')
    write(f"{out}/tokenizer_json/number_overflow.json", '{"model": {"type": "BPE", "dropout": 7e99999}}')
    write(f"{out}/dataset_records/number_overflow.jsonl", b"\x01" + b'{"instruction": 1e400}\n')
    write(f"{out}/dataset_records/number_overflow.json", b"\x00" + b'[{"instruction": 1e400}]')


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else f"{ROOT}/tests/fuzz/corpus")
