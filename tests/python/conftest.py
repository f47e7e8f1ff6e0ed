"""Shared pytest set-up: each test starts with the fuser off, default settings, zero
stats and a random seed of its own; the `fused` fixture turns it on and keeps single-node
groups, so a test of one operator fuses it alone."""

from __future__ import annotations

import glob
import os
import random
import site
import zlib
from collections.abc import Iterator
from pathlib import Path


def _pip_nvrtc_present() -> bool:
    roots = site.getsitepackages() + [site.getusersitepackages()]
    return any(glob.glob(os.path.join(r, "nvidia", "*", "lib", "libnvrtc.so*")) for r in roots)


# Where NVRTC is installed (CI installs it from pip), every kernel the tests build for
# the CPU is also compiled as CUDA for sm_90: the CUDA printer is checked without a GPU.
# By NVRTC's front end only (`:front`, a fifth of the time: through ptxas these checks
# were 45% of the suite's time), but for tests marked `ptxas`, which test limits that
# only ptxas enforces (static shared memory). The core reads flags once, so this must
# precede `import fuser`.
if _pip_nvrtc_present() or os.path.exists("/usr/local/cuda/lib64/libnvrtc.so"):
    os.environ.setdefault("FUSER_CROSS_COMPILE", "sm_90:front")

import pytest  # noqa: E402
import torch  # noqa: E402

import fuser  # noqa: E402

# A complete profiled type, as the profiling executor records it.
T = "Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"
M = "Float(5, 5, strides=[5, 1], requires_grad=0, device=cpu)"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With FUSER_TEST_FAILURES set to a path, each failure's test id and message are
    appended there as it happens (on the controller, with test workers): a device run
    cut by its time limit before pytest's summary still names its failures."""
    path = os.environ.get("FUSER_TEST_FAILURES")
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # (a worker's reports reach the controller, which writes them once)
    message = str(report.longrepr).splitlines()[-40:]
    with open(path, "a") as log:
        log.write(f"FAILED {report.nodeid} ({report.when})\n" + "\n".join(message) + "\n\n")


def pytest_configure(config: pytest.Config) -> None:
    # tools/run_tests.sh runs most files on several pytest-xdist workers, then the
    # `timing` ones alone: their bounds are on wall time, which other workers would share.
    config.addinivalue_line(
        "markers", "timing: times kernels or bounds wall time; run without other test workers"
    )
    config.addinivalue_line(
        "markers", "ptxas: FUSER_CROSS_COMPILE's CUDA forms go through ptxas, whose limits it tests"
    )


@pytest.fixture(autouse=True)
def seeded_random_data(request: pytest.FixtureRequest) -> None:
    """Each test draws its random tensors from a seed of its own name: a failure comes
    back on every run and in every worker order, and a fused multiply-add beside
    cancellation cannot fail one CI run in many."""
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    random.seed(seed)


@pytest.fixture(autouse=True)
def cross_compile_depth(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests marked `ptxas` cross-compile CUDA forms through ptxas (FUSER_CROSS_COMPILE
    without `:front`); the session's depth is restored after."""
    if request.node.get_closest_marker("ptxas") is None:
        yield
        return
    previous = fuser._C._set_cross_compile_front_only(False)
    try:
        yield
    finally:
        fuser._C._set_cross_compile_front_only(previous)


@pytest.fixture(autouse=True)
def clean_fuser_state() -> Iterator[None]:
    limit = fuser.get_arg_limit()
    min_size, max_groups = fuser._C.get_min_group_size(), fuser._C.get_max_groups()
    fuser.disable()
    fuser.reset_stats()
    yield
    fuser.disable()
    fuser.set_arg_limit(limit)
    fuser._C.set_min_group_size(min_size)
    fuser._C.set_max_groups(max_groups)


def parse(ir: str) -> torch._C.Graph:
    """Parses IR text in which `$T` stands for the complete 4x5 float type."""
    return torch._C.parse_ir(ir.replace("$T", T).replace("$M", M))


def fuse_ir(ir: str) -> torch._C.Graph:
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
    fuser._C._set_keep_singletons(True)
    try:
        with fuser.enabled(True):
            yield
    finally:
        fuser._C._set_keep_singletons(False)


@pytest.fixture
def splits(request: pytest.FixtureRequest) -> Iterator[int]:
    """Rows cut in `request.param` slices for the test (FUSER_ROW_SPLITS); chosen again
    after it."""
    fuser._C._set_row_splits(request.param)
    try:
        yield request.param
    finally:
        fuser._C._set_row_splits(0)


@pytest.fixture
def variant_flags() -> Iterator[None]:
    """Tests change FUSER_AUTOTUNE / FUSER_FORCE_VARIANT for this process; restored after,
    and each test starts with no choice remembered, in memory or on disk (a choice an
    earlier run kept would be read instead of timed)."""
    fuser._C._forget_variant_choices()
    for entry in (Path(fuser._C.cache_dir()) / "variants").glob("*"):
        entry.unlink(missing_ok=True)  # another test worker may have taken it
    try:
        yield
    finally:
        fuser._C._set_variant_choice(True, -1)
        fuser._C._forget_variant_choices()
