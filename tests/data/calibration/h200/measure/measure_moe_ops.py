#!/usr/bin/env python3
"""The small kernels of a MoE layer around its GEMMs, one NVIDIA GPU with PyTorch (seconds).

Writes to $OUT:
  moe_ops.csv    op,tokens,hidden,experts,topk,t_ms,gbps    router top-k, token permute (gather rows),
                 unpermute (weighted scatter-add of rows), softmax over expert scores.
Each timing is the median of timed repetitions with CUDA events after warm-up.
"""
import csv, os, time, traceback
import torch

import measure_kernels  # its bench(): the median of CUDA-event timings after warm-up

OUT = os.environ.get("OUT", ".")
dev = "cuda"


def bench(fn):
    return measure_kernels.bench(fn, reps=15)


def moe_ops(deadline):
    f = open(os.path.join(OUT, "moe_ops.csv"), "w", newline=""); w = csv.writer(f)
    w.writerow(["op", "tokens", "hidden", "experts", "topk", "t_ms", "gbps"])
    for tokens in [4096, 8192, 16384]:
        for hidden, experts, topk in [(2048, 128, 8), (4096, 128, 8), (7168, 256, 8), (4096, 8, 2), (2880, 128, 4)]:
            if time.time() > deadline:
                f.close(); return
            logits = torch.randn(tokens, experts, device=dev, dtype=torch.float32)
            ms = bench(lambda: torch.softmax(logits, dim=-1))
            w.writerow(["softmax_fp32", tokens, hidden, experts, topk, f"{ms:.5f}", f"{2*4*tokens*experts/ms/1e6:.1f}"])
            ms = bench(lambda: torch.topk(logits, topk, dim=-1))
            w.writerow(["topk_fp32", tokens, hidden, experts, topk, f"{ms:.5f}", f"{4*tokens*experts/ms/1e6:.1f}"])
            x = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
            idx = torch.randint(0, tokens, (tokens * topk,), device=dev)
            ms = bench(lambda: x.index_select(0, idx))
            nbytes = 2 * 2 * tokens * topk * hidden
            w.writerow(["permute_index_select", tokens, hidden, experts, topk, f"{ms:.5f}", f"{nbytes/ms/1e6:.1f}"])
            y = torch.randn(tokens * topk, hidden, device=dev, dtype=torch.bfloat16)
            prob = torch.rand(tokens * topk, 1, device=dev, dtype=torch.bfloat16)
            out = torch.zeros(tokens, hidden, device=dev, dtype=torch.bfloat16)
            ms = bench(lambda: out.index_add_(0, idx, y * prob))
            nbytes = 2 * (3 * tokens * topk * hidden + 2 * tokens * hidden)
            w.writerow(["unpermute_scale_index_add", tokens, hidden, experts, topk, f"{ms:.5f}", f"{nbytes/ms/1e6:.1f}"])
            perm = torch.argsort(idx)
            ms = bench(lambda: torch.argsort(idx))
            w.writerow(["argsort_int64", tokens, hidden, experts, topk, f"{ms:.5f}", f"{2*8*tokens*topk/ms/1e6:.1f}"])
            del x, y, out, logits, idx, perm, prob
            f.flush()
    f.close()


if __name__ == "__main__":
    t0 = time.time()
    print(torch.__version__, torch.cuda.get_device_name(), torch.version.cuda, flush=True)
    for fn, budget in [(moe_ops, 40)]:
        try:
            fn(t0 + budget)
        except Exception:
            traceback.print_exc()
        print(fn.__name__, round(time.time() - t0), flush=True)
