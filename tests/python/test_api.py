"""The Python API of DESIGN.md section 3 (fuser/__init__.py, csrc/api.cpp)."""

import pytest
import torch

import fuser
from helpers import FUSION_GROUP, count_kind, run_optimized, script_from_source

CHAIN = """
def f(x, y):
    return (x * y + 1).relu().sigmoid()
"""


@pytest.fixture(autouse=True)
def fuser_off_after():
    yield
    fuser.disable()
    fuser.set_arg_limit(128)


def test_enable_disable_roundtrip():
    assert not fuser.is_enabled()
    fuser.enable()
    assert fuser.is_enabled()
    fuser.enable()  # idempotent
    assert fuser.is_enabled()
    fuser.disable()
    assert not fuser.is_enabled()


def test_enable_turns_nnc_off_and_disable_restores_it():
    torch._C._jit_set_texpr_fuser_enabled(True)
    fuser.enable()
    assert not torch._C._jit_texpr_fuser_enabled()
    fuser.disable()
    assert torch._C._jit_texpr_fuser_enabled()


def test_context_manager_restores_previous_state():
    with fuser.enabled(True):
        assert fuser.is_enabled()
        with fuser.enabled(False):
            assert not fuser.is_enabled()
        assert fuser.is_enabled()
    assert not fuser.is_enabled()


def test_arg_limit_validation():
    assert fuser.get_arg_limit() == 128
    fuser.set_arg_limit(8)
    assert fuser.get_arg_limit() == 8
    with pytest.raises(ValueError, match="at least 2"):
        fuser.set_arg_limit(1)
    assert fuser.get_arg_limit() == 8


def test_enabled_function_fuses_and_matches_eager():
    fn = script_from_source(CHAIN)
    x, y = torch.randn(64, 33), torch.randn(64, 33)
    fuser.reset_stats()
    with fuser.enabled(True):
        out = run_optimized(fn, x, y)
        graph = torch.jit.last_executed_optimized_graph()
    torch.testing.assert_close(out, (x * y + 1).relu().sigmoid())
    assert count_kind(graph, FUSION_GROUP) == 1
    stats = fuser.stats()
    assert stats["groups_formed"] >= 1
    assert stats["kernel_launches"] >= 1
    assert any("fuser_kernel" in src for src in fuser.kernel_sources())


def test_disabled_function_is_not_fused():
    fn = script_from_source(CHAIN)
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    run_optimized(fn, x, y)
    assert count_kind(torch.jit.last_executed_optimized_graph(), FUSION_GROUP) == 0


def test_stats_reset_and_keys():
    fuser.reset_stats()
    stats = fuser.stats()
    keys = "groups_formed", "kernels_compiled", "disk_cache_hits", "guard_failures"
    for key in (*keys, "kernel_build_us"):
        assert stats[key] == 0
