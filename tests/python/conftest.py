"""Shared pytest set-up.

FUSER_SINGLETON=1 keeps groups of a single fusible node, so a test of one operator
fuses it alone; the core reads flags once, at first use, so it is set here, before
fuser is imported. Each test starts with the fuser off, default settings, zero stats.
"""

from __future__ import annotations

import os

os.environ.setdefault("FUSER_SINGLETON", "1")

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import fuser  # noqa: E402

# A complete profiled type, as the profiling executor records it.
T = "Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"
M = "Float(5, 5, strides=[5, 1], requires_grad=0, device=cpu)"


@pytest.fixture(autouse=True)
def clean_fuser_state() -> Iterator[None]:
    limit = fuser.get_arg_limit()
    fuser.disable()
    fuser.reset_stats()
    yield
    fuser.disable()
    fuser.set_arg_limit(limit)


def parse(ir: str) -> torch._C.Graph:
    """Parses IR text in which `$T` stands for the complete 4x5 float type."""
    return torch._C.parse_ir(ir.replace("$T", T).replace("$M", M))


def fused(ir: str) -> torch._C.Graph:
    graph = parse(ir)
    fuser._C.fuse_graph(graph)
    return graph


def groups(graph: torch._C.Graph) -> list[torch._C.Node]:
    return graph.findAllNodes("fuser::FusionGroup", recurse=True)


def kinds(graph: torch._C.Graph) -> list[str]:
    return [n.kind() for n in graph.nodes()]


@pytest.fixture
def fused():
    """The fuser on, for functions optimized inside the test; the previous state after."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._set_graph_executor_optimize(True)
    torch._C._jit_set_num_profiled_runs(1)  # call 1 profiles, call 2 optimizes
    with fuser.enabled(True):
        yield
