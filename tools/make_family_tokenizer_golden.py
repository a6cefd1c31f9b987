#!/usr/bin/env python3
"""Small tokenizer.json files with the real pipelines of BLOOM, Gemma 2/3, Phi-3 and Qwen3, and their goldens.

../shared has none of these families' tokenizer files and nothing may be downloaded, so each family's
pipeline is rebuilt here with HF `tokenizers` exactly as the family's published tokenizer.json spells it
(normalizer, pre-tokenizer, BPE options, decoder, post-processor, added tokens and their flags), with a
small vocabulary trained on the shared Alpaca texts. Sources for the pipelines: transformers'
convert_slow_tokenizer.py (GemmaConverter, LlamaConverter), the families' tokenizer.json /
tokenizer_config.json as published (BLOOM's Split regex, Phi-3's rstrip added tokens, Qwen3's non-special
<think>/<tool_call> tokens).

Writes tests/data/tokenizer_golden/<family>_tokenizer.json and <family>_json.json (the format of
tools/make_tokenizer_golden.py: Alpaca texts by id count + FNV-1a hash, adversarial texts by full ids,
decode, ids with special tokens recognized and
their decode with skip_special_tokens). Gemma 3 uses Gemma 2's converter (more added tokens, same
pipeline), so one golden covers both.

Usage: python3 tools/make_family_tokenizer_golden.py [--shared ../shared]
"""
import argparse
import collections
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import BPE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_golden import ADVERSARIAL, QWEN2_PATTERN, HfTokenizer, alpaca_texts, fnv1a64  # noqa: E402

import tokenizers  # noqa: E402

SPACE = "\u2581"
BLOOM_PATTERN = " ?[^(\\s|[.,!?…。，、।۔،])]+"
# tiktoken's o200k_base split pattern (tiktoken_ext/openai_public.py), as Phi-4-mini's tokenizer.json spells it.
O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])

# Chat markup of the four families, as plain text and with their special tokens recognized.
FAMILY_TEXTS = [
    "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n",
    "<start_of_turn>  user<end_of_turn>\t<eos><pad><unk><mask>",
    "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n4<|end|>\n<|endoftext|>",
    "<|system|>  You are helpful.<|end|>  \n <|user|> \t hi</s>  next</s>",
    "x<|assistant|>\u3000\u00a0y <|placeholder1|>\n\n\nz",  # Phi-3's reserved token <|placeholder1|> (id 32002)
    "<think>\nLet me think.\n</think>\n\nThe answer is 4.<|im_end|>",
    "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call><|im_end|>",
    "<tool_response> ok </tool_response><|fim_prefix|>x<|fim_suffix|>y<|fim_middle|><|repo_name|>r<|file_sep|>",
    "<table><tr><td>cell</td></tr></table> <h1>Title</h1>",
    "tab\there\t\tand  double  spaces   triple    four",
    "\u2581already\u2581escaped \u2581\u2581 spaces",
    "<s> <s>x </s>y <pad> <unk>",
]


# Phi-4-mini's chat and tool markup (its tool tokens are not special: matched in plain text too) and the
# o200k pattern's hard cases: case runs split before a lowercase tail, a contraction taken case-blind
# only after a letter run, "/" and newlines glued to punctuation, digits in threes, marks inside words.
PHI4MINI_TEXTS = [
    "<|system|>You are helpful.<|end|><|user|>What is 2+2?<|end|><|assistant|>4<|end|><|endoftext|>",
    "<|system|>  sys <|tool|> [{\"name\": \"f\"}] <|/tool|>\n<|end|>\n<|user|>\t hi <|end|> \n <|assistant|>",
    "<|assistant|><|tool_call|>{\"name\": \"f\", \"arguments\": {}}<|/tool_call|>  <|end|>"
    "<|tool_response|>  {\"result\": 4}<|end|><|tag|> x<|endofprompt|> y",
    "<|user|><|user|>\n\n\n<|end|>   <|tool|><|tool|>  \u3000x",
    "HelloWorld camelCaseWORDSMixed XMLHttpRequest iPhone eBay McDONALD's ABCdef",
    "ÜBER AÉB ÉTAT ÅNGSTROM Ǆemal ǅemal ǆemal ß ẞIG ΣΊΣΥΦΟΣ σίσυφος",
    "I'M YOU'RE he'S We'Ve they'LL she'D it'T 's 'S don't DON'T o'clock rock'n'roll x''s",
    "it'ſ IT'ſ 'ſ caf'\u212a Kelvin\u212a",
    "path/to/file.txt\n/usr/bin/\r\n...//\n\n a/b/c ?!/\n",
    "12 123 1234 12345 3.14159 ٣٤٥٦ १२३४ ½⅓ 2024-01-01",
    "ใช้ภาษาไทย हिन्दी मैं देवनागरी กำลัง e\u0301A\u0301\u0302 \u0301start",
    "(hello) [World] {x} \"quoted\" 'single' «guillemets» —dash",
]

def train(texts, normalizer, pre_tokenizer, vocab_size, byte_level, specials=()):
    """A BPE vocabulary and merges trained by `tokenizers` (list of tokens in id order, list of merges)."""
    tok = Tokenizer(BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    if byte_level:
        kwargs = {"initial_alphabet": pre_tokenizers.ByteLevel.alphabet()}
    else:
        # The 120 most frequent characters (ties by code point: the trainer's own limit_alphabet breaks ties
        # in hash order, which would make the files differ run to run); the rest go to byte fallback.
        counts = collections.Counter(c for t in texts for c in (normalizer.normalize_str(t) if normalizer else t))
        alphabet = sorted(counts, key=lambda c: (-counts[c], c))[:120]
        kwargs = {"initial_alphabet": alphabet, "limit_alphabet": len(alphabet)}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials), show_progress=False,
                                  **kwargs)
    tok.train_from_iterator(texts, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in vocab], [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]


def bpe(tokens, merges, **options):
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    return BPE(vocab, merges, dropout=None, **options)


def bloom(texts):
    # bigscience/bloom tokenizer.json: no normalizer, the Split regex below then ByteLevel without its own
    # regex or prefix space, ByteLevel decoder/post-processor, <unk> <s> </s> <pad> as ids 0..3.
    split = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(BLOOM_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    tokens, merges = train(texts, None, split, 1200, True, specials)
    tok = Tokenizer(bpe(tokens, merges))
    tok.pre_tokenizer = split
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    return tok


def qwen3(texts):
    # Qwen/Qwen3 tokenizer.json: Qwen2's pipeline (NFC, the Qwen2 Split regex then ByteLevel, ByteLevel
    # decoder) and its added tokens after the BPE vocabulary; <tool_call>, <think>, the FIM tokens... are
    # NOT special (always matched, kept by skip_special_tokens).
    split = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tokens, merges = train(texts, normalizers.NFC(), split, 1200, True)
    tok = Tokenizer(bpe(tokens, merges, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = split
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    added = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
             ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
             ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True),
             ("<|vision_end|>", True), ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
             ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
             ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
             ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)]
    for content, special in added:
        tok.add_tokens([AddedToken(content, normalized=False, special=special)])
    return tok


def spm_training_split():
    # Training only: pieces never cross a "▁" (SentencePiece's split_by_whitespace).
    return pre_tokenizers.Split(SPACE, behavior="merged_with_next")


def gemma(texts):
    # transformers' GemmaConverter (Gemma 2 and 3): Replace(" " -> "▁") normalizer, no prefix "▁",
    # Split(" ", merged_with_previous) pre-tokenizer, BPE with byte fallback, fuse_unk and <unk> (id 3),
    # "\t" as a plain piece where <0x09> would be, <bos> added by TemplateProcessing, decoder
    # Replace/ByteFallback/Fuse (no Strip). SentencePiece control pieces are special added tokens,
    # user-defined pieces (HTML tags, "▁▁" runs) non-special; all normalized=false.
    norm = normalizers.Replace(" ", SPACE)
    trained, merges = train(texts, norm, spm_training_split(), 1000, False)
    control = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[@BOS@]", "<unused0>", "<unused1>",
               "<start_of_turn>", "<end_of_turn>"]
    user_defined = ["<table>", "<tr>", "<td>", "<h1>", SPACE * 2, SPACE * 3]
    byte_pieces = ["\t" if b == 9 else f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(bpe(control + user_defined + byte_pieces + trained, merges, unk_token="<unk>", fuse_unk=True,
                        byte_fallback=True))
    tok.normalizer = norm
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    tok.add_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user_defined])
    return tok


def phi3(texts):
    # microsoft/Phi-3-mini tokenizer.json: Llama 2's legacy SentencePiece conversion (Prepend "▁" + Replace
    # normalizer, no pre-tokenizer, byte fallback, fuse_unk, decoder Replace/ByteFallback/Fuse/Strip,
    # <s> by TemplateProcessing) plus the chat tokens after the vocabulary. Its added tokens strip the
    # whitespace to their right (rstrip), and </s> is a non-special added token with rstrip.
    norm = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    trained, merges = train(texts, norm, spm_training_split(), 1000, False)
    base = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(bpe(base + trained, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = norm
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    tok.add_tokens([AddedToken("<unk>", normalized=False, special=True),
                    AddedToken("<s>", normalized=False, special=True),
                    AddedToken("</s>", normalized=False, special=False, rstrip=True)])
    # Phi-3's real added tokens at ids 32000-32010, in its order: the <|placeholderN|> names are the
    # published vocabulary's own reserved entries, not unfinished text.
    chat = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
            "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
    for t in chat:
        tok.add_tokens([AddedToken(t, normalized=False, special=True, rstrip=t != "<|endoftext|>")])
    return tok


def phi4mini(texts):
    # microsoft/Phi-4-mini-instruct tokenizer.json: no normalizer; pre-tokenizer Sequence[Split(o200k regex,
    # behavior Removed, invert true), ByteLevel without prefix space or regex] (the Split as printed from
    # the published file in meta-pytorch/tokenizers PR #38; ByteLevel's options are those that give
    # tiktoken's o200k ids, which llama.cpp's pre-tokenizer hash finds: Phi-4-mini converts as "gpt-4o");
    # byte-level BPE; ByteLevel decoder; no BOS (add_bos_token false). The added tokens and their flags
    # are those of Phi-4-mini's tokenizer_config.json (as published for Phi-4-multimodal-instruct, whose
    # language model it is, and Phi-4-mini-reasoning: onnxruntime-extensions test data): chat tokens strip
    # the whitespace to their right; <|tool|> ... <|tool_response|> are NOT special. Their ids keep the real
    # layout: <|endoftext|> one past a hole after the BPE vocabulary, the rest 19 further on.
    split = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K_PATTERN), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tokens, merges = train(texts, None, split, 1200, True)
    n = len(tokens)
    added = [(n + 1, "<|endoftext|>", True, False)]  # 199999 after a 199998-token vocabulary
    names = ["<|endofprompt|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>", "<|tool|>", "<|/tool|>",
             "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>", "<|tag|>"]  # 200018 ... 200028
    for i, name in enumerate(names):
        special = name not in ("<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>")
        added.append((n + 20 + i, name, special, name != "<|endofprompt|>"))
    model = json.loads(Tokenizer(bpe(tokens, merges, ignore_merges=False)).to_str())
    model["model"]["vocab"].update({content: i for i, content, _, _ in added})
    model["added_tokens"] = [{"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": rstrip,
                              "normalized": False, "special": special} for i, content, special, rstrip in added]
    tok = Tokenizer.from_str(json.dumps(model))
    tok.pre_tokenizer = split
    tok.decoder = decoders.ByteLevel()
    assert [tok.token_to_id(content) for _, content, _, _ in added] == [i for i, _, _, _ in added]
    return tok


def split_behaviors(gemma_tok):
    """Gemma's vocabulary with no normalizer and a pre-tokenizer exercising every Split behavior (Gemma's own
    Split(" ", merged_with_previous) has no space left to act on after its normalizer)."""
    tok = Tokenizer.from_str(gemma_tok.to_str())
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
        pre_tokenizers.Split(Regex("[.!?]"), behavior="merged_with_next"),
        pre_tokenizers.Split(",", behavior="removed"),
        pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="merged_with_previous", invert=True),
        pre_tokenizers.Split(Regex("[()]"), behavior="isolated", invert=True)])
    return tok


def main():
    parser = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--shared", default=os.path.join(root, "..", "shared"))
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "tokenizer_golden"))
    args = parser.parse_args()
    shared = os.path.abspath(args.shared)
    files, texts = alpaca_texts(shared)
    reference = f"tokenizers {tokenizers.__version__}"
    made = {}
    families = (("bloom", bloom), ("gemma", gemma), ("phi3", phi3), ("qwen3", qwen3),
                ("phi4mini", phi4mini), ("split_behaviors", lambda texts: split_behaviors(made["gemma"])))
    for family, make in families:
        name = f"{family}_tokenizer.json"
        path = os.path.join(args.out, name)
        made[family] = make(texts)
        made[family].save(path, pretty=False)
        ref = HfTokenizer(Tokenizer.from_file(path), reference)  # what the reference reads back
        adversarial_only = family == "split_behaviors"  # a pipeline check, not a family: kept small
        alpaca, lossless = [], True
        for t in [] if adversarial_only else texts:
            ids = ref.encode(t)
            alpaca.append([len(ids), format(fnv1a64(ids), "016x")])
            lossless = lossless and ref.decode(ids) == t
        adversarial = []
        for t in ADVERSARIAL + FAMILY_TEXTS + (PHI4MINI_TEXTS if family == "phi4mini" else []):
            ids = ref.encode(t)
            special = ref.encode_special(t)
            # skip_special_tokens drops special added tokens only: Qwen3's <think>, Phi-3's </s> stay.
            adversarial.append({"text": t, "ids": ids, "decoded": ref.decode(ids), "ids_special": special,
                                "decoded_special_skipped": ref.tok.decode(special, skip_special_tokens=True)})
        golden = {"tokenizer": "tests/data/tokenizer_golden/" + name, "reference": reference,
                  "alpaca_files": [] if adversarial_only else files,
                  "alpaca": alpaca, "alpaca_round_trip": lossless, "adversarial": adversarial}
        out = os.path.join(args.out, f"{family}_json.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"{out}: {len(alpaca)} alpaca texts (round trip {lossless}), {len(adversarial)} adversarial, "
              f"{os.path.getsize(out)} + {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
