"""First-compile and disk-cache times of the fuser's kernels, each in a fresh process.

For each benchmark row, a first process with an empty FUSER_CACHE_DIR times the call
that optimizes the graph and builds its kernels (call 2: graph passes, code generation,
NVRTC or the host compiler, module load); a second process with the same cache times the
same call, which must find every kernel on disk. Beside each whole call, the part of it
spent making kernels (fuser.stats()["kernel_build_us"]: lowering, printing, compiling or
reading the disk cache, loading the module), and a steady call.

usage: python tools/compile_times.py elementwise_chain:large:float32,lstm_cell:large:float32 \\
           [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch


def _timed_call(fn, inputs, device: torch.device) -> float:
    """Milliseconds of one call, device work included."""
    start = time.perf_counter()
    fn(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1e3


def measure_row(row: str, device: torch.device) -> dict[str, object]:
    """Runs in the child process: one fresh function, its profiling call, its optimizing
    call (timed, with the stats it moves) and three steady calls (the fastest kept)."""
    import fuser
    from fuser.bench import workloads
    from fuser.bench.jit_flags import jit_flags
    from fuser.bench.modes import MODES

    name, size, dtype_name = row.split(":")
    workload = workloads.WORKLOADS[name]
    inputs = workloads.make_inputs(workload, size, getattr(torch, dtype_name), device)
    mode = MODES["fuser"]
    with jit_flags(mode.flags(device)), torch.no_grad():
        fn = mode.build(workload)
        _timed_call(fn, inputs, device)  # call 1: profiling
        fuser.reset_stats()
        optimizing_ms = _timed_call(fn, inputs, device)
        stats = fuser.stats()
        steady_ms = min(_timed_call(fn, inputs, device) for _ in range(3))
    return {
        "row": row,
        "optimizing_call_ms": round(optimizing_ms, 1),
        "steady_call_ms": round(steady_ms, 3),
        "kernels_compiled": stats["kernels_compiled"],
        "disk_cache_hits": stats["disk_cache_hits"],
        "kernel_build_ms": round(stats["kernel_build_us"] / 1e3, 1),
    }


def run_child(row: str, device: str, cache_dir: str) -> dict[str, object]:
    env = dict(os.environ, FUSER_CACHE_DIR=cache_dir)
    done = subprocess.run(
        [sys.executable, __file__, row, "--device", device, "--child"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="workload:size:dtype, comma-separated")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_row(args.rows, torch.device(args.device))), flush=True)
        return
    header = (
        "row",
        "process",
        "optimizing call ms",
        "of it making kernels ms",
        "steady call ms",
        "compiled",
        "from disk",
    )
    print("  ".join(header))
    for row in args.rows.split(","):
        with tempfile.TemporaryDirectory(prefix="fuser-compile-times-") as cache_dir:
            for process in ("first", "second"):
                r = run_child(row, args.device, cache_dir)
                print(
                    f"{row}  {process}  {r['optimizing_call_ms']}  {r['kernel_build_ms']}  "
                    f"{r['steady_call_ms']}  {r['kernels_compiled']}  {r['disk_cache_hits']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
