"""The peer of leantune's fused linear cross-entropy timing (tests/cuda/test_fused_lce_parity.cpp,
CudaBench.DISABLED_FusedLinearCrossEntropyTiming): the same LM head + cross-entropy in plain PyTorch, as
PyTorch-based trainers run it without a fused kernel: full (N, V) bf16 logits, an f32 upcast for the loss,
autograd for backward. Same shape (N 16384, D 4096, V 128256), every 4th label ignored, loss scaled by
1/N, x and W bf16 with their gradients bf16 (autograd's). Prints forward / backward ms (median of 3 after a
warm-up) and the peak memory the step allocated beyond its inputs. Run on the GPU machine:
  python3 bench/kernel_flce_peer.py
"""
import torch
import torch.nn.functional as F

N, D, V = 16384, 4096, 128256


def main():
    torch.manual_seed(0)
    dev = "cuda"
    x = ((torch.rand(N, D, device=dev) - 0.5) * 0.1).to(torch.bfloat16).requires_grad_()
    w = ((torch.rand(V, D, device=dev) - 0.5) * 0.1).to(torch.bfloat16).requires_grad_()
    labels = torch.randint(0, V, (N,), device=dev)
    labels[3::4] = -100
    fw_ms, bw_ms, peaks = [], [], []
    for it in range(4):
        x.grad = None
        w.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        e0.record()
        logits = x @ w.t()  # (N, V) bf16
        loss = F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum") / N
        e1.record()
        loss.backward()
        e2.record()
        torch.cuda.synchronize()
        if it > 0:
            fw_ms.append(e0.elapsed_time(e1))
            bw_ms.append(e1.elapsed_time(e2))
            peaks.append(torch.cuda.max_memory_allocated() - base)
        del logits, loss
    fw, bw = sorted(fw_ms)[1], sorted(bw_ms)[1]
    gemm = 2.0 * N * D * V
    print(f"PEER    torch eager bf16 N={N} D={D} V={V}  fwd {fw:.2f} ms {gemm / fw * 1e-9:.1f} TFLOP/s  "
          f"bwd {bw:.2f} ms {2 * gemm / bw * 1e-9:.1f} TFLOP/s  fwd+bwd {fw + bw:.2f} ms  "
          f"peak extra {max(peaks) / 2**20:.1f} MiB  (torch {torch.__version__})")


if __name__ == "__main__":
    main()
