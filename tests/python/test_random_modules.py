"""Seeded random small convnets, deployed as users deploy them: scripted or traced and
frozen, or given to optimize_for_inference, run under no_grad with the fuser on (and,
on CPU, sometimes with oneDNN Graph beside it). Convolutions with and without bias,
depthwise ones, convolutions read through a permute to NHWC and back, BatchNorm,
activations written in place and not, residual adds (`+=` too, in either order),
squeeze-excite gates, max pools, GroupNorm, ConvNeXt's LayerNorm over the channels
permuted to NHWC (with or without a Linear after it, and a layer scale after that) and
a linear head, on NCHW or channels-last inputs. Each module is optimized on one input and then
called on another of other sizes and layout; both results must have eager's values
(1e-4: convolutions and folded BatchNorm round differently) and strides.
tools/fuzz_modules.py runs many more seeds."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import fuser
from helpers import devices, torchscript_alone

ACTIVATIONS = [
    "torch.relu({v})",
    "{v}.relu_()",
    "torch.nn.functional.silu({v})",
    "torch.nn.functional.hardswish({v})",
    "torch.sigmoid({v}) * {v}",
    "torch.nn.functional.gelu({v})",
    "torch.clamp({v}, 0.0, 6.0)",
    "torch.nn.functional.hardsigmoid({v}) * {v}",
    "{v}.clamp_(min=-1.0)",
]


def random_module_source(rng: random.Random) -> tuple[str, int]:
    """The source of a module class `M` and its input's channel count."""
    channels = rng.choice([3, 4, 8, 16])
    layers, body = [], []
    current, width = "x", channels
    widths: dict[str, int] = {}  # each value's channels: residuals add equal ones
    for step in range(rng.randint(2, 7)):
        name = f"v{step}"
        roll = rng.random()
        if roll < 0.3:
            out = rng.choice([width, 8, 16, 24])
            k = rng.choice([1, 3])
            groups = width if out == width and rng.random() < 0.2 else 1
            bias = rng.random() < 0.5
            layers.append(
                f"self.conv{step} = torch.nn.Conv2d({width}, {out}, {k}, padding={k // 2}, "
                f"groups={groups}, bias={bias})"
            )
            if bias and rng.random() < 0.3:
                # Read only through a permute, as ConvNeXt's depthwise convolution: its
                # bias moves after the permute, into the activation's group.
                body.append(f"{name}p = self.conv{step}({current}).permute(0, 2, 3, 1)")
                act = rng.choice(ACTIVATIONS).format(v=f"{name}p")
                body.append(f"{name} = {act}.permute(0, 3, 1, 2)")
            else:
                body.append(f"{name} = self.conv{step}({current})")
            width = out
        elif roll < 0.42:
            layers.append(f"self.bn{step} = torch.nn.BatchNorm2d({width})")
            body.append(f"{name} = self.bn{step}({current})")
        elif roll < 0.62:
            body.append(f"{name} = " + rng.choice(ACTIVATIONS).format(v=current))
        elif roll < 0.74:
            equal = [v for v, c in widths.items() if c == width and v != current]
            form = rng.random()
            if not equal:
                body.append(f"{name} = {current} * 0.5")
            elif form < 0.35:
                body.append(f"{name} = {current} + {rng.choice(equal)}")
            elif form < 0.7:
                body.append(f"{name} = {rng.choice(equal)} + {current}")
            else:
                body.append(f"{current} += {rng.choice(equal)}")
                body.append(f"{name} = {current}")
        elif roll < 0.8:
            body.append(f"{name} = {current} * torch.sigmoid({current}.mean((2, 3), keepdim=True))")
        elif roll < 0.85:
            body.append(f"{name} = torch.nn.functional.max_pool2d({current}, 2)")
        elif roll < 0.88:
            layers.append(f"self.gn{step} = torch.nn.GroupNorm(1, {width})")
            body.append(f"{name} = self.gn{step}({current})")
        else:
            rows = f"torch.nn.functional.layer_norm({current}.permute(0, 2, 3, 1), [{width}])"
            scale = ""
            if rng.random() < 0.5:
                layers.append(f"self.lin{step} = torch.nn.Linear({width}, {width})")
                rows = f"self.lin{step}({rows})"
                if rng.random() < 0.5:
                    # ConvNeXt's layer scale, which reads the linear back in NCHW.
                    layers.append(
                        f"self.gamma{step} = torch.nn.Parameter(torch.rand({width}, 1, 1))"
                    )
                    scale = f"self.gamma{step} * "
            body.append(f"{name} = {scale}{rows}.permute(0, 3, 1, 2)")
        widths[name] = width
        current = name
    if rng.random() < 0.4:
        layers.append(f"self.fc = torch.nn.Linear({width}, 5)")
        body.append(f"return self.fc({current}.mean((2, 3)))")
    else:
        body.append(f"return {current}")
    init = "\n        ".join(layers) or "pass"
    forward = "\n        ".join(body)
    source = (
        "import torch\n\n\nclass M(torch.nn.Module):\n    def __init__(self):\n"
        f"        super().__init__()\n        {init}\n\n    def forward(self, x):\n"
        f"        {forward}\n"
    )
    return source, channels


def module_from_source(source: str) -> Any:
    """A new instance of class `M` of `source`, in eval mode, its BatchNorms given
    statistics and affine parameters away from the identity. The class lives in a file:
    torch.jit.script reads a module's source from there."""
    directory = tempfile.mkdtemp()
    path = os.path.join(directory, "random_module.py")
    with open(path, "w") as file:
        file.write(source)
    spec = importlib.util.spec_from_file_location("random_module", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    module = loaded.M().eval()
    for layer in module.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.running_mean.uniform_(-1, 1)
            layer.running_var.uniform_(0.5, 2)
            layer.weight.data.uniform_(0.5, 1.5)
            layer.bias.data.uniform_(-0.5, 0.5)
    return module


def random_image(rng: random.Random, channels: int, batch: int, side: int, device: str):
    x = torch.randn(batch, channels, side, side + rng.choice([0, 2]), device=device)
    return x.contiguous(memory_format=rng.choice([torch.channels_last, torch.contiguous_format]))


# The ways users deploy a module: scripted or traced, then frozen; or scripted and
# given to optimize_for_inference (freezing, then folding and, on CPU, MKLDNN layouts).
DEPLOYS = ["script", "trace", "optimize_for_inference"]


def deployed(module: Any, example: torch.Tensor, deploy: str) -> Any:
    if deploy == "trace":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            return torch.jit.freeze(torch.jit.trace(module, example.clone()))
    if deploy == "optimize_for_inference":
        return torch.jit.optimize_for_inference(torch.jit.script(module))
    return torch.jit.freeze(torch.jit.script(module))


def deployed_results(
    module: Any, inputs: list[torch.Tensor], onednn: bool, deploy: str
) -> list[torch.Tensor] | str:
    """The deployed module's results on `inputs`, optimized on the first (with oneDNN
    Graph beside it where `onednn`), or what it raised."""
    before = torch.jit.onednn_fusion_enabled()
    torch.jit.enable_onednn_fusion(onednn)
    try:
        with torch.no_grad():
            frozen = deployed(module, inputs[0], deploy)
            for _ in range(2):
                frozen(inputs[0].clone())
            return [frozen(x.clone()) for x in inputs]
    except Exception as e:  # noqa: BLE001 - raising is an outcome to compare
        return f"raised: {str(e)[:500]}"
    finally:
        torch.jit.enable_onednn_fusion(before)


# Values within these of the reference's: convolutions and folded BatchNorm round
# otherwise than eager's; in bfloat16, ours and ATen's convolutions see inputs an ulp
# apart where a float function's rounding goes the other way.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


def difference(gots: list[torch.Tensor] | str, wants: list[torch.Tensor] | str) -> str | None:
    """How results `gots` differ from `wants` (strides; values within TOLERANCE), or one
    of them raising alone."""
    if isinstance(gots, str) and isinstance(wants, str):
        return None
    if isinstance(gots, str) or isinstance(wants, str):
        return f"got: {gots if isinstance(gots, str) else 'results'}; reference: " + (
            wants if isinstance(wants, str) else "results"
        )
    for i, (got, want) in enumerate(zip(gots, wants, strict=True)):
        if got.stride() != want.stride():
            return f"input {i}: strides {got.stride()} where the reference's are {want.stride()}"
        try:
            tolerance = TOLERANCE[got.dtype]
            torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)
        except AssertionError as e:
            return f"input {i}: {e}"
    return None


def difference_from_eager(
    module: Any, inputs: list[torch.Tensor], onednn: bool, deploy: str = "script"
) -> str | None:
    """How the deployed module's results on `inputs` (optimized on the first) differ from
    eager's; None where they do not. Inputs eager rejects (too small for the pools)
    are nobody's difference. Where the deployment without any fuser differs from eager
    itself (optimize_for_inference's MKLDNN convolutions return row-major results for
    channels-last inputs), the fused results must be that deployment's instead. A
    bfloat16 module is judged against its deployment without any fuser alone: freezing
    folds BatchNorm into bfloat16 weights, which eager's does not."""
    try:
        with torch.no_grad():
            wants = [module(x.clone()) for x in inputs]
    except RuntimeError:
        return None
    gots = deployed_results(module, inputs, onednn, deploy)
    from_eager = "a bfloat16 module"
    if inputs[0].dtype == torch.float32:
        from_eager = difference(gots, wants)
        if from_eager is None:
            return None
    with torchscript_alone():
        alone = deployed_results(module, inputs, onednn, deploy)
        if isinstance(alone, str) and onednn:
            # oneDNN Graph's own failure (optimize_for_inference's graphs make its guard
            # fail TorchScript's alias analysis, with no fuser of ours): without it.
            alone = deployed_results(module, inputs, False, deploy)
    from_alone = difference(gots, alone)
    if from_alone is None:
        return None
    return f"{from_eager}; from the deployment without the fuser: {from_alone}"


@contextlib.contextmanager
def full_float32_convolutions() -> Iterator[None]:
    """cuDNN's and cuBLAS's TF32 off: their rounding of frozen, folded weights would pass
    1e-4 against eager's whatever the fuser does."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def groups_over_random_modules(
    seed: int, count: int, device: str, onednn_share: float, bfloat16_share: float = 0.0
) -> tuple[int, list[str]]:
    """Checks `count` random modules of `seed`, each with oneDNN Graph beside the fuser
    at `onednn_share` odds (CPU), and in bfloat16 (module and inputs) at
    `bfloat16_share` odds; the groups they formed and their failures."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    formed, failures = 0, []
    with fuser.enabled(True), full_float32_convolutions():
        for _ in range(count):
            source, channels = random_module_source(rng)
            module = module_from_source(source).to(device)
            side = rng.choice([8, 12, 16])
            inputs = [
                random_image(rng, channels, 2, side, device),
                random_image(rng, channels, rng.randint(1, 3), side + 2, device),
            ]
            onednn = device == "cpu" and rng.random() < onednn_share
            deploy = rng.choice(DEPLOYS)
            if bfloat16_share and rng.random() < bfloat16_share:
                module = module.to(torch.bfloat16)
                inputs = [x.to(torch.bfloat16) for x in inputs]
            fuser.reset_stats()
            why = difference_from_eager(module, inputs, onednn, deploy)
            formed += fuser.stats()["groups_formed"]
            if why is not None:
                shapes = [(tuple(x.shape), x.stride()) for x in inputs]
                failures.append(
                    f"{source}inputs {shapes} {inputs[0].dtype}, oneDNN Graph {onednn}, "
                    f"{deploy}\n{why}"
                )
    return formed, failures


@pytest.mark.parametrize("device", devices())
def test_random_frozen_modules_match_eager(device: str) -> None:
    torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_num_profiled_runs(1)
    formed, failures = groups_over_random_modules(20261129, 12, device, onednn_share=0.3)
    assert not failures, "\n---\n".join(failures[:3])
    assert formed >= 6  # most modules fuse something
