"""Test helpers: fresh scripted functions, counting fused nodes, running code in a
clean subprocess (for flags the core reads once)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import torch

FUSION_GROUP = "fuser::FusionGroup"
TYPE_GUARD = "fuser::TypeGuard"


def script_from_source(source: str, name: str = "f") -> Any:
    """A freshly compiled scripted function: torch.jit.script caches by function object,
    so every test builds its own from text."""
    return getattr(torch.jit.CompilationUnit(textwrap.dedent(source)), name)


def all_nodes(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from all_nodes(sub)


def count_kind(graph: Any, kind: str) -> int:
    return sum(1 for n in all_nodes(graph) if n.kind() == kind)


def run_optimized(fn: Any, *args: Any, calls: int = 3) -> Any:
    """Calls `fn` enough times for the profiling executor to optimize it (call 1
    profiles, call 2 optimizes); returns the last result."""
    out = None
    for _ in range(calls):
        out = fn(*args)
    return out


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs `code` in a new interpreter with the given extra environment."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_")}
    full_env["FUSER_CACHE_DIR"] = os.environ.get("FUSER_CACHE_DIR", "/tmp/fuser-test-cache")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
