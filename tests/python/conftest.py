"""Shared pytest setup. FUSER_SINGLETON=1 keeps groups of a single fusible node, so a
test of one operator fuses it alone; the flag is read once, at the first config() use,
so it is set here, before fuser is imported."""

import os

os.environ.setdefault("FUSER_SINGLETON", "1")

import pytest
import torch

import fuser


@pytest.fixture
def fused():
    """The fuser on, for functions optimized inside the test; the previous state after."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._set_graph_executor_optimize(True)
    torch._C._jit_set_num_profiled_runs(1)  # call 1 profiles, call 2 optimizes
    with fuser.enabled(True):
        yield
