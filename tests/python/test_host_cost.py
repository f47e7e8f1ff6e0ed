"""The host-cost benchmark times what it names: G separate groups, each its pattern."""

from __future__ import annotations

import pytest
import torch

import fuser
from fuser.bench import host_cost


@pytest.mark.parametrize("pattern", list(host_cost.PATTERNS))
def test_one_group_per_chain_and_eager_values(pattern: str) -> None:
    groups = 3
    source = host_cost._source(pattern, groups)
    args = host_cost._inputs(pattern, torch.device("cpu"))
    namespace: dict = {"torch": torch}
    exec(source, namespace)
    expected = namespace["f"](*args)
    fuser.enable()
    # As the benchmark times them: chains reading one tensor are not merged as siblings.
    siblings_before = fuser._C._set_elementwise_siblings(False)
    try:
        fn = torch.jit.CompilationUnit(source).f
        with torch.no_grad():
            for _ in range(3):
                out = fn(*args)
    finally:
        fuser._C._set_elementwise_siblings(siblings_before)
    assert fuser.stats()["groups_formed"] == groups
    assert isinstance(out, list)  # no per-element type building for a tuple
    for got, want in zip(out, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_measure_reports_the_groups_it_timed() -> None:
    result = host_cost.measure("broadcast4d", 4, torch.device("cpu"))
    assert set(result) == {"unfused", "fuser"}  # no NNC on the CPU wheel
    assert result["fuser"]["groups"] == 4
    assert result["unfused"]["groups"] == 0
    for mode in result.values():
        assert mode["call"] > 0
        assert mode["per_group"] == pytest.approx(mode["call"] / 4)


def test_marginal_cost_is_the_slope_between_two_group_counts(monkeypatch) -> None:
    # Calls of n chains cost 7 + 2 n: each group costs 2, whatever the call's own 7.
    monkeypatch.setattr(
        host_cost, "_timed_call_us", lambda mode, pattern, n, device: (7.0 + 2.0 * n, n)
    )
    result = host_cost.measure("flat", 16, torch.device("cpu"))
    assert result["fuser"]["marginal"] == pytest.approx(2.0)
    assert result["fuser"]["per_group"] == pytest.approx((7.0 + 32.0) / 16)
