"""Seeded random programs with control flow, against eager: test_random_dtypes' mixed-
dtype steps placed before, inside and after an if/else (on a bool parameter or on a
tensor's values) and a for loop over an int parameter, whose carried value may change
dtype from one iteration to the next or is written in place, and which reads the loop
index as a scalar.
Groups then form inside blocks and beside them, and the profiled types of a loop's body
merge its iterations'. Each program is optimized on one draw of arguments and called on
two more (other branch, other trip count, other dtypes and layouts). Each result must
have eager's dtype, shape, strides and values, or TorchScript's where eager differs.
`tools/fuzz_dtypes.py --control-flow` runs many more seeds."""

from __future__ import annotations

import random

import pytest
from test_random_dtypes import SCALARS, groups_over_random_programs, random_scalar, random_step

from helpers import devices

# The scalar parameters after the tensors: s0 the loop's trip count (also a scalar the
# steps may read), s1 the branch taken.
KINDS = ["int", "bool"]


class Program:
    """Lines of a function's body, with value names numbered as they are made."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.count = 0

    def step(self, values: list[str], scalars: list[str], indent: int, name: str = "") -> str:
        """Appends `name = <a random step>` (a new name if none) and returns the name."""
        if not name:
            name = f"v{self.count}"
            self.count += 1
        self.lines.append(f"{' ' * indent}{name} = {random_step(self.rng, values, scalars)}")
        return name


def random_control_program(rng: random.Random) -> tuple[str, int, list[str]]:
    """The source of `f(x0.., s0: int, s1: bool)`, its tensor inputs' count and its
    scalar parameters' kinds."""
    num_inputs = rng.randint(1, 3)
    values = [f"x{i}" for i in range(num_inputs)]
    scalars = [*SCALARS, "s0"]
    p = Program(rng)
    for _ in range(rng.randint(1, 2)):
        values.append(p.step(values, scalars, 4))

    # if/else: each branch makes its own temporaries, then one value both assign.
    condition = rng.choice(["s1", f"bool(({rng.choice(values)} > 0).any())"])
    joined = f"v{p.count}"
    p.count += 1
    p.lines.append(f"    if {condition}:")
    for branch in range(2):
        if branch:
            p.lines.append("    else:")
        local = list(values)
        for _ in range(rng.randint(0, 2)):
            local.append(p.step(local, scalars, 8))
        p.step(local[-2:], scalars, 8, joined)  # mostly from the branch's own values
    values.append(joined)

    # A for loop whose carried value each iteration replaces (its dtype may change), or
    # writes in place (a clone of its own: eager raises where the result's dtype does not
    # cast to the carried one, and so must the function).
    # (The index is named as a parameter is: random_step reads those as scalars.)
    carried = p.step(values, scalars, 4)
    in_place = rng.random() < 0.4
    if in_place:
        target, expression = p.lines[-1].split(" = ", 1)
        p.lines[-1] = f"{target} = ({expression}).clone()"
    p.lines.append("    for si in range(s0):")
    loop_scalars = [*scalars, "si"]
    local = [*values, carried]
    for _ in range(rng.randint(0, 2)):
        local.append(p.step(local, loop_scalars, 8))
    if in_place:
        other = rng.choice([local[-1], random_scalar(rng, loop_scalars)])
        write = rng.choice([f"add_({other})", f"sub_({other})", f"mul_({other})", "clamp_(-2, 3)"])
        p.lines.append(f"        {carried}.{write}")
    else:
        p.step([carried, local[-1]], loop_scalars, 8, carried)
    values.append(carried)

    for _ in range(rng.randint(0, 2)):
        values.append(p.step(values, scalars, 4))
    computed = values[num_inputs:]
    returned = sorted(set(rng.sample(computed, rng.randint(1, min(3, len(computed))))))
    if computed[-1] not in returned:
        returned.append(computed[-1])
    signature = ", ".join([*values[:num_inputs], "s0: int", "s1: bool"])
    body = "\n".join(p.lines)
    source = f"def f({signature}):\n{body}\n    return ({', '.join(returned)},)\n"
    return source, num_inputs, KINDS


@pytest.mark.parametrize("device", devices())
def test_random_control_flow_programs_match_eager(fused: None, device: str) -> None:
    formed, failures = groups_over_random_programs(
        20261130, 40, device, random_control_program, calls=3
    )
    assert not failures, "\n---\n".join(failures[:5])
    assert formed > 20  # most programs fuse something: the check is of fused code
