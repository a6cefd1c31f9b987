"""On the GPU machine: PyTorch's cuDNN SDPA forward+backward (causal, GQA 32/8, HD 128, bf16) with q/k/v/dO
laid out as (B, H, T, D) contiguous against (B, T, H, D) viewed as (B, H, T, D): whether cuDNN's speed
depends on the head-interleaved layout leantune's tensors have. One JSON line per case."""
import json, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

def bench(fn, warm=3, rep=10):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(rep):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]

T = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
B, H, KVH, D = 1, 32, 8, 128
flops_fwd = 4 * B * H * T * T * D / 2
for layout in ["bhsd", "bshd"]:
    def make(h):
        if layout == "bhsd":
            return torch.randn(B, h, T, D, device="cuda", dtype=torch.bfloat16).requires_grad_(True)
        return torch.randn(B, T, h, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2).detach().requires_grad_(True)
    q, k, v = make(H), make(KVH), make(KVH)
    do = make(H).detach()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        fwd_ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
        def step():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            o.backward(do)
        both_ms = bench(step)
    bwd_ms = both_ms - fwd_ms
    print(json.dumps(dict(layout=layout, T=T, fwd_ms=round(fwd_ms, 3), bwd_ms=round(bwd_ms, 3),
                          fwd_tflops=round(flops_fwd / fwd_ms / 1e9, 1), bwd_tflops=round(2.5 * flops_fwd / bwd_ms / 1e9, 1),
                          q_stride=list(q.stride()))), flush=True)
