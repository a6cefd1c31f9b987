#!/usr/bin/env python3
"""../shared/bench/hf_peer.py for the families it does not list: BLOOM and Gemma 2 (issue #19's seed recipe
and the Gemma row). It imports the shared peer (found beside this file as .carry/hf_peer.py on the GPU machine,
or in ../shared/bench) and adds the shapes from bench/configs/<name>/config.json, the families' LoRA targets
(PEFT's names for them) and BLOOM's decoder-layer layout for the 4-bit quantization; the step, timing and
report are the shared peer's own.
  python3 bench/hf_peer_families.py --model bloom-560m --mode qlora --seq 4096 --batch 1 --grad-ckpt"""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
for d in (os.path.join(here, "..", ".carry"), os.path.join(here, "..", "..", "shared", "bench")):
    if os.path.exists(os.path.join(d, "hf_peer.py")):
        sys.path.insert(0, d)
        break
import hf_peer  # noqa: E402

FAMILIES = {"bloom-560m": "bloom", "gemma-2-2b": "gemma2"}
TARGETS = {"bloom": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
           "gemma2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def family_config(name):
    if name not in FAMILIES:
        return shared_config(name)
    from transformers import AutoConfig
    with open(os.path.join(here, "configs", name, "config.json")) as f:
        raw = json.load(f)
    return AutoConfig.for_model(raw.pop("model_type"), **raw)


def family_quantize_nf4(model):
    """The shared peer's quantization (every decoder-layer nn.Linear to bitsandbytes' NF4 Linear4bit), handed
    BLOOM's layers under the Llama names it walks (model.model.layers[i].self_attn / .mlp): it replaces the
    children of those same modules."""
    from types import SimpleNamespace
    if not hasattr(model, "transformer"):
        return shared_quantize_nf4(model)
    layers = [SimpleNamespace(self_attn=l.self_attention, mlp=l.mlp) for l in model.transformer.h]
    shared_quantize_nf4(SimpleNamespace(model=SimpleNamespace(layers=layers)))


shared_config = hf_peer.config
shared_quantize_nf4 = hf_peer.quantize_nf4
hf_peer.config = family_config
hf_peer.quantize_nf4 = family_quantize_nf4
for name, kind in FAMILIES.items():
    hf_peer.ARCH[name] = dict(kind=kind)

model_arg = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else ""
if model_arg in FAMILIES:
    import peft
    shared_lora_config = peft.LoraConfig

    def LoraConfig(**kw):  # the family's module names for the shared peer's seven Llama projections
        kw["target_modules"] = TARGETS[FAMILIES[model_arg]]
        return shared_lora_config(**kw)

    peft.LoraConfig = LoraConfig

if __name__ == "__main__":
    hf_peer.main()
