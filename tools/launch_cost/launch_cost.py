"""The same launch paths timed inside a process that has imported torch and run CUDA ops,
then torch's own tiny ops: python tools/launch_cost/launch_cost.py BUILD_DIR"""

import ctypes
import sys
import time

import torch

build = sys.argv[1]
x = torch.randn(64, device="cuda")
for _ in range(100):
    torch.sigmoid(x)
torch.cuda.synchronize()
lib = ctypes.CDLL(f"{build}/liblaunch_cost.so")
lib.launch_cost_run(f"{build}/tiny.cubin".encode())
for per_sample in (16, 128):
    samples = []
    for _ in range(60):
        t0 = time.perf_counter()
        for _ in range(per_sample):
            torch.sigmoid(x)
        samples.append((time.perf_counter() - t0) / per_sample * 1e6)
        torch.cuda.synchronize()
    samples.sort()
    median = samples[len(samples) // 2]
    print(f"torch.sigmoid on 64 floats, {per_sample} per sample: {median:.2f} us per call")
