"""Tells the core where pip-installed CUDA libraries (libnvrtc) live, so the CUDA backend
can dlopen them on machines where they are not on the loader's path."""

from __future__ import annotations

import sys
from pathlib import Path

from fuser import _C

_CANDIDATE_SUBDIRS = ("nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib", "nvidia/cu12/lib", "torch/lib")


def register_library_dirs() -> None:
    add = getattr(_C, "add_library_search_dir", None)
    if add is None:
        return
    for entry in sys.path:
        for sub in _CANDIDATE_SUBDIRS:
            candidate = Path(entry) / sub
            if candidate.is_dir():
                add(str(candidate))
