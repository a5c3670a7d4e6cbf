#!/usr/bin/env python3
"""Causal attention kernels as Megatron-Core runs them on Hopper, one NVIDIA GPU with PyTorch (about 1-2 minutes).

Writes attention_sdpa.csv to $OUT:
  backend,b,seq,heads,kv_heads,head_dim,v_head_dim,fwd_us,fwd_bwd_us
backend cudnn = PyTorch's SDPA on cuDNN's fused attention (the kernel Transformer Engine's
DotProductAttention takes on Hopper by default), flash = its FlashAttention-2 kernel. Per-rank
shapes of published layouts (heads and key/value heads after tensor parallelism), bf16, causal.
Each time: CUDA events around `reps` back-to-back calls (about 20 ms of GPU time), divided by
`reps`, median of 5; fwd_bwd_us is one forward and its backward (torch.autograd.grad).
"""
import csv, math, os, statistics, time
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

OUT = os.environ.get("OUT", ".")
dev = "cuda"


def per_call_us(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); torch.cuda.synchronize()
    reps = max(3, min(200, math.ceil(20.0 / max(a.elapsed_time(b), 0.001))))
    ts = []
    for _ in range(5):
        a.record()
        for _ in range(reps):
            fn()
        b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / reps)
    return statistics.median(ts)


SHAPES = [  # (heads, kv_heads, head_dim, value head_dim) per rank
    (32, 8, 128, 128),    # Llama-3-8B, tp 1
    (16, 2, 128, 128),    # Llama-3-70B, tp 4
    (8, 1, 128, 128),     # Llama-3-70B, tp 8
    (16, 1, 128, 128),    # Llama-3.1-405B, tp 8
    (12, 12, 128, 128),   # GPT-3 175B, tp 8
    (64, 8, 64, 64),      # GPT-OSS-120B, tp 1
    (32, 32, 128, 128),   # Llama-2-7B / MHA, tp 1
    (4, 4, 128, 128),     # GPT-3 175B-like, tp 24; Llama-2-70B kv, tp 16
    (48, 8, 128, 128),    # Nemotron-4 340B-like, tp 2
    (64, 64, 192, 128),   # DeepSeek-V3 MLA, tp 2
    (16, 16, 192, 128),   # DeepSeek-V3 MLA, tp 8
]


def main(deadline):
    f = open(os.path.join(OUT, "attention_sdpa.csv"), "w", newline=""); w = csv.writer(f, lineterminator="\n")
    w.writerow(["backend", "b", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "fwd_us", "fwd_bwd_us"])
    for seq, b in [(1024, 4), (2048, 1), (4096, 1), (4096, 2), (8192, 1), (16384, 1), (32768, 1)]:
        for heads, kv, hd, hdv in SHAPES:
            backends = [("cudnn", SDPBackend.CUDNN_ATTENTION)] + ([("flash", SDPBackend.FLASH_ATTENTION)] if seq <= 16384 else [])
            for name, backend in backends:
                if time.time() > deadline:
                    f.close(); return
                q = torch.randn(b, heads, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
                k = torch.randn(b, kv, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
                v = torch.randn(b, kv, seq, hdv, device=dev, dtype=torch.bfloat16, requires_grad=True)
                try:
                    with sdpa_kernel(backend):
                        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != heads)
                        g = torch.randn_like(fwd())
                        tf = per_call_us(lambda: fwd().detach())
                        tfb = per_call_us(lambda: torch.autograd.grad(fwd(), (q, k, v), g))
                    w.writerow([name, b, seq, heads, kv, hd, hdv, f"{tf:.2f}", f"{tfb:.2f}"])
                except Exception as ex:
                    print(name, b, seq, heads, kv, hd, hdv, repr(ex)[:160], flush=True)
                del q, k, v
                f.flush()
    f.close()


if __name__ == "__main__":
    t0 = time.time()
    print(torch.__version__, torch.cuda.get_device_name(), torch.version.cuda, torch.backends.cudnn.version(), flush=True)
    main(t0 + 300)
    print("attention", round(time.time() - t0), flush=True)
