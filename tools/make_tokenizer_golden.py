#!/usr/bin/env python3
"""Golden token ids for leantune's tokenizers, made with the reference implementations.

For every tokenizer file in ../shared/data (llama3 tiktoken, llama2 and stories260K SentencePiece, Qwen2
vocab.json + merges.txt, GPT-2 encoder.json + vocab.bpe, the two tiny tokenizer.json files) this writes
tests/data/tokenizer_golden/<name>.json with
  - alpaca: per text (files sorted by name; records in order; fields instruction, input, output; empty
    fields skipped) the id count and the 64-bit FNV-1a hash of the ids (each id as 4 little-endian bytes),
  - adversarial: full ids of hand-written hard cases, the reference decode of those ids, and, where the
    reference can say, the ids with special tokens recognized (allow_special).
References: tiktoken (Llama 3), sentencepiece (.model), tokenizers (vocab/merges and tokenizer.json).

Usage: python3 tools/make_tokenizer_golden.py [--shared ../shared]
"""
import argparse
import glob
import json
import os

import sentencepiece
import tiktoken
import tiktoken.load
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

ADVERSARIAL = [
    "",
    " ",
    "Hello world",
    " Hello world ",
    "Hello, world! How are you?",
    "I'M here, they'll go, we've been, she'd say, it's, DON'T, You'Re, THEY'LL, we'D",
    "'s 's 'S ''s '''",
    "ſ 'ſ Kelvin K",
    "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890 12345678901234567890",
    "3.14159 -42 1,000,000 0x1F 1e10 v2.0.1",
    "٣٤٥ १२३ ⅷ ½ ² 一二三",
    "\t\ttabs\tand\tmore\t",
    "line one\nline two\r\nline three\rline four\n\n\n",
    "    four leading spaces",
    "trailing spaces     ",
    "many                                                                        spaces",
    " \n \n\t \r\n   \u3000 \u00a0 \u2009x",
    "\u180e mongolian vowel separator \u200b zero width space \u2028 line sep \u2029 para sep \u0085 nel",
    "emoji 😀😃😄 👍🏽 🇺🇸 🇯🇵",
    "family 👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈 and 👩🏾\u200d💻",
    "中文文本，测试分词器。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "Mixed English中文日本語한국어 and русский текст and ελληνικά",
    "e\u0301 a\u0300\u0301\u0302 n\u0303 Z\u0351\u0352\u0353\u0354 combining",
    "café naïve résumé Ångström",
    "cafe\u0301 nai\u0308ve (decomposed)",
    "Hangul jamo \u1100\u1161\u11a8 vs 각",
    "العربية: مرحبا بالعالم 123",
    "עברית: שלום עולם",
    "mixed rtl: hello مرحبا world שלום",
    "control\x01\x02\x03\x07\x1b[31mred\x1b[0m\x7f",
    "null\x00byte",
    "\ufffd replacement \ufffe\uffff noncharacters \U0010ffff",
    "\\x80\\xff \\u1234 \\n literal escapes",
    "<|endoftext|>",
    "a<|endoftext|>b",
    "<|begin_of_text|>Hello<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhey<|im_end|>\n",
    "<s>[INST] hi [/INST]</s>",
    "<unk> <pad> <|reserved_special_token_5|> <|notaspecial|>",
    "<|endoftext",
    "x<custom>y <custom> <CUSTOM> <custom",
    "```python\ndef f(x):\n    return x ** 2  # square\n```",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "https://example.com/path?query=1&b=two#frag",
    "email@example.com @user #hashtag $100 50% a&b",
    "!!!??? ... --- *** ___ ~~~ ^^^",
    "ALL CAPS SENTENCE WITH NUMBERS 2024",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "x" * 300,
    "ab" * 150,
    "🙂" * 40,
    "\n" * 20,
    " " * 100,
    "a\u0300" * 30,
    "Ünïcödé Ŝţŕĩńğ ẞ ß ǅ ǈ ǋ",
    "math: ∀x∈ℝ, ∃y: x²+y²≤1 ⇒ √(x) ∫∑∏",
    "fullwidth ＡＢＣ１２３ halfwidth ｱｲｳ",
    "Thai: ภาษาไทย Devanagari: हिन्दी Tamil: தமிழ்",
]


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little", signed=True):
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def alpaca_texts(shared):
    files = sorted(glob.glob(os.path.join(shared, "data/alpaca/*.json")))
    texts = []
    for f in files:
        for record in json.load(open(f, encoding="utf-8")):
            for key in ("instruction", "input", "output"):
                if record.get(key):
                    texts.append(record[key])
    return [os.path.relpath(f, shared) for f in files], texts


class Tiktoken:
    def __init__(self, path):
        ranks = tiktoken.load.load_tiktoken_bpe(path)
        names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
        names += [f"<|reserved_special_token_{3 + i}|>" for i in range(256 - len(names))]
        specials = {name: len(ranks) + i for i, name in enumerate(names)}
        self.enc = tiktoken.Encoding("llama3", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks,
                                     special_tokens=specials)
        self.reference = f"tiktoken {tiktoken.__version__}"

    def encode(self, text):
        return self.enc.encode(text, disallowed_special=())

    def encode_special(self, text):
        return self.enc.encode(text, allowed_special="all")

    def decode(self, ids):
        return self.enc.decode_bytes(ids).decode("utf-8", errors="replace")


class SentencePiece:
    def __init__(self, path):
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        self.reference = f"sentencepiece {sentencepiece.__version__}"

    def encode(self, text):
        return self.sp.encode(text)

    encode_special = None  # SentencePiece never matches control pieces in text

    def decode(self, ids):
        return self.sp.decode(ids)


class HfTokenizer:
    def __init__(self, tok, reference):
        self.tok = tok
        self.reference = reference

    def encode(self, text):
        self.tok.encode_special_tokens = True  # special-token strings are plain text
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_special(self, text):
        self.tok.encode_special_tokens = False
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


def byte_level_bpe(vocab, merges, qwen):
    tok = Tokenizer(BPE.from_file(vocab, merges))
    if qwen:
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.add_special_tokens(["<|endoftext|>"])
    tok.decoder = decoders.ByteLevel()
    return tok


def sentencepiece_to_tokenizer_json(model_path, metaspace):
    """HF's conversion of a Llama SentencePiece model (transformers' LlamaConverter, re-done here because
    transformers 5 no longer converts from a bare .model): legacy form (Prepend + Replace normalizer) or the
    newer Metaspace pre-tokenizer form; byte fallback, fuse_unk, TemplateProcessing adding <s>."""
    sp = sentencepiece.SentencePieceProcessor(model_file=model_path)
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for piece, i in vocab.items():
        if not sp.is_unknown(i) and not sp.is_control(i) and not sp.is_byte(i):
            local = [(piece[:k], piece[k:], sp.get_score(i)) for k in range(1, len(piece))
                     if piece[:k] in vocab and piece[k:] in vocab]
            merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges = [(a, b) for a, b, _ in sorted(merges, key=lambda m: m[2], reverse=True)]
    tok = Tokenizer(BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def main():
    parser = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--shared", default=os.path.join(root, "..", "shared"))
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "tokenizer_golden"))
    args = parser.parse_args()
    shared = os.path.abspath(args.shared)
    tk = os.path.join(shared, "data/tokenizers")
    hf = f"tokenizers {tokenizers.__version__}"
    cases = {
        "llama3_tiktoken": ("data/tokenizers/llama3/tokenizer.model",
                            lambda: Tiktoken(os.path.join(tk, "llama3/tokenizer.model"))),
        "llama2_sentencepiece": ("data/tokenizers/llama2/tokenizer.model",
                                 lambda: SentencePiece(os.path.join(tk, "llama2/tokenizer.model"))),
        "stories260K_sentencepiece": ("data/models/stories260K-hf/tokenizer.model",
                                      lambda: SentencePiece(os.path.join(shared, "data/models/stories260K-hf/tokenizer.model"))),
        "qwen2_vocab_merges": ("data/tokenizers/qwen2/vocab.json",
                               lambda: HfTokenizer(byte_level_bpe(os.path.join(tk, "qwen2/vocab.json"),
                                                                  os.path.join(tk, "qwen2/merges.txt"), True), hf)),
        "gpt2_encoder_vocab_bpe": ("data/tokenizers/gpt2/encoder.json",
                                   lambda: HfTokenizer(byte_level_bpe(os.path.join(tk, "gpt2/encoder.json"),
                                                                      os.path.join(tk, "gpt2/vocab.bpe"), False), hf)),
        "tiny_llama3_style_json": ("data/tokenizers/tiny/llama3_style_tokenizer.json",
                                   lambda: HfTokenizer(Tokenizer.from_file(os.path.join(tk, "tiny/llama3_style_tokenizer.json")), hf)),
        "tiny_qwen_style_json": ("data/tokenizers/tiny/qwen_style_tokenizer.json",
                                 lambda: HfTokenizer(Tokenizer.from_file(os.path.join(tk, "tiny/qwen_style_tokenizer.json")), hf)),
    }
    # SentencePiece-style tokenizer.json files (no such file in ../shared): converted from stories260K and
    # committed next to the goldens (about 25 KB each).
    stories = os.path.join(shared, "data/models/stories260K-hf/tokenizer.model")
    os.makedirs(args.out, exist_ok=True)
    for name, metaspace in (("stories260K_legacy_tokenizer.json", False),
                            ("stories260K_metaspace_tokenizer.json", True)):
        sentencepiece_to_tokenizer_json(stories, metaspace).save(os.path.join(args.out, name))
        key = name.replace("_tokenizer.json", "_json")
        cases[key] = ("tests/data/tokenizer_golden/" + name,
                      lambda name=name: HfTokenizer(Tokenizer.from_file(os.path.join(args.out, name)), hf))
    # GPT-2 style tokenizer.json (ByteLevel pre-tokenizer with add_prefix_space and its own regex, a
    # non-special added token that always matches): the tiny Qwen-style vocabulary re-dressed; adversarial
    # cases only, to keep the committed goldens small.
    variant = json.load(open(os.path.join(tk, "tiny/qwen_style_tokenizer.json"), encoding="utf-8"))
    variant["normalizer"] = None
    variant["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                "use_regex": True}
    variant["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                 "use_regex": True}
    variant["added_tokens"].append({"id": 2003, "content": "<custom>", "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": False})
    with open(os.path.join(args.out, "tiny_gpt2_style_tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(variant, f, ensure_ascii=False, separators=(",", ":"))
    cases["tiny_gpt2_style_json"] = (
        "tests/data/tokenizer_golden/tiny_gpt2_style_tokenizer.json",
        lambda: HfTokenizer(Tokenizer.from_file(os.path.join(args.out, "tiny_gpt2_style_tokenizer.json")), hf))
    adversarial_only = {"tiny_gpt2_style_json"}
    files, texts = alpaca_texts(shared)
    for name, (relative, make) in cases.items():
        ref = make()
        alpaca = []
        lossless = True  # whether the reference decodes every Alpaca text back to itself
        for t in ([] if name in adversarial_only else texts):
            ids = ref.encode(t)
            alpaca.append([len(ids), format(fnv1a64(ids), "016x")])
            lossless = lossless and ref.decode(ids) == t
        adversarial = []
        for t in ADVERSARIAL:
            ids = ref.encode(t)
            case = {"text": t, "ids": ids, "decoded": ref.decode(ids)}
            if ref.encode_special is not None:
                case["ids_special"] = ref.encode_special(t)
            adversarial.append(case)
        golden = {"tokenizer": relative, "reference": ref.reference,
                  "alpaca_files": [] if name in adversarial_only else files, "alpaca": alpaca, "alpaca_round_trip": lossless, "adversarial": adversarial}
        path = os.path.join(args.out, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"{path}: {len(alpaca)} alpaca texts, {len(adversarial)} adversarial, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
