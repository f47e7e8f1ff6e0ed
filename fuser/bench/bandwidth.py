"""The device's measured copy bandwidth: the yardstick for a workload's effective GB/s.

Elementwise kernels are memory-bound, so "what fraction of a plain copy's bandwidth does
this reach" says how much is left to gain. The copy is large enough to spill any cache.
"""

from __future__ import annotations

import torch

from fuser.bench.timing import TimingBudget, time_calls, warm_up

COPY_CACHE_MULTIPLE = 8
MIN_COPY_BYTES = 64 * 1024 * 1024
MAX_COPY_BYTES = 1024 * 1024 * 1024


def copy_bytes(cache_bytes: int) -> int:
    return max(MIN_COPY_BYTES, min(MAX_COPY_BYTES, COPY_CACHE_MULTIPLE * cache_bytes))


def copy_bandwidth_gbps(device: torch.device, cache_bytes: int, budget: TimingBudget) -> float:
    """GB/s (1e9 bytes) of `dst.copy_(src)`, counting bytes read plus bytes written."""
    numel = copy_bytes(cache_bytes) // 4
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    warm_up(dst.copy_, [(src,)], calls=3)
    timing = time_calls(dst.copy_, [(src,)], device, budget)
    moved = 2 * numel * src.element_size()
    return moved / (timing.median_us * 1e3)
