"""Benchmark (run by hand, docs/performance.md): a 100-point sweep through the Python module
against the same sweep through `syssim sweep`, with the trace cache warm for both and no result cache
(`use_cache=False`, `--no-cache`): every point simulated.

    PYTHONPATH=build/python python3 tests/bench/python_sweep.py [build/bin/syssim]

Prints the best of five rounds of each and their ratio (issue 22: Python no more than 10%
slower). Both use one thread per core."""

import json
import os
import subprocess
import sys
import time

import syssim

SYSSIM = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "bin", "syssim")
OVER = {"parallelism.tp": [1, 2, 4, 8], "training.micro_batch": [1, 2, 4, 8, 16],
        "training.global_batch": [128, 256, 512, 1024, 2048]}
COMMAND = [SYSSIM, "sweep", "llama3-8b", "--hardware", "h100-sxm-80gb", "--dp", "8", "--format", "json",
           "--no-cache"] + [f"--over={path}={','.join(map(str, values))}" for path, values in OVER.items()]


def python_sweep():
    return syssim.sweep(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=syssim.ParallelismConfig(dp=8),
                        over=OVER, use_cache=False)


def best_of(rounds, run):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    points = len(python_sweep())  # also warms the trace cache both use
    command_rows = json.loads(subprocess.run(COMMAND, check=True, capture_output=True, text=True).stdout)["points"]
    assert points == len(command_rows) == 100, (points, len(command_rows))
    python_s = best_of(5, python_sweep)
    command_s = best_of(5, lambda: subprocess.run(COMMAND, check=True, capture_output=True))
    print(f"points: {points}")
    print(f"python syssim.sweep: {python_s * 1e3:.0f} ms")
    print(f"syssim sweep:        {command_s * 1e3:.0f} ms")
    print(f"python / command:    {python_s / command_s:.3f}")


if __name__ == "__main__":
    main()
