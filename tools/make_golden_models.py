#!/usr/bin/env python3
"""Golden data for the whole-model tests (tests/model/golden/).

For each tiny model (Llama with llama3 RoPE scaling, GQA, explicit head_dim and an untied head; Qwen2 with
q/k/v biases and tied embeddings; Mistral with a sliding window shorter than the sequence) this builds the
model with transformers in float64 from fixed seeds, saves it as an HF checkpoint (config.json +
model.safetensors, in a storage dtype: bf16 / f32 / f16 so the loader's conversions are exercised) and
records for one padded batch (input_ids, attention_mask, labels): the logits, HF's causal-LM loss (labels
shifted by one, mean over the non-ignored tokens) and the gradient of every parameter, all float64, in
golden.safetensors. The float64 golden uses the weights rounded to the storage dtype, so a loader that reads
the checkpoint into float64 sees exactly the weights the golden was computed with.

Exact float64 math. transformers computes parts of a float64 model in float32; left alone, the golden would
carry float32 rounding (~1e-7) and could not check a float64 engine to 1e-9. This script patches:
  * the rotary embedding: inv_freq is built with torch.float and cos/sin are computed in float32. We compute
    inv_freq in float64 (the default and llama3 rules of transformers' modeling_rope_utils, checked against
    transformers' own float32 values) and cos/sin in float64;
  * RMSNorm: transformers casts the input to float32; we normalize in the input dtype;
  * eager attention: the softmax is taken with dtype=torch.float32; we take it in the input dtype;
  * the loss: ForCausalLMLoss upcasts logits with .float() (to float32); we compute the same shifted,
    mean-over-label-tokens cross-entropy in float64 (and check it against transformers' float32 loss).
Everything else (projections, masks, GQA repeat, SwiGLU, residuals) is transformers' own code.

stories260K-hf (the real pretrained model in ../shared, not copied): tokenizes a sentence with its
tokenizer.model through sentencepiece (BOS first, as LlamaTokenizer adds it) and records transformers'
unpatched float32 loss with labels = input_ids, and the exact float64 loss, in stories260K_loss.json.

Usage: python3 tools/make_golden_models.py [--shared ../shared]   (from the repository root)
"""

import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)
from transformers.models.llama import modeling_llama
from transformers.models.mistral import modeling_mistral
from transformers.models.qwen2 import modeling_qwen2
from transformers.models.phi3 import modeling_phi3
from transformers.models.qwen3 import modeling_qwen3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "model", "golden")
MODULES = (modeling_llama, modeling_qwen2, modeling_mistral, modeling_qwen3, modeling_phi3)


# ---- exact float64 patches ---------------------------------------------------------------------------
def inv_freq_float64(config, long=False):
    """inv_freq in float64 by transformers' default / llama3 / longrope rules, over the rotary dims
    (int(head_dim * partial_rotary_factor), Phi-3's partial rotary; all of head_dim by default). longrope
    divides by long_factor when `long` (the batch reaches past original_max_position_embeddings), else by
    short_factor."""
    rope = config.rope_parameters
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * rope.get("partial_rotary_factor", 1.0))
    base = rope["rope_theta"]
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rope["rope_type"] == "llama3":
        factor, low_ff, high_ff = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        orig = rope["original_max_position_embeddings"]
        low_wl, high_wl = orig / low_ff, orig / high_ff
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (orig / wavelen - low_ff) / (high_ff - low_ff)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
        inv = torch.where(medium, smoothed, scaled)
    elif rope["rope_type"] == "longrope":
        inv = inv / torch.tensor(rope["long_factor" if long else "short_factor"], dtype=torch.float64)
    else:
        assert rope["rope_type"] == "default", rope
    return inv


def rotary_forward_float64(self, x, position_ids):
    inv = self.inv_freq_float64.to(x.device)
    # longrope: transformers' longrope_frequency_update takes the long factors for the whole batch when
    # max(position_ids) + 1 passes original_max_position_embeddings.
    long_inv = getattr(self, "inv_freq_float64_long", None)
    if long_inv is not None and int(position_ids.max()) + 1 > self.config.rope_parameters[
            "original_max_position_embeddings"]:
        inv = long_inv.to(x.device)
    freqs = position_ids[..., None].to(torch.float64) * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    scale = getattr(self, "attention_scaling", 1.0)  # longrope's attention_factor; 1.0 otherwise
    return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)


def rmsnorm_forward_exact(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


CAPTURED_MASKS = []


def eager_attention_exact(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    key_states = modeling_llama.repeat_kv(key, module.num_key_value_groups)
    value_states = modeling_llama.repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        CAPTURED_MASKS.append(attention_mask.detach().clone())
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1)  # in the input dtype (float64 here)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights


def patch_exact_float64():
    for module in MODULES:
        module.eager_attention_forward = eager_attention_exact
        for name in dir(module):
            cls = getattr(module, name)
            if isinstance(cls, type) and name.endswith("RMSNorm"):
                cls.forward = rmsnorm_forward_exact
            if isinstance(cls, type) and name.endswith("RotaryEmbedding"):
                cls.forward = rotary_forward_float64


def attach_float64_inv_freq(model):
    for mod in model.modules():
        if hasattr(mod, "inv_freq") and hasattr(mod, "config"):
            inv64 = inv_freq_float64(mod.config)
            # original_inv_freq: the short set, where a longrope forward has already swapped inv_freq
            hf32 = getattr(mod, "original_inv_freq", mod.inv_freq).detach().to(torch.float64)
            assert torch.allclose(inv64, hf32, rtol=1e-6, atol=0), (inv64, hf32)
            mod.inv_freq_float64 = inv64
            rope = mod.config.rope_parameters
            if rope["rope_type"] == "longrope":
                long64 = inv_freq_float64(mod.config, long=True)
                long32, _ = ROPE_INIT_FUNCTIONS["longrope"](
                    mod.config, None, seq_len=rope["original_max_position_embeddings"] + 1)
                assert torch.allclose(long64, long32.to(torch.float64), rtol=1e-6, atol=0), (long64, long32)
                mod.inv_freq_float64_long = long64


def hf_causal_lm_loss(logits, labels):
    """transformers' ForCausalLMLoss (shift by one, mean over label tokens), in the logits' dtype."""
    shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), shift.reshape(-1), ignore_index=-100)


# ---- the tiny models -------------------------------------------------------------------------------------
# Sizes are as small as the committed budget allows (f64 gradients of every parameter dominate).
COMMON = dict(vocab_size=80, hidden_size=16, intermediate_size=32, num_hidden_layers=2, rms_norm_eps=1e-5,
              max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0,
              attention_dropout=0.0, hidden_act="silu")

MODELS = {
    # GQA 4/2, head_dim 8 explicit (H * HD = 32 != D = 16), llama3 scaling with original context 64 so the
    # HD/2 = 4 frequencies fall in all three bands (kept, smoothed, divided), untied head, bf16 storage.
    "llama": dict(
        cls=LlamaForCausalLM, config_cls=LlamaConfig, storage=torch.bfloat16, seed=11,
        config=dict(num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=False,
                    attention_bias=False, mlp_bias=False,
                    rope_parameters=dict(rope_type="llama3", rope_theta=500.0, factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=64))),
    # q/k/v biases, o without, tied embeddings, MHA 2/2, f32 storage.
    "qwen2": dict(
        cls=Qwen2ForCausalLM, config_cls=Qwen2Config, storage=torch.float32, seed=12,
        config=dict(num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True,
                    use_sliding_window=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    # MQA 4/1 (head_dim 4), sliding window 4 over sequences of 10, untied, f16 storage.
    "mistral": dict(
        cls=MistralForCausalLM, config_cls=MistralConfig, storage=torch.float16, seed=13,
        config=dict(num_attention_heads=4, num_key_value_heads=1, head_dim=4, tie_word_embeddings=False,
                    sliding_window=4, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
}
B, T = 2, 10


def common_sized_by_case():
    """COMMON without the sizes, for cases that give hidden_size and intermediate_size themselves."""
    c = dict(COMMON)
    for key in ("hidden_size", "intermediate_size"):
        c.pop(key)
    return c
SHORT = 7  # row 1 holds SHORT real tokens then right padding


def init_weights(model, seed):
    """Weights that make every part of the model matter (not HF's N(0, 0.02), under which attention is
    nearly uniform): linears ~ N(0, 1/fan_in), embeddings ~ N(0, 1/4), norm weights and biases perturbed."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.3 * noise)
            elif "embed_tokens" in name:
                p.copy_(0.5 * noise)
            else:
                p.copy_(noise / math.sqrt(p.shape[1]))


def make_batch(vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, vocab, (B, T), generator=gen)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    input_ids[1, SHORT:] = 0  # pad id
    attention_mask[1, SHORT:] = 0
    labels = input_ids.clone()
    labels[attention_mask == 0] = -100
    labels[0, :3] = -100  # a prompt that is not trained on
    labels[1, 2] = -100
    return input_ids, attention_mask, labels


def check_sliding_window(name, window):
    """The eager masks must really cut keys more than `window` back (and keep the causal ones inside)."""
    assert CAPTURED_MASKS, name
    for mask in CAPTURED_MASKS:
        m = mask[0, 0]  # (T, T) additive mask of row 0 (no padding)
        for q in range(T):
            for k in range(T):
                visible = k <= q and (window == 0 or q - k < window)
                assert (m[q, k] == 0) == visible, (name, q, k, m[q, k].item())


def make_golden(name, spec):
    config = spec["config_cls"](**COMMON, **spec["config"])
    config._attn_implementation = "eager"
    torch.manual_seed(spec["seed"])
    model = spec["cls"](config).to(torch.float64)
    model.config._attn_implementation = "eager"
    init_weights(model, spec["seed"])
    with torch.no_grad():  # round to the storage dtype so the checkpoint holds exactly these weights
        for p in model.parameters():
            p.copy_(p.to(spec["storage"]).to(torch.float64))
    attach_float64_inv_freq(model)
    model.train()  # dropout is 0: train() only keeps the training code paths

    input_ids, attention_mask, labels = make_batch(config.vocab_size, spec["seed"] + 100)
    CAPTURED_MASKS.clear()
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    logits = out.logits  # (B, T, V) f64
    loss = hf_causal_lm_loss(logits, labels)
    hf_loss = model.loss_function(logits=logits, labels=labels, vocab_size=config.vocab_size)  # float32 inside
    assert abs(loss.item() - hf_loss.item()) < 1e-5 * abs(loss.item()), (loss.item(), hf_loss.item())
    window = config.sliding_window if name == "mistral" else 0
    check_sliding_window(name, window or 0)
    loss.backward()

    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    weights = {n: p.detach().to(spec["storage"]).contiguous() for n, p in model.named_parameters()}
    save_file(weights, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    config.dtype = spec["storage"]
    config.architectures = [spec["cls"].__name__]
    config.to_json_file(os.path.join(directory, "config.json"))

    golden = {
        "input_ids": input_ids, "attention_mask": attention_mask, "labels": labels,
        "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1),
    }
    for n, p in model.named_parameters():
        golden["grad." + n] = p.grad.detach().contiguous()
    save_file(golden, os.path.join(directory, "golden.safetensors"), metadata={"format": "pt"})

    # The checkpoint must load back in transformers to the same model.
    reloaded = spec["cls"].from_pretrained(directory, dtype=torch.float64, attn_implementation="eager")
    attach_float64_inv_freq(reloaded)
    with torch.no_grad():
        again = reloaded(input_ids=input_ids, attention_mask=attention_mask).logits
    assert torch.equal(again, logits.detach()), name
    print(f"{name}: loss {loss.item():.12f}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"label tokens {(labels[:, 1:] != -100).sum().item()}")


def make_stories(shared):
    import sentencepiece
    directory = os.path.join(shared, "data", "models", "stories260K-hf")
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(directory, "tokenizer.model"))
    text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
    ids = [sp.bos_id()] + sp.encode(text)
    input_ids = torch.tensor([ids])
    model = LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        loss32 = model(input_ids=input_ids, labels=input_ids).loss.item()
    return dict(text=text, input_ids=ids, loss_float32=loss32, directory=directory)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)

    stories = make_stories(args.shared)  # unpatched transformers, float32
    patch_exact_float64()
    for name, spec in MODELS.items():
        make_golden(name, spec)

    model = LlamaForCausalLM.from_pretrained(stories.pop("directory"), dtype=torch.float64,
                                             attn_implementation="eager")
    attach_float64_inv_freq(model)
    with torch.no_grad():
        input_ids = torch.tensor([stories["input_ids"]])
        stories["loss_float64_exact"] = hf_causal_lm_loss(model(input_ids=input_ids).logits, input_ids).item()
    stories["transformers_version"] = transformers.__version__
    stories["torch_version"] = torch.__version__
    with open(os.path.join(OUT, "stories260K_loss.json"), "w") as f:
        json.dump(stories, f, indent=1)
        f.write("\n")
    print("stories260K:", stories["loss_float32"], stories["loss_float64_exact"])


if __name__ == "__main__":
    main()
