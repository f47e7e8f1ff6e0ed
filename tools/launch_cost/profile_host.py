"""Where the host time of fused calls goes: fuser.bench.host_cost's functions called for
some seconds under the sampler (libsampler.so), device synchronized every few calls.

    python tools/launch_cost/profile_host.py LIBSAMPLER OUT_PREFIX [--device cuda] [--pattern flat]
"""

import argparse
import ctypes
import time

import torch

import fuser
from fuser.bench import host_cost

parser = argparse.ArgumentParser()
parser.add_argument("sampler")
parser.add_argument("out")
parser.add_argument("--device", default="cuda")
parser.add_argument("--pattern", default="flat")
parser.add_argument("--groups", type=int, default=16)
parser.add_argument("--seconds", type=float, default=4.0)
parser.add_argument("--modes", default="fuser,script")
args = parser.parse_args()
lib = ctypes.CDLL(args.sampler)
device = torch.device(args.device)
inputs = host_cost._inputs(args.pattern, device)


def sync() -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


with torch.no_grad():
    for mode in args.modes.split(","):
        (fuser.enable if mode == "fuser" else fuser.disable)()
        fn = torch.jit.CompilationUnit(host_cost._source(args.pattern, args.groups)).f
        for _ in range(5):
            fn(*inputs)
        sync()
        lib.sampler_start(50)
        end = time.perf_counter() + args.seconds
        calls = 0
        while time.perf_counter() < end:
            for _ in range(8):
                fn(*inputs)
            calls += 8
            sync()
        lib.sampler_stop(f"{args.out}_{mode}_{args.pattern}.txt".encode(), 90)
        print(mode, args.pattern, "calls", calls, "stats", fuser.stats()["kernel_launches"])
        fuser.disable()
