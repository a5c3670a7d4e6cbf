#!/usr/bin/env python3
"""How much a GEMM slows when a communication-like copy kernel runs beside it (one NVIDIA GPU,
PyTorch and Triton, about a minute).

NCCL's collectives run as kernels of a few CTAs (one per channel) that copy through memory
while the GEMMs they overlap run on the other SMs. This stands a Triton copy kernel of G
programs (G CTAs) in for them: it copies a 1 GiB buffer's blocks round robin on a second stream
while a loop of GEMMs runs on the first.

Writes interference.csv to $OUT:
  m,n,k,ctas,gemm_alone_us,gemm_with_copy_us,slowdown,copy_alone_gbps
gemm_*_us: one GEMM's time, the mean over a loop of about 50 ms of back-to-back GEMMs timed with
CUDA events, alone and while the copy (sized to run twice as long) runs; copy_alone_gbps: bytes
read and written per second by the copy kernel of that many CTAs alone.
"""
import csv, os, time
import torch
import triton
import triton.language as tl

OUT = os.environ.get("OUT", ".")
dev = "cuda"
BLOCK = 4096


@triton.jit
def copy_kernel(src, dst, nblocks, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for it in range(iters):
        b = (pid + it * nprog) % nblocks
        offs = b * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs))


def events():
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def main():
    src = torch.randn(256 * 1024 * 1024, device=dev)  # 1 GiB of fp32
    dst = torch.empty_like(src)
    nblocks = src.numel() // BLOCK
    gemm_stream, copy_stream = torch.cuda.Stream(), torch.cuda.Stream()
    f = open(os.path.join(OUT, "interference.csv"), "w", newline="")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["m", "n", "k", "ctas", "gemm_alone_us", "gemm_with_copy_us", "slowdown", "copy_alone_gbps"])
    for m, n, k in [(8192, 8192, 8192), (16384, 3584, 8192), (16384, 8192, 1024), (4096, 4096, 4096)]:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            a @ b.t()
        torch.cuda.synchronize()
        e0, e1 = events()
        e0.record(); a @ b.t(); e1.record(); torch.cuda.synchronize()
        reps = max(10, int(50.0 / max(e0.elapsed_time(e1), 0.01)))  # about 50 ms of GEMMs

        def gemm_loop():
            with torch.cuda.stream(gemm_stream):
                g0, g1 = events()
                g0.record(gemm_stream)
                for _ in range(reps):
                    a @ b.t()
                g1.record(gemm_stream)
            return g0, g1

        g0, g1 = gemm_loop(); torch.cuda.synchronize()
        alone_us = g0.elapsed_time(g1) * 1000 / reps
        for ctas in [8, 16, 32, 64]:
            # Size the copy to outlast the GEMM loop: time a short run first.
            copy_kernel[(ctas,)](src, dst, nblocks, 64, BLOCK=BLOCK)
            torch.cuda.synchronize()
            c0, c1 = events()
            c0.record(); copy_kernel[(ctas,)](src, dst, nblocks, 4096, BLOCK=BLOCK); c1.record(); torch.cuda.synchronize()
            per_iter_ms = c0.elapsed_time(c1) / 4096
            iters = int(alone_us * reps / 1000 * 2 / per_iter_ms) + 1  # twice the loop's time
            copy_alone_gbps = ctas * 4096 * BLOCK * 8 / (c0.elapsed_time(c1) / 1000) / 1e9
            with torch.cuda.stream(copy_stream):
                copy_kernel[(ctas,)](src, dst, nblocks, iters, BLOCK=BLOCK)
            time.sleep(0.002)  # let the copy start first
            g0, g1 = gemm_loop()
            torch.cuda.synchronize()
            with_us = g0.elapsed_time(g1) * 1000 / reps
            w.writerow([m, n, k, ctas, f"{alone_us:.2f}", f"{with_us:.2f}", f"{with_us / alone_us:.3f}",
                        f"{copy_alone_gbps:.0f}"])
            f.flush()
            print(m, n, k, ctas, round(alone_us, 1), round(with_us, 1), round(with_us / alone_us, 3), flush=True)
    f.close()


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(), triton.__version__, flush=True)
    main()
