"""Test helpers: fresh scripted functions, counting fused nodes, running code in a
clean subprocess (for flags the core reads once)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import torch

FUSION_GROUP = "fuser::FusionGroup"
TYPE_GUARD = "fuser::TypeGuard"


def _first_function(source: str) -> str:
    match = re.search(r"^def (\w+)\(", source, re.MULTILINE)
    assert match is not None, "the source defines no function"
    return match.group(1)


def script_from_source(source: str, name: str | None = None) -> Any:
    """A freshly compiled scripted function (`name`, or the first the source defines):
    torch.jit.script caches by function object, so every test builds its own from text."""
    source = textwrap.dedent(source)
    return getattr(torch.jit.CompilationUnit(source), name or _first_function(source))


def eager_from_source(source: str, name: str | None = None) -> Any:
    """The plain Python function `name` (or the first) that `source` defines: the eager
    reference of script_from_source."""
    source = textwrap.dedent(source)
    namespace: dict[str, Any] = {"torch": torch}
    exec(source, namespace)
    return namespace[name or _first_function(source)]


# The LSTM cell as TorchScript's fuser tests write it: two GEMMs, a chunk into four gates.
LSTM_CELL = """
def cell(x, hx, cx, w_ih, w_hh, b_ih, b_hh):
    gates = torch.mm(x, w_ih.t()) + torch.mm(hx, w_hh.t()) + b_ih + b_hh
    i, f, g, o = gates.chunk(4, 1)
    i = torch.sigmoid(i)
    f = torch.sigmoid(f)
    g = torch.tanh(g)
    o = torch.sigmoid(o)
    cy = f * cx + i * g
    hy = o * torch.tanh(cy)
    return hy, cy
"""


def all_nodes(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from all_nodes(sub)


def fused_kinds(graph: Any) -> set[str]:
    """What the fusion groups of `graph` compute, autodiff's subgraphs included."""
    kinds: set[str] = set()
    for node in all_nodes(graph):
        if node.kind() == FUSION_GROUP:
            kinds.update(inner.kind() for inner in node.g("Subgraph").nodes())
        elif node.kind() == "prim::DifferentiableGraph":
            kinds.update(fused_kinds(node.g("Subgraph")))
    return kinds


def in_loop(node: Any) -> bool:
    """Whether `node` sits in the body of some prim::Loop."""
    owner = node.owningBlock().owningNode()
    while owner is not None:
        if owner.kind() == "prim::Loop":
            return True
        owner = owner.owningBlock().owningNode()
    return False


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
    """Runs `code` in a new interpreter with the given extra environment. The code goes
    through a file: torch.jit.script reads a function's source from its file."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_")}
    full_env["FUSER_CACHE_DIR"] = os.environ.get("FUSER_CACHE_DIR", "/tmp/fuser-test-cache")
    full_env.update(env or {})
    with tempfile.TemporaryDirectory() as directory:
        program = os.path.join(directory, "program.py")
        with open(program, "w") as file:
            file.write(textwrap.dedent(code))
        return subprocess.run(
            [sys.executable, program],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=300,
        )


def fusion_group_function(subgraph_ir: str) -> Any:
    """A callable graph made of one fuser::FusionGroup node around `subgraph_ir`, so the
    runtime can be tested without the pass."""
    subgraph = torch._C.parse_ir(textwrap.dedent(subgraph_ir))
    outer = torch._C.Graph()
    inputs = []
    for sub_input in subgraph.inputs():
        value = outer.addInput()
        value.setType(sub_input.type())
        inputs.append(value)
    num_outputs = len(list(subgraph.outputs()))
    node = outer.create(FUSION_GROUP, inputs, num_outputs)
    node.g_("Subgraph", subgraph)
    outer.insertNode(node)
    if num_outputs == 1:
        outer.registerOutput(node.output())
    else:  # a function returns one value: a tuple
        tup = outer.create("prim::TupleConstruct", list(node.outputs()), 1)
        tup.output().setType(torch._C.TupleType([torch._C.TensorType.get()] * num_outputs))
        outer.insertNode(tup)
        outer.registerOutput(tup.output())
    return torch._C._create_function_from_graph("fusion_group", outer)


@contextlib.contextmanager
def torchscript_alone() -> Iterator[None]:
    """TorchScript with no fuser at all: ours off, and NNC off too (TorchScript's own
    fuser, on by default for CUDA, whose results differ from eager's in places: four
    fuzz_dtypes programs on the H200); the previous state after."""
    import fuser  # here: the other helpers need no extension

    with fuser.enabled(False):  # (disabling ours restores NNC as it was: first)
        nnc = torch._C._jit_texpr_fuser_enabled()
        torch._C._jit_set_texpr_fuser_enabled(False)
        try:
            yield
        finally:
            torch._C._jit_set_texpr_fuser_enabled(nnc)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to `n` (kernels split their ranges among
    them), the previous count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def calls_on_threads(call: Any, count: int, calls: int = 10) -> list[list[Any]]:
    """`call(i)` made `calls` times on each of `count` threads running at once; each
    thread's results in order."""
    got: list[list[Any]] = [[] for _ in range(count)]

    def work(i: int) -> None:
        for _ in range(calls):
            got[i].append(call(i))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def devices() -> list[str]:
    """CPU, and CUDA where a GPU is present."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def run_frozen_like_eager(module: torch.nn.Module, x: torch.Tensor) -> Any:
    """`module` (in eval mode) scripted, frozen and called until optimized, under no_grad;
    each output has eager's values (1e-4) and strides. The graph run last."""
    frozen = torch.jit.freeze(torch.jit.script(module))
    with torch.no_grad():
        want = module(x)
        for _ in range(3):
            got = frozen(x)
    pairs = zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        assert g.stride() == w.stride()
    return torch.jit.last_executed_optimized_graph()


def every_value(dtype: torch.dtype, device: str) -> torch.Tensor:
    """All 65536 bit patterns of a 16-bit dtype: zeros, subnormals, infinities, NaNs."""
    return torch.arange(-32768, 32768, device=device).to(torch.int16).view(dtype)


def pairs(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Every value of a 16-bit dtype against eight random partners each."""
    gen = torch.Generator().manual_seed(16)
    a = every_value(dtype, device).repeat(8)
    b = a[torch.randperm(a.numel(), generator=gen).to(device)]
    return a, b


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    """Equal dtype, shape, strides and bits (any NaN matching any NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.stride() == want.stride(), what
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), what
    differ = (got.view(torch.int16) != want.view(torch.int16)) & ~nan
    assert not differ.any(), (what, got[differ][:8], want[differ][:8])


def run_fused(source: str, *args: torch.Tensor) -> torch.Tensor:
    """`source`'s function scripted and run optimized, checking that it formed a group."""
    import fuser

    groups = fuser.stats()["groups_formed"]
    with fuser.enabled(True), torch.no_grad():
        got = run_optimized(script_from_source(source), *args)
    assert fuser.stats()["groups_formed"] > groups, "no fusion group formed"
    return got


def gcc_vector_reports(source: str, option: str = "-fopt-info-vec-missed") -> list[str]:
    """GCC's vectorizer reports on the kernel `source`, compiled as the runtime compiles
    kernels; each names the file as kernel.cpp."""
    import fuser

    command = shlex.split(fuser._C._host_compile_command())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cpp")
        with open(path, "w") as f:
            f.write(source)
        done = subprocess.run(
            [*command, option, "-o", "k.so", "kernel.cpp"],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stderr.splitlines()


def missing_vector_types(source: str) -> list[str]:
    """GCC's reports of loops in `source` left scalar for want of a vector type of an
    element they load or store."""
    return [line for line in gcc_vector_reports(source) if "no vectype" in line]


def host_compiler_is_gcc() -> bool:
    """Whether the kernels' compiler is GCC, whose -fopt-info reports the test reads."""
    import fuser

    compiler = shlex.split(fuser._C._host_compile_command())[0]
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    except OSError:
        return False
    # GCC's banner names its copyright holder; clang's does not.
    return version.returncode == 0 and "Free Software Foundation" in version.stdout
