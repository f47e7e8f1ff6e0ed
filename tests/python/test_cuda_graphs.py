"""Fused functions captured into CUDA graphs (torch.cuda.graph) whose first optimized call
happens inside the capture: the pass, the kernels' compilation and every first-run step
(variant timing, the cuDNN mask check, checks of frozen constants) run while the stream
records, where nothing may synchronize the device. Each case runs in a fresh process
with an empty kernel cache, so that no earlier call has settled those steps already;
replays of the graph must give eager's values."""

from __future__ import annotations

import tempfile

import pytest
import torch

import fuser
from helpers import run_python

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Scripts `f`, calls it once outside the capture (the profiling call), captures the
# second call (the first optimized one), then replays the graph on fresh inputs copied
# into the captured ones and compares with eager. `make()` returns the inputs, `warm`
# calls run before the capture besides the profiling one.
CAPTURE = """
import sys, torch, fuser
fuser.enable()
{source}
fused = torch.jit.script(f)
torch.manual_seed(0)
static = make()
with torch.no_grad():
    for _ in range(1 + {warm}):
        fused(*static)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused(*static)
    for step in range(3):
        fresh = make()
        for s, x in zip(static, fresh):
            s.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        want = f(*fresh)
        got = out if isinstance(out, tuple) else (out,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride(), (
                g.dtype, w.dtype, g.shape, w.shape, g.stride(), w.stride())
            {compare}
{after}
"""

# The groups ran their kernels, in the capture included (none ran interpreted).
GROUPS_RAN = """
stats = fuser.stats()
launched = stats["kernel_launches"] + stats["row_launches"] + stats["tiled_launches"]
assert stats["groups_formed"] >= 1 and launched >= 1 and stats["interpreted_runs"] == 0, stats
"""

# The cuDNN check was not made in the capture, nor answered no for good there: past the
# first call outside it (which makes the check), a call converts the mask once for both
# layers (one aten::where before them, none in attention), as where no capture came first.
CONVERTED_ONCE_AFTER = """
with torch.no_grad():
    fused(*static)
with torch.no_grad(), torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    fused(*static)
wheres = [e for e in prof.events() if e.name == "aten::where"]
in_attention = [e for e in wheres
                if e.cpu_parent and e.cpu_parent.name == "aten::scaled_dot_product_attention"]
assert len(wheres) == 1 and not in_attention, (len(wheres), len(in_attention))
"""

CLOSE = "torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)"
EQUAL = "assert torch.equal(g, w), (g - w).abs().max()"

ELEMENTWISE = """
def f(x, y):
    return (x * y + 1.0).relu(), (x - y).sigmoid()

def make():
    return (torch.randn(64, 96, device="cuda"), torch.randn(96, device="cuda"))
"""

# Rows of 2**21 elements: large enough that their kernel variants are timed at first run.
ROWS = """
def f(x, w, b):
    y = torch.layer_norm(x * 2.0 + 1.0, [1024], w, b, 1e-5)
    return torch.softmax(y, -1) * x

def make():
    return (torch.randn(2048, 1024, device="cuda"), torch.randn(1024, device="cuda"),
            torch.randn(1024, device="cuda"))
"""

# A LayerNorm over the channels of NCHW whose column kernel copies its rows into shared
# memory (forced: the last variant), 64 KiB a block: past the 48 KiB a kernel may take
# without asking, so its first launch, inside the capture, first raises its limit.
COLUMNS_IN_SHARED = """
def f(x, w):
    u = x.mean(1, keepdim=True)
    d = x - u
    return d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-6) * w

def make():
    return (torch.randn(4, 512, 6, 6, device="cuda"), torch.randn(1, 512, 1, 1, device="cuda"))
"""

COLUMNS_IN_SHARED_RAN = (
    GROUPS_RAN
    + """
assert stats["column_in_shared_launches"] >= 1, stats
"""
)

# Two float16 layers on cuDNN attention reading one boolean mask: the mask is converted
# once per call where a first-run check says cuDNN converts it as we do.
ATTENTION = """
from torch.nn.attention import SDPBackend, sdpa_kernel

def f(q, k, v, mask):
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nn.functional.scaled_dot_product_attention(a, k, v, attn_mask=mask)

def make():
    q, k, v = (torch.randn(2, 4, 32, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    mask = torch.rand(2, 1, 32, 32, device="cuda") > 0.3
    mask[0, 0, 5] = False
    return q, k, v, mask

sdpa_kernel(SDPBackend.CUDNN_ATTENTION).__enter__()
"""

# A frozen module: a pass reads the values of its constant tensors on the GPU (a bias
# moved past the pool must be finite; passes/max_pool_first.cpp). (A frozen convolution's
# first optimized call fails inside a capture with the fuser off too, in cuDNN or NNC:
# such models are warmed up before the capture, as PyTorch's documentation asks.)
FROZEN = """
import torch.nn.functional as F

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        y = F.max_pool2d(F.relu(x + self.bias), 3, 2, 1)
        return y.sigmoid() * 2.0 + y

torch.manual_seed(1)
module = Block().cuda().eval()
frozen = torch.jit.freeze(torch.jit.script(module))
f = module

def make():
    return (torch.randn(2, 8, 32, 32, device="cuda"),)
"""


def run_case(
    source: str,
    compare: str,
    warm: int = 0,
    frozen: bool = False,
    after: str = GROUPS_RAN,
    env: dict[str, str] | None = None,
) -> None:
    code = CAPTURE.format(source=source, compare=compare, warm=warm, after=after)
    if frozen:
        code = code.replace("fused = torch.jit.script(f)", "fused = frozen")
    with tempfile.TemporaryDirectory() as cache:
        result = run_python(code, {"FUSER_CACHE_DIR": cache, **(env or {})})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("warm", [0, 2])
@pytest.mark.parametrize("case", ["elementwise", "rows"])
def test_groups_compiled_inside_a_capture_replay_eagers_values(case: str, warm: int) -> None:
    run_case({"elementwise": ELEMENTWISE, "rows": ROWS}[case], CLOSE, warm)


def test_columns_in_shared_memory_launched_first_inside_a_capture() -> None:
    if fuser._C._columns_in_shared_blocks(torch.cuda.current_device(), 512 * 128, False) == 0:
        pytest.skip("this GPU does not take 64 KiB of copies a block")
    run_case(
        COLUMNS_IN_SHARED, CLOSE, after=COLUMNS_IN_SHARED_RAN, env={"FUSER_FORCE_VARIANT": "3"}
    )


def test_attention_masks_checked_inside_a_capture_replay_eagers_bits() -> None:
    if not torch.backends.cuda.is_flash_attention_available():
        pytest.skip("no fused attention on this GPU")
    run_case(ATTENTION, EQUAL, after=CONVERTED_ONCE_AFTER)


def test_a_frozen_module_optimized_inside_a_capture_replays_eagers_values() -> None:
    run_case(FROZEN, CLOSE, frozen=True)


# Random dropout in a captured graph: as in eager's captured dropout, each replay draws a
# fresh mask (the generator's offset advances per replay), and every kept value is scaled.
DROPOUT = """
import torch, fuser
fuser.enable()

def f(x):
    return torch.dropout(x.relu() + 1.0, 0.5, True)

fused = torch.jit.script(f)
torch.manual_seed(0)
x = torch.randn(256, 1024, device="cuda")
with torch.no_grad():
    fused(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused(x)
    masks = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        kept = out != 0
        assert torch.equal(out[kept], ((x.relu() + 1.0) * 2.0)[kept])
        assert 0.4 < kept.float().mean().item() < 0.6
        masks.append(kept.clone())
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    # Outside the capture the group runs its kernel again.
    launched = lambda s: s["kernel_launches"] + s["row_launches"]
    before = fuser.stats()
    fused(x)
    after = fuser.stats()
assert before["groups_formed"] >= 1 and launched(after) > launched(before), (before, after)
"""


def test_dropout_inside_a_capture_draws_a_fresh_mask_per_replay() -> None:
    with tempfile.TemporaryDirectory() as cache:
        result = run_python(DROPOUT, {"FUSER_CACHE_DIR": cache})
    assert result.returncode == 0, result.stdout + result.stderr
