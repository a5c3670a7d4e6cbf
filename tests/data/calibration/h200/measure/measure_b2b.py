#!/usr/bin/env python3
"""Kernel times without the host's launch latency (about 2 minutes on one H200).

Every timing here is CUDA events around one replay of a CUDA graph holding `reps` launches of
the same kernel (enough for about 2 ms of GPU time, at most 200), divided by `reps`, median of
5 replays: the GPU never waits for the host, so a small kernel's time is its own plus the gap
between back-to-back kernels in a graph, not the ~20 us a single launch from Python costs.

Writes to $OUT:
  gemm_b2b.csv      m,n,k,dtype,layout,us,tflops    layout NT = x @ w.t() (forward), NN = dy @ w (dgrad),
                    TN = dy.t() @ x (wgrad): an m x n output reduced over k in each
  moe_b2b.csv       model,hidden,ffn,experts,tokens_per_expert,gemm,impl,us,tflops   as measure_moe.py
  quant_b2b.csv     rows,cols,op,us,gbps
"""
import csv, math, os, statistics, time
import torch

OUT = os.environ.get("OUT", ".")
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
FP8 = torch.float8_e4m3fn


def per_launch_us(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); torch.cuda.synchronize()
    reps = max(3, min(200, math.ceil(2000.0 / max(a.elapsed_time(b) * 1000, 1.0))))
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        run = g.replay
    except Exception as ex:  # not capturable: back-to-back eager launches
        print("no graph:", repr(ex)[:120], flush=True)
        torch.cuda.synchronize()
        g = None
        def run():
            for _ in range(reps):
                fn()
    run(); torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a.record(); run(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / reps)
    del g
    return statistics.median(ts)


def gemms(deadline):
    f = open(os.path.join(OUT, "gemm_b2b.csv"), "w", newline=""); w = csv.writer(f)
    w.writerow(["m", "n", "k", "dtype", "layout", "us", "tflops"])
    ms = [1024, 4096, 8192, 16384]
    dims = [1024, 2048, 4096, 6144, 8192, 14336, 16384, 28672]
    one = torch.ones((), device=dev)
    for m in ms:
        for n in dims:
            for k in dims:
                if time.time() > deadline:
                    f.close(); return
                fl = 2 * m * n * k
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                wt = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
                t = per_launch_us(lambda: x @ wt.t())
                w.writerow([m, n, k, "bf16", "NT", f"{t:.3f}", f"{fl/t/1e6:.1f}"])
                x8, w8 = x.to(FP8), wt.to(FP8)
                t = per_launch_us(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                w.writerow([m, n, k, "fp8_e4m3", "NT", f"{t:.3f}", f"{fl/t/1e6:.1f}"])
                if m in (4096, 16384):
                    wk = torch.randn(k, n, device=dev, dtype=torch.bfloat16)  # dgrad: [m,k] @ [k,n]
                    t = per_launch_us(lambda: x @ wk)
                    w.writerow([m, n, k, "bf16", "NN", f"{t:.3f}", f"{fl/t/1e6:.1f}"])
                    xt = torch.randn(k, m, device=dev, dtype=torch.bfloat16)  # wgrad: [k,m].t() @ [k,n]
                    t = per_launch_us(lambda: xt.t() @ wk)
                    w.writerow([m, n, k, "bf16", "TN", f"{t:.3f}", f"{fl/t/1e6:.1f}"])
                    del wk, xt
                del x, wt, x8, w8
                f.flush()
    f.close()


MODELS = [
    ("mixtral-8x7b", 4096, 14336, [1, 2, 4, 8]),
    ("qwen3-30b-a3b", 2048, 768, [8, 16, 32, 128]),
    ("qwen3-235b-a22b", 4096, 1536, [4, 8, 16, 32]),
    ("deepseek-v3", 7168, 2048, [4, 8, 16, 32]),
    ("gpt-oss-120b", 2880, 2880, [4, 16, 32]),
]
TOKENS = [128, 256, 512, 1024, 2048, 4096, 8192]


def moe(deadline):
    f = open(os.path.join(OUT, "moe_b2b.csv"), "w", newline=""); w = csv.writer(f)
    w.writerow(["model", "hidden", "ffn", "experts", "tokens_per_expert", "gemm", "impl", "us", "tflops"])
    for name, h, ffn, elist in MODELS:
        for e in elist:
            for t in TOKENS:
                if e * t > 131072:
                    continue
                if time.time() > deadline:
                    f.close(); return
                tot = e * t
                offs = torch.arange(1, e + 1, device=dev, dtype=torch.int32) * t
                for gemm, k, n in [("fc1", h, 2 * ffn), ("fc2", ffn, h)]:
                    fl = 2 * tot * k * n
                    x = torch.randn(tot, k, device=dev, dtype=torch.bfloat16)
                    wt = torch.randn(e, n, k, device=dev, dtype=torch.bfloat16)
                    xs, w0 = x[:t].contiguous(), wt[0]
                    rows = [("grouped", per_launch_us(lambda: torch._grouped_mm(x, wt.transpose(1, 2), offs=offs)), fl),
                            ("single", per_launch_us(lambda: xs @ w0.t()), fl / e)]
                    if gemm == "fc1":
                        dy = torch.randn(tot, n, device=dev, dtype=torch.bfloat16)
                        rows.append(("grouped_wgrad", per_launch_us(lambda: torch._grouped_mm(dy.t(), x, offs=offs)), fl))
                        dys, xs2 = dy[:t].contiguous(), x[:t].contiguous()
                        rows.append(("single_wgrad", per_launch_us(lambda: dys.t() @ xs2), fl / e))
                        del dy
                    for impl, us, flops in rows:
                        w.writerow([name, h, ffn, e, t, gemm, impl, f"{us:.3f}", f"{flops/us/1e6:.1f}"])
                    del x, wt
                f.flush()
    f.close()


def quant(deadline):
    f = open(os.path.join(OUT, "quant_b2b.csv"), "w", newline=""); w = csv.writer(f)
    w.writerow(["rows", "cols", "op", "us", "gbps"])
    for rows in [4096, 16384, 65536]:
        for cols in [4096, 8192, 14336, 28672]:
            if time.time() > deadline:
                f.close(); return
            x = torch.randn(rows, cols, device=dev, dtype=torch.bfloat16)
            n = rows * cols
            s = torch.tensor(2.0, device=dev)
            for op, fn, nbytes in [
                ("amax", lambda: x.abs().amax(), 2 * n),
                ("cast_fp8", lambda: (x * s).to(FP8), 3 * n),
                ("copy_bf16", lambda: x.clone(), 4 * n),
            ]:
                t = per_launch_us(fn)
                w.writerow([rows, cols, op, f"{t:.3f}", f"{nbytes/t/1e3:.1f}"])
            del x
    f.close()


if __name__ == "__main__":
    t0 = time.time()
    print(torch.__version__, torch.cuda.get_device_name(), torch.version.cuda, flush=True)
    for fn, budget in [(quant, 30), (moe, 120), (gemms, 260)]:
        fn(t0 + budget)
        print(fn.__name__, round(time.time() - t0), flush=True)
