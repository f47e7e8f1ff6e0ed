"""Facts about the machine a run measured: cache sizes and the metadata in the JSON file."""

from __future__ import annotations

import datetime
import glob
import importlib.metadata
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

import fuser

FALLBACK_CACHE_BYTES = 32 * 1024 * 1024
_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def _parse_cache_size(text: str) -> int:
    """'32768K' -> 33554432 (the format of /sys/devices/system/cpu/*/cache/*/size)."""
    text = text.strip().upper()
    if text and text[-1] in _UNITS:
        return int(text[:-1]) * _UNITS[text[-1]]
    return int(text)


def cpu_last_level_cache_bytes(sys_cache_dir: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """Size of the highest cache level the kernel reports for CPU 0, or 32 MiB."""
    best_level, best_size = 0, 0
    for index in glob.glob(os.path.join(sys_cache_dir, "index*")):
        try:
            level = int(Path(index, "level").read_text())
            size = _parse_cache_size(Path(index, "size").read_text())
        except (OSError, ValueError):
            continue
        if level > best_level or (level == best_level and size > best_size):
            best_level, best_size = level, size
    return best_size or FALLBACK_CACHE_BYTES


def last_level_cache_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(getattr(props, "L2_cache_size", 0)) or FALLBACK_CACHE_BYTES
    return cpu_last_level_cache_bytes()


def available_devices() -> list[torch.device]:
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices


def _cpu_model_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_model_name() or platform.processor() or platform.machine()


def fuser_version() -> str | None:
    version = getattr(fuser, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("fuser")
    except importlib.metadata.PackageNotFoundError:
        return None


def load_average() -> float | None:
    """The 1-minute load average: other work on the machine makes timings noisy."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def busy_note(load: float | None) -> str | None:
    """A warning when other work held half the cores or more as the run began: torch's
    intra-op threads then wait on each other and medians can move several-fold."""
    cores = os.cpu_count() or 1
    if load is None or load < 0.5 * cores:
        return None
    return (
        f"note: the machine was busy when the run began (load {load:.1f} on {cores} cores);"
        " timings are noisy"
    )


def machine_metadata(devices: list[torch.device]) -> dict[str, Any]:
    """Where and with what a run was measured, for the JSON file."""
    return {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "load_average": load_average(),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "cuda_device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "fuser_version": fuser_version(),
        "devices": {
            str(d): {
                "name": device_name(d),
                "last_level_cache_bytes": last_level_cache_bytes(d),
            }
            for d in devices
        },
    }
