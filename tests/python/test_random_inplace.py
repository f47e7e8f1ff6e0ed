"""Seeded random programs of in-place writes, against eager: writes of table ops to
intermediates, to views of intermediates and to inputs (masked_fill_ among them), reads
of a value before and after it is written, aliases, inputs that alias each other, writes
in loops and branches, reductions and other dtypes now and then, several values
returned. Making a write functional (csrc/passes/inplace.cpp) is only right where no
alias can see the difference, so each program, scripted, under no_grad, frozen, and
called once optimized on inputs of other layouts, must give eager's output shapes,
dtypes, strides and values and leave the inputs as eager does. The comparison allows
two known deviations, at assert_like_eager and strides_of_longer_dims."""

from __future__ import annotations

import functools
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
import torch

import fuser
from helpers import (
    FUSION_GROUP,
    all_nodes,
    count_kind,
    devices,
    eager_from_source,
    script_from_source,
)

SCALARS = ["0.5", "2.0", "-1.0", "0.25"]
UNARY = [
    "torch.relu({a})",
    "torch.sigmoid({a})",
    "torch.tanh({a})",
    "torch.exp({a}.clamp(-3.0, 3.0))",
    "{a}.clamp(min=-0.5, max=0.75)",
    "torch.nn.functional.gelu({a})",
    "torch.nn.functional.hardswish({a})",
    "{a} * {s}",
    "{s} - {a}",
    "{a} / {s}",
    "-{a}",
    "{a}.abs()",
]
BINARY = [
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "{a} / ({b}.abs() + 0.5)",
    # Against a constant: two computed values can tie in eager and differ by an ulp fused.
    "torch.where({a} > 0.25, {a}, {b} * 0.5)",
    "torch.maximum({a}, {b})",
    "torch.add({a}, {b}, alpha={s})",
]
# Calls that write their first operand `y`, whether a name or a view expression.
INPLACE_UNARY = [
    "{y}.mul_({s})",
    "{y}.add_({s})",
    "{y}.div_({s})",
    "{y}.relu_()",
    "{y}.sigmoid_()",
    "{y}.tanh_()",
    "{y}.neg_()",
    "{y}.abs_()",
    "{y}.exp_()",
    "{y}.sqrt_()",
    "{y}.pow_(2)",
    "{y}.clamp_(min=-1.0, max=1.0)",
    "{y}.clamp_min_(0.1)",
    "{y}.fill_({s})",
    "{y}.zero_()",
    "{y}.mul_(torch.tensor(2.0, dtype=torch.float64))",
    "torch.relu_({y})",
    "torch.nn.functional.relu({y}, inplace=True)",
    "torch.nn.functional.silu({y}, inplace=True)",
    "torch.nn.functional.hardswish({y}, inplace=True)",
    "torch.nn.functional.leaky_relu({y}, 0.2, inplace=True)",
    "torch.nn.functional.hardtanh({y}, -0.5, 0.5, inplace=True)",
    "torch.nn.functional.elu({y}, inplace=True)",
]
INPLACE_BINARY = [
    "{y}.add_({z})",
    "{y}.add_({z}, alpha={s})",
    "{y}.sub_({z}, alpha=2.0)",
    "{y}.mul_({z})",
    "{y}.mul_({z}[0])",
    "{y}.div_({z}.abs() + 1.0)",
    "{y}.copy_({z})",
    "{y}.addcmul_({z}, {z}, value=0.5)",
    "{y}.lerp_({z}, 0.25)",
    "{y}.clamp_({z}, {z} + 1.0)",
    "{y}.add_({y})",
    "{y}.mul_({y})",
]
# Drawn more often than the others: made functional, masked_fill_ must keep self's
# strides where ATen's masked_fill returns a row-major copy (fuser::masked_fill_like_self).
MASKED_FILLS = [
    "{y}.masked_fill_({y} > 0.5, 0.0)",
    "{y}.masked_fill_({z} > 0.0, 0.5)",
    "{y}.masked_fill_({z} < 0.0, torch.tensor(0.25))",
]
# Writes Python allows to a name only (`y.t() += z` is no statement).
AUGMENTED = ["{y} += {s}", "{y} *= {s}", "{y} += {z}", "{y} -= {z}", "{y} *= {z}"]
# Writes through out=; only where `y` and `z` have one dtype: plain TorchScript rejects
# `torch.mul(z, 2.0, out=y)` of another dtype, which eager casts.
OUT_WRITES = [
    "torch.add({y}, {z}, out={y})",
    "torch.mul({z}, 2.0, out={y})",
    "torch.sigmoid({z}, out={y})",
]
VIEWS = [
    "{y}[0]",
    "{y}[-1]",
    "{y}[1:]",
    "{y}[:, 1:3]",
    "{y}[..., ::2]",
    "{y}.t()",
    "{y}.transpose(0, 1)",
    "{y}.permute(2, 0, 1)",
    "{y}.select(-1, 2)",
    "{y}.narrow(-1, 1, 3)",
    "{y}.unsqueeze(0)",
    "{y}.squeeze(0)",
    "{y}.view(-1)",
    "{y}.reshape(-1)",  # a view of a row-major `y`, else a copy
    "{y}.flatten()",
]
REDUCTIONS = [
    "{a}.sum(-1)",
    "{a}.sum()",
    "{a}.sum(0, keepdim=True)",
    "{a}.mean(-1, keepdim=True)",
    "{a}.amax(-1)",
]
OTHER_DTYPES = [
    "{a}.double()",
    "{a}.double() * 2.0",
    "{a}.to(torch.float64)",
    "({a} > 0.0)",
    "({a} * 4.0).to(torch.int64)",
]
BASE_SHAPES = [(4, 8), (2, 4, 8), (3, 5), (6, 40), (3, 16, 33)]
LAYOUTS = ["contiguous", "contiguous", "transposed", "transposed", "sliced"]
# The last input as a view of the first, so that inputs alias each other.
INPUT_VIEWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "x0": lambda x: x,
    "x0[0]": lambda x: x[0],
    "x0.transpose(-1, -2)": lambda x: x.transpose(-1, -2),
    "x0[..., 1:]": lambda x: x[..., 1:],
    "x0.view(-1)": lambda x: x.view(-1),
    "x0.unsqueeze(0)": lambda x: x.unsqueeze(0),
}
SEEDS = range(20261130, 20261130 + 100)
# "relayout": "script" called a fourth time on inputs of other layouts, which the guard
# does not check.
VARIANTS = ["script", "no_grad", "frozen", "relayout"]
INPLACE_KIND = re.compile(r"aten::\w*[^_]_$")  # aten::add_, not aten::__and__


def with_layout(values: torch.Tensor, layout: str) -> torch.Tensor:
    """A fresh tensor equal to `values`: row-major, transposed in its last two dims, or
    every other element of a wider one."""
    if layout == "transposed" and values.dim() >= 2:
        # A copy even where the transpose is row-major already (a size-1 dim).
        row_major = values.transpose(-1, -2).clone(memory_format=torch.contiguous_format)
        return row_major.transpose(-1, -2)
    if layout == "sliced":
        wide = values.new_zeros(*values.shape[:-1], 2 * values.shape[-1])
        wide[..., ::2] = values
        return wide[..., ::2]
    return values.clone()


def other_layout(layout: str, shape: tuple[int, ...]) -> str:
    """A layout other than `layout` for an input of `shape`."""
    if layout != "contiguous":
        return "contiguous"
    return "transposed" if len(shape) >= 2 and min(shape[-2:]) > 1 else "sliced"


@dataclass
class Program:
    """A generated function: its statements, what it returns, and its inputs' values and
    layouts."""

    body: list[str]
    returned: list[str]
    values: list[torch.Tensor]
    layouts: list[str]
    input_view: str | None  # the last input is this view of x0 (INPUT_VIEWS), if any

    def parameters(self) -> list[str]:
        return [f"x{i}" for i in range(len(self.values) + (self.input_view is not None))]

    def source(self, header: str = "def f(") -> str:
        """The program as a function, or as a module's forward (`def forward(self, `)."""
        body = "".join("    " + line.replace("\n", "\n    ") + "\n" for line in self.body)
        returned = ", ".join(self.returned)
        return f"{header}{', '.join(self.parameters())}):\n{body}    return ({returned},)\n"

    def inputs(self, device: str, relayout: bool = False) -> list[torch.Tensor]:
        """Fresh inputs on `device` (each call may write them), in their layouts or, with
        `relayout`, in others."""
        args = []
        for values, layout in zip(self.values, self.layouts, strict=True):
            layout = other_layout(layout, values.shape) if relayout else layout
            args.append(with_layout(values.to(device), layout))
        if self.input_view is not None:
            args.append(INPUT_VIEWS[self.input_view](args[0]))
        return args


class Statement(NamedTuple):
    """A line of the body (maybe a loop or an if), the name it defines, and the value
    whose storage it writes."""

    line: str
    defines: str | None = None
    writes: str | None = None


class ProgramBuilder:
    """Grows a program a statement at a time; a statement stays if eager runs the program
    so far without error or warning and its values stay finite and moderate."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        base = rng.choice(BASE_SHAPES)
        shapes = [base] + [self.broadcast_shape(base) for _ in range(rng.randint(1, 2))]
        rng.shuffle(shapes)
        generator = torch.Generator().manual_seed(seed)
        values = [torch.randn(shape, generator=generator) for shape in shapes]
        layouts = [rng.choice(LAYOUTS) for _ in shapes]
        self.program = Program([], [], values, layouts, None)
        if rng.random() < 0.15:
            self.program.input_view = rng.choice(list(INPUT_VIEWS))
            if not self.runs():
                self.program.input_view = None
        self.inputs = self.program.parameters()
        self.defined: list[str] = []
        self.written: list[str] = []
        self.count = 0
        self.scope: dict[str, Any] = {}

    def broadcast_shape(self, base: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts to `base`: itself, its last dim, or size-1 dims in it."""
        ones = (1,) * (len(base) - 1)
        return self.rng.choice([base, base, base[-1:], ones + base[-1:], base[:1] + ones])

    def runs(self, extra: str | None = None) -> bool:
        """Whether eager runs the program (with `extra` appended) cleanly; keeps its
        variables for the statements that follow."""
        program = self.program
        lines = program.body + ([extra] if extra else [])
        every_variable = ["locals()"]
        source = Program(lines, every_variable, program.values, program.layouts, program.input_view)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # out= resizing, say
                scope = eager_from_source(source.source())(*program.inputs("cpu"))[0]
        except Exception:  # noqa: BLE001 (any eager failure rejects the statement)
            return False
        for value in scope.values():
            if isinstance(value, torch.Tensor) and value.numel():
                magnitude = value.double().abs()
                if not magnitude.isfinite().all() or magnitude.max() > 1e4:
                    return False
        self.scope = scope
        return True

    def pick(self, names: list[str] | None = None) -> str:
        """One of `names`; where there are none, any value."""
        return self.rng.choice(names or self.inputs + self.defined)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def value(self) -> Statement:
        rng = self.rng
        s = rng.choice(SCALARS)
        if rng.random() < 0.4:
            expr = rng.choice(UNARY).format(a=self.pick(), s=s)
        else:
            expr = rng.choice(BINARY).format(a=self.pick(), b=self.pick(), s=s)
        name = self.fresh("t")
        return Statement(f"{name} = {expr}", defines=name)

    def write(self, owner: str, through_view: bool) -> Statement:
        """A write to `owner`, or to a view of it."""
        rng = self.rng
        # Another value than `owner` (templates write `{y}.add_({y})` where they mean it).
        s, z = rng.choice(SCALARS), self.pick([n for n in self.inputs + self.defined if n != owner])
        target = rng.choice(VIEWS).format(y=owner) if through_view else owner
        roll = rng.random()
        if roll < 0.25:
            templates = MASKED_FILLS
        elif roll < 0.45 and not through_view:
            same_dtype = self.scope[owner].dtype == self.scope[z].dtype
            templates = AUGMENTED + (OUT_WRITES if same_dtype else [])
        else:
            templates = rng.choice([INPLACE_UNARY, INPLACE_BINARY])
        line = rng.choice(templates).format(y=target, z=z, s=s)
        if line.startswith(target + ".") and rng.random() < 0.15:
            name = self.fresh("w")  # the write's result: an alias of `owner`
            return Statement(f"{name} = {line}", defines=name, writes=owner)
        return Statement(line, writes=owner)

    def control_flow(self) -> Statement:
        """Writes in a loop of two steps, or in the branches of an if."""
        rng = self.rng
        writes = [self.write(self.pick(), rng.random() < 0.3).line for _ in range(2)]
        if rng.random() < 0.5:
            return Statement("for _ in range(2):\n    " + "\n    ".join(writes))
        condition = f"bool({self.pick()}.sum() > 0.0)"
        return Statement(f"if {condition}:\n    {writes[0]}\nelse:\n    {writes[1]}")

    def statement(self) -> Statement:
        """A random statement: a value, a write (to an intermediate, through a view of one,
        to an input), an alias, a reduction, a read after a write, another dtype, or
        writes in a loop or an if."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.2 or not self.defined:
            return self.value()
        if roll < 0.4:
            # Half of these to the value made last, which nothing may have read yet: the
            # fuser makes a write functional only if no read before it could see it.
            latest = rng.random() < 0.5
            owner = self.defined[-1] if latest else self.pick(self.defined)
            return self.write(owner, through_view=False)
        if roll < 0.55:
            return self.write(self.pick(self.defined), through_view=True)
        if roll < 0.67:
            return self.write(self.pick(self.inputs), through_view=rng.random() < 0.3)
        if roll < 0.77:
            name = self.fresh("v")
            return Statement(f"{name} = {rng.choice(VIEWS).format(y=self.pick())}", name)
        if roll < 0.83:
            name = self.fresh("r")
            return Statement(f"{name} = {rng.choice(REDUCTIONS).format(a=self.pick())}", name)
        if roll < 0.91:  # a read of a value after a write to it
            name, a = self.fresh("t"), self.pick(self.written)
            expr = rng.choice(BINARY).format(a=a, b=self.pick(), s=rng.choice(SCALARS))
            return Statement(f"{name} = {expr}", name)
        if roll < 0.96:
            name = self.fresh("d")
            return Statement(f"{name} = {rng.choice(OTHER_DTYPES).format(a=self.pick())}", name)
        return self.control_flow()

    def build(self) -> Program:
        rng, program = self.rng, self.program
        for _ in range(rng.randint(3, 10)):
            for _ in range(40):
                statement = self.statement()
                if self.runs(statement.line):
                    program.body.append(statement.line)
                    if statement.defines:
                        self.defined.append(statement.defines)
                    if statement.writes:
                        self.written.append(statement.writes)
                    break
        if not self.defined:
            program.body.append("t0 = x0 * 2.0")
            self.defined.append("t0")
        returned = rng.sample(self.defined, rng.randint(1, min(4, len(self.defined))))
        returned += [self.defined[-1]] if self.defined[-1] not in returned else []
        written = [name for name in self.defined if name in self.written]
        if written and rng.random() < 0.5:  # a written intermediate, as the write left it
            returned.append(rng.choice(written))
        if rng.random() < 0.1:  # an input, as the program left it
            returned.append(self.pick(self.inputs))
        program.returned = returned
        return program


@functools.cache
def random_programs() -> list[Program]:
    """Built once, on the CPU; every device runs the same programs."""
    return [ProgramBuilder(seed).build() for seed in SEEDS]


@dataclass
class Run:
    """What a scripted program's last call returned and left, and its graphs' counts."""

    outputs: list[torch.Tensor]
    inputs: list[torch.Tensor]  # as the call left them
    groups: int  # fusion groups in the optimized graph
    writes_scripted: int  # in-place nodes in the scripted graph
    writes_optimized: int  # in-place nodes left in the optimized graph


def count_writes(graph: torch._C.Graph) -> int:
    return sum(1 for node in all_nodes(graph) if INPLACE_KIND.match(node.kind()))


def count_scripted_writes(scripted: Any) -> int:
    """The in-place nodes of `scripted`'s graph inlined, its constant ifs folded as the
    executor folds them: `F.relu(y, inplace=True)` inlines as an if over relu_ and relu."""
    graph = scripted.inlined_graph  # a copy
    torch._C._jit_pass_constant_propagation(graph)
    return count_writes(graph)


def run_scripted(program: Program, variant: str, device: str) -> Run:
    """`program` scripted afresh (for "frozen", a frozen module's forward) and called on
    fresh inputs three times: call 1 profiles, call 2 optimizes, call 3 runs the result
    (and for "relayout", call 4 on inputs of other layouts)."""
    if variant == "frozen":
        # A class of its own: methods are defined on the class, once.
        module = type("RandomProgram", (torch.jit.ScriptModule,), {})()
        module.define(program.source("def forward(self, "))
        scripted = torch.jit.freeze(module.eval())
    else:
        scripted = script_from_source(program.source())
    with torch.set_grad_enabled(variant in ("script", "relayout")):
        for call in range(4 if variant == "relayout" else 3):
            inputs = program.inputs(device, relayout=call == 3)
            outputs = scripted(*inputs)
    # A weak reference: `scripted`, alive here, keeps the graph.
    graph = torch.jit.last_executed_optimized_graph()
    groups = count_kind(graph, FUSION_GROUP)
    return Run(list(outputs), inputs, groups, count_scripted_writes(scripted), count_writes(graph))


def strides_of_longer_dims(tensor: torch.Tensor) -> list[int]:
    """The strides of the dims of more than one element: a size-1 dim's stride changes
    no element an index reads, and is not always eager's (the size-1-stride deviation):
    plain TorchScript's `-1.0 - x` of an x [6, 1] with strides (1, 6) has strides (1, 1),
    and a fusion group with a reduction gives its elementwise result of an x [1, 40]
    with strides (1, 1) the row-major (40, 1)."""
    return [stride for stride, size in zip(tensor.stride(), tensor.shape, strict=True) if size != 1]


def assert_values_close(got: torch.Tensor, want: torch.Tensor, where: str) -> None:
    torch.testing.assert_close(
        got, want, rtol=1e-5, atol=1e-5, equal_nan=True, msg=lambda message: f"{where}\n{message}"
    )


def assert_like_eager(
    run: Run, want_outputs: list[torch.Tensor], want_inputs: list[torch.Tensor], what: str
) -> None:
    """Eager's output shapes, dtypes, strides and values, and eager's writes to the
    inputs. Not which outputs share storage: deviation (a), a same-dtype `.to()` or
    `.double()` returns a copy where eager returns self (csrc/runtime/output_layout.h)."""
    assert len(run.outputs) == len(want_outputs), what
    for index, (got, want) in enumerate(zip(run.outputs, want_outputs, strict=True)):
        where = f"{what}\noutput {index}"
        assert (got.shape, got.dtype) == (want.shape, want.dtype), where
        strides = f"{where}: strides {got.stride()}, eager's {want.stride()}"
        assert strides_of_longer_dims(got) == strides_of_longer_dims(want), strides
        assert_values_close(got, want, where)
    for index, (got, want) in enumerate(zip(run.inputs, want_inputs, strict=True)):
        assert_values_close(got, want, f"{what}\ninput {index} after the call")


@pytest.mark.parametrize("device", devices())
def test_random_inplace_programs_match_eager(fused: None, device: str) -> None:
    fused_programs = functional_programs = 0
    for index, program in enumerate(random_programs()):
        # Every other program keeps groups of one node, where a lone write fuses alone.
        fuser._C._set_keep_singletons(index % 2 == 0)
        source = program.source()
        for variant in VARIANTS:
            try:
                want_inputs = program.inputs(device, relayout=variant == "relayout")
                want_outputs = list(eager_from_source(source)(*want_inputs))
            except RuntimeError:
                if variant != "relayout":
                    raise
                continue  # eager rejects the other layouts (`x0.view(-1)` of a transposed x0)
            run = run_scripted(program, variant, device)
            what = (
                f"{variant} on {device}, seed {SEEDS[index]}, layouts {program.layouts}, "
                f"last input {program.input_view}:\n{source}"
            )
            assert_like_eager(run, want_outputs, want_inputs, what)
            if variant == "script":
                fused_programs += run.groups > 0
                functional_programs += run.writes_optimized < run.writes_scripted
    assert fuser.stats()["cuda_cross_compile_failures"] == 0
    # Most programs form groups (90 of 100 on the CPU), and many have fewer writes once
    # optimized (31; none without the fuser): the pass is exercised, not only passed by.
    assert fused_programs >= 70, fused_programs
    assert functional_programs >= 15, functional_programs
