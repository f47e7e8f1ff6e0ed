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
    args = host_cost._inputs(pattern, groups, torch.device("cpu"))
    namespace: dict = {"torch": torch}
    exec(source, namespace)
    expected = namespace["f"](*args)
    fuser.enable()
    fn = torch.jit.CompilationUnit(source).f
    with torch.no_grad():
        for _ in range(3):
            out = fn(*args)
    assert fuser.stats()["groups_formed"] == groups
    for got, want in zip(out, expected, strict=True):
        torch.testing.assert_close(got, want)


def test_measure_reports_the_groups_it_timed() -> None:
    result = host_cost.measure("broadcast4d", 2, torch.device("cpu"))
    assert result["groups"] == 2
    assert result["fuser"] > 0 and result["script"] > 0
    assert result["fuser_per_group"] == pytest.approx(result["fuser"] / 2)
