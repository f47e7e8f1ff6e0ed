"""The benchmark's workloads: each is TorchScript-compatible source text plus an input maker.

Every mode gets its own function built from the text, because `torch.jit.script` caches
by Python function object: scripting one function twice returns the executor that was
already optimized under the first mode's flags. Eager and torch.compile get a plain
Python function made by executing the same text in a fresh namespace.
"""

from __future__ import annotations

import contextlib
import functools
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Tensor = torch.Tensor
Inputs = tuple[Tensor, ...]
# Sizes are named dimensions, e.g. {"N": 1024, "H": 1024}.
Dims = dict[str, int]
InputMaker = Callable[[Dims, torch.dtype, torch.device, torch.Generator], Inputs]

SIZE_NAMES = ("tiny", "small", "medium", "large")
LSTM_LAYER_STEPS = 100


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    source: str  # defines a function called `name`
    make_inputs: InputMaker
    sizes: dict[str, Dims]
    # Sizes that differ on CUDA, where "large" must fill the GPU and "small" measures
    # per-call overhead.
    cuda_sizes: dict[str, Dims] | None = None
    # A training step: every input requires grad, and a call is the function's forward
    # plus the gradients of all inputs (training_step), under autograd.
    training: bool = False
    # Mixed precision: the inputs are float32 and every call runs under
    # torch.autocast(device type, dtype=autocast[device type]); such rows run in float32
    # only, and are compared with eager at the autocast dtype's tolerance.
    autocast: dict[str, torch.dtype] | None = None
    # Dropout in training with this probability: each mode draws its own mask, so
    # results are compared by random_mismatch (fuser/bench/correctness.py), not by value.
    dropout: float | None = None
    # Model rows: the module in training mode (BatchNorm normalizes with each batch's
    # statistics and updates its running ones; outputs do not depend on the latter).
    train_mode: bool = False
    # Results that are sums of thousands of elements: compared norm-wise, as gradients
    # are (eager's own float rounding moves single sums near zero further than
    # elementwise tolerances allow; the fuser sums float in double on CPU).
    long_sums: bool = False

    def autocast_dtype(self, device: torch.device) -> torch.dtype | None:
        return self.autocast.get(device.type) if self.autocast else None

    def autocast_context(self, device: torch.device) -> contextlib.AbstractContextManager[Any]:
        dtype = self.autocast_dtype(device)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=dtype)

    def under_autocast(self, fn: Callable[..., Any], device: torch.device) -> Callable[..., Any]:
        """`fn`, each call under this workload's autocast context on `device` (if any)."""
        if self.autocast_dtype(device) is None:
            return fn

        def call(*args: Any) -> Any:
            with self.autocast_context(device):
                return fn(*args)

        return call

    def dims(self, size: str, device: torch.device) -> Dims:
        if device.type == "cuda" and self.cuda_sizes and size in self.cuda_sizes:
            return self.cuda_sizes[size]
        return self.sizes[size]

    def eager_function(self) -> Callable[..., Any]:
        """A new plain Python function (a new code object, so torch.compile starts afresh)."""
        namespace: dict[str, Any] = {"torch": torch, "Tensor": Tensor}
        exec(compile(self.source, f"<workload {self.name}>", "exec"), namespace)
        return namespace[self.name]

    def scripted_function(self) -> Any:
        """A new, never-optimized TorchScript function."""
        return getattr(torch.jit.CompilationUnit(self.source), self.name)


def training_step(fn: Callable[..., Any], parameters: Sequence[Tensor] = ()) -> Callable[..., Any]:
    """`fn`'s forward and backward: returns the gradients of every input that requires
    grad, then of `parameters` (a model's weights), for an upstream gradient on each
    output of 1/sqrt(its rows) (a gradient summed over 32768 rows of ones overflows
    float16) times 0.5 to 1.5 in a fixed pattern: a gradient equal along the batch would
    make BatchNorm's input gradient zero but for rounding, which no comparison can
    judge. Each upstream gradient is made once per shape, dtype and device and reused:
    making it (five small ATen ops, 0.2 ms of `remainder_` alone on 2 CPU cores for the
    GPT-2 block) is not the step being timed, and autograd only reads it."""
    made: dict[tuple[Any, ...], Tensor] = {}

    def upstream(o: Tensor) -> Tensor:
        key = (tuple(o.shape), o.dtype, o.device)
        if key not in made:
            rows = o.numel() // o.shape[-1] if o.dim() and o.shape[-1] else 1
            pattern = torch.arange(o.numel(), device=o.device).remainder_(11).to(o.dtype)
            made[key] = (pattern * 0.1 + 0.5).mul_(max(rows, 1) ** -0.5).view_as(o)
        return made[key]

    def step(*args: Any) -> tuple[Tensor, ...]:
        outputs = fn(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        needing = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        needing += [p for p in parameters if p.requires_grad]
        return torch.autograd.grad(outputs, needing, [upstream(o) for o in outputs])

    return step


def shape_label(dims: Dims) -> str:
    return "x".join(f"{name}{value}" for name, value in dims.items())


def _randn(gen: torch.Generator, dtype: torch.dtype, device: torch.device, *shape: int) -> Tensor:
    # Random data, never zeros: some kernels (and some hardware) run faster on zeros.
    return torch.randn(*shape, generator=gen, dtype=dtype, device=device)


def _weight(gen: torch.Generator, dtype: torch.dtype, device: torch.device, *shape: int) -> Tensor:
    # Scaled like nn.LSTM's init so gates do not saturate into constant 0/1.
    return _randn(gen, dtype, device, *shape).mul_(1.0 / math.sqrt(shape[-1]))


def _rows_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, h = dims["N"], dims["H"]
    return _randn(gen, dtype, device, n, h), _randn(gen, dtype, device, n, h)


def _bias_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, h = dims["N"], dims["H"]
    return _randn(gen, dtype, device, n, h), _randn(gen, dtype, device, h)


def _norm_tail_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, h = dims["N"], dims["H"]
    x = _randn(gen, dtype, device, n, h)
    mean = _randn(gen, dtype, device, n, 1)
    rstd = _randn(gen, dtype, device, n, 1).abs_().add_(0.5)  # a reciprocal std is positive
    return x, mean, rstd, _randn(gen, dtype, device, h), _randn(gen, dtype, device, h)


def _layer_norm_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, h = dims["N"], dims["H"]
    return (
        _randn(gen, dtype, device, n, h),
        _randn(gen, dtype, device, h),
        _randn(gen, dtype, device, h),
    )


def _residual_layer_norm_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, h = dims["N"], dims["H"]
    return (
        _randn(gen, dtype, device, n, h),
        _randn(gen, dtype, device, n, h),
        *(_randn(gen, dtype, device, h) for _ in range(3)),
    )


def _residual_layer_norm_source(name: str) -> str:
    """h = x + bias + residual; h and layer_norm(h), as a function called `name` (its
    inference row and its training-step row run the same source)."""
    return _source(
        f"""
        def {name}(x, r, bias, w, b):
            h = x + bias + r
            return h, torch.layer_norm(h, [{NORM_WIDTH}], w, b, 1e-5)
        """
    )


def _softmax_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    return (_randn(gen, dtype, device, dims["N"], dims["H"]),)


def _masked_softmax_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """Attention scores and GPT-2's causal mask buffer (ones on and below the diagonal)."""
    b, heads, t = dims["B"], dims["heads"], dims["T"]
    mask = torch.tril(torch.ones(t, t, dtype=dtype, device=device)).view(1, 1, t, t)
    return _randn(gen, dtype, device, b, heads, t, t), mask


def _transpose_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """x (H, N), read transposed, and y (N, H)."""
    n, h = dims["N"], dims["H"]
    return _randn(gen, dtype, device, h, n), _randn(gen, dtype, device, n, h)


def _permute_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """x (N, C, H, W) row-major, read as NHWC, and y (N, H, W, C) row-major."""
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    return _randn(gen, dtype, device, n, c, h, w), _randn(gen, dtype, device, n, h, w, c)


def _channels_last_residual_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """A channels-last activation (a convolution's output) and a row-major residual,
    both (N, C, H, W)."""
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    activation = _randn(gen, dtype, device, n, c, h, w)
    return activation.contiguous(memory_format=torch.channels_last), _randn(
        gen, dtype, device, n, c, h, w
    )


def _se_gate_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """A squeeze-excite block's activation x (N, C, H, W) and its gate logits s (N, C, 1, 1)."""
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    return _randn(gen, dtype, device, n, c, h, w), _randn(gen, dtype, device, n, c, 1, 1)


def _pair_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """Two tensors of the row's sizes, in the order its dims are named."""
    sizes = list(dims.values())
    return _randn(gen, dtype, device, *sizes), _randn(gen, dtype, device, *sizes)


def _batch_norm_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """An (N, C, H, W) activation and its BatchNorm's weight, bias, running mean and
    running variance (positive), each (C,)."""
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    variance = torch.rand(c, generator=gen, dtype=dtype, device=device) + 0.5
    return (
        _randn(gen, dtype, device, n, c, h, w),
        *(_randn(gen, dtype, device, c) for _ in range(3)),
        variance,
    )


def _group_norm_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """An (N, C, H, W) activation and its GroupNorm's weight and bias, each (C,)."""
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    return (
        _randn(gen, dtype, device, n, c, h, w),
        *(_randn(gen, dtype, device, c) for _ in range(2)),
    )


def _mixer_stream_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """MLP-Mixer's residual stream and a token-mixing result, each (B, N, C) laid out as
    (B, C, N) (the patch embedding's flatten(2).transpose(1, 2), and the token MLP's
    output transposed back), and a LayerNorm's weight and bias, each (C,)."""
    b, n, c = dims["B"], dims["N"], dims["C"]
    return (
        _randn(gen, dtype, device, b, c, n).transpose(1, 2),
        _randn(gen, dtype, device, b, c, n).transpose(1, 2),
        *(_randn(gen, dtype, device, c) for _ in range(2)),
    )


def _channels_last_norm_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """_group_norm_inputs with the activation channels-last, as a convnet run in that
    memory format hands it on."""
    x, w, b = _group_norm_inputs(dims, dtype, device, gen)
    return x.contiguous(memory_format=torch.channels_last), w, b


def _expand_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """x (1, H), expanded along the leading dim inside the function, and y (N, H)."""
    n, h = dims["N"], dims["H"]
    return _randn(gen, dtype, device, 1, h), _randn(gen, dtype, device, n, h)


def _recurrent_cell_inputs(
    dims: Dims,
    dtype: torch.dtype,
    device: torch.device,
    gen: torch.Generator,
    *,
    gates: int,
    has_cell_state: bool,
    gate_vectors: int,
) -> Inputs:
    """x, hx, [cx], w_ih, w_hh, then `gate_vectors` vectors of length gates * H (biases,
    or MiLSTM's alpha and betas). Input size equals hidden size."""
    b, h = dims["B"], dims["H"]
    states = 3 if has_cell_state else 2
    return (
        *(_randn(gen, dtype, device, b, h) for _ in range(states)),
        _weight(gen, dtype, device, gates * h, h),
        _weight(gen, dtype, device, gates * h, h),
        *(_randn(gen, dtype, device, gates * h) for _ in range(gate_vectors)),
    )


_lstm_cell_inputs: InputMaker = functools.partial(
    _recurrent_cell_inputs, gates=4, has_cell_state=True, gate_vectors=2
)
_milstm_cell_inputs: InputMaker = functools.partial(
    _recurrent_cell_inputs, gates=4, has_cell_state=True, gate_vectors=4
)
_gru_cell_inputs: InputMaker = functools.partial(
    _recurrent_cell_inputs, gates=3, has_cell_state=False, gate_vectors=2
)


def _gemm_epilogue_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    n, k, h = dims["N"], dims["K"], dims["H"]
    return (
        _randn(gen, dtype, device, n, k),
        _weight(gen, dtype, device, k, h),
        _randn(gen, dtype, device, h),
    )


def _lstm_gates_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    """The two gate matmul results (B, 4H), the two biases (4H,) and cx (B, H)."""
    b, h = dims["B"], dims["H"]
    return (
        _randn(gen, dtype, device, b, 4 * h),
        _randn(gen, dtype, device, b, 4 * h),
        _randn(gen, dtype, device, 4 * h),
        _randn(gen, dtype, device, 4 * h),
        _randn(gen, dtype, device, b, h),
    )


def _lstm_layer_inputs(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    t, b, h = dims["T"], dims["B"], dims["H"]
    cell = _lstm_cell_inputs({"B": b, "H": h}, dtype, device, gen)
    return (_randn(gen, dtype, device, t, b, h), *cell[1:])


def _source(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


_LSTM_GATE_MATH = (
    "i, f, g, o = gates.chunk(4, 1)",
    "i = torch.sigmoid(i)",
    "f = torch.sigmoid(f)",
    "g = torch.tanh(g)",
    "o = torch.sigmoid(o)",
    "cy = f * cx + i * g",
    "hy = o * torch.tanh(cy)",
    "return hy, cy",
)


# The LSTM cell of lstm_cell and lstm_cell_train: its arguments and its gates.
_LSTM_CELL_ARGS = "(x, hx, cx, w_ih, w_hh, b_ih, b_hh)"
_LSTM_CELL_GATES = "gates = x @ w_ih.t() + hx @ w_hh.t() + b_ih + b_hh"


def _lstm_source(signature: str, *gates_lines: str) -> str:
    """An LSTM-style cell: `gates_lines` compute `gates` (B, 4H) from the arguments in
    `signature`, then the gate math every LSTM variant shares, with the state cx."""
    body = (*gates_lines, *_LSTM_GATE_MATH)
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body)


def _channels_first_layer_norm_source(name: str) -> str:
    """ConvNeXt's channels-first LayerNorm, written out: statistics over dim 1 of
    (N, C, H, W), then the per-channel affine."""
    body = (
        "u = x.mean(1, keepdim=True)",
        "s = (x - u).pow(2).mean(1, keepdim=True)",
        "y = (x - u) / torch.sqrt(s + 1e-6)",
        "return w[:, None, None] * y + b[:, None, None]",
    )
    return f"def {name}(x, w, b):\n" + "".join(f"    {line}\n" for line in body)


def _layer_norm_2d_source(name: str) -> str:
    """timm's LayerNorm2d: layer_norm of the channels-last view of (N, C, H, W), over C,
    permuted back."""
    body = (
        "y = torch.layer_norm(x.permute(0, 2, 3, 1), [x.size(1)], w, b, 1e-6)",
        "return y.permute(0, 3, 1, 2)",
    )
    return f"def {name}(x, w, b):\n" + "".join(f"    {line}\n" for line in body)


# CPU: 64K, 1M and 4M elements. CUDA: 64 x 512 (a per-call overhead probe), 1M, and
# 2^26 elements (8192 x 8192), which takes a few hundred microseconds on an H100.
_ROWS = {
    "tiny": {"N": 16, "H": 64},
    "small": {"N": 256, "H": 256},
    "medium": {"N": 1024, "H": 1024},
    "large": {"N": 2048, "H": 2048},
}
_ROWS_CUDA = {
    "small": {"N": 64, "H": 512},
    "large": {"N": 8192, "H": 8192},
}
# NCHW activations: CUDA "large" is a ResNet stage's worth (2^25 elements).
_IMAGES = {
    "tiny": {"N": 2, "C": 8, "H": 4, "W": 4},
    "small": {"N": 4, "C": 32, "H": 16, "W": 16},
    "medium": {"N": 8, "C": 64, "H": 32, "W": 32},
    "large": {"N": 16, "C": 128, "H": 32, "W": 32},
}
_IMAGES_CUDA = {
    "small": {"N": 2, "C": 64, "H": 16, "W": 16},
    "large": {"N": 32, "C": 256, "H": 64, "W": 64},
}
# The late stages of EfficientNet and MobileNetV3, where squeeze-excite gates sit: rows of
# 7 x 7 or 14 x 14 elements, each scaled by one gate.
_SE_GATES = {
    "tiny": {"N": 2, "C": 8, "H": 4, "W": 4},
    "small": {"N": 1, "C": 1152, "H": 7, "W": 7},
    "medium": {"N": 8, "C": 672, "H": 14, "W": 14},
    "large": {"N": 32, "C": 1152, "H": 7, "W": 7},
}
_SE_GATES_CUDA = {
    "small": {"N": 8, "C": 672, "H": 14, "W": 14},
    "large": {"N": 256, "C": 1152, "H": 7, "W": 7},
}
_CELLS = {
    "tiny": {"B": 4, "H": 16},
    "small": {"B": 32, "H": 256},
    "medium": {"B": 64, "H": 512},
    "large": {"B": 256, "H": 1024},
}
# The loop runs 100 steps at every size; batch and hidden stay moderate so that --quick
# finishes on a 2-core machine.
# The GEMM epilogue: x (N, K) @ w (K, H) on CUDA at medium; smaller on CPU,
# where a bfloat16 GEMM of that size would dominate the row.
_GEMMS = {
    "tiny": {"N": 16, "K": 32, "H": 64},
    "small": {"N": 128, "K": 256, "H": 256},
    "medium": {"N": 512, "K": 512, "H": 1024},
    "large": {"N": 1024, "K": 1024, "H": 2048},
}
_GEMMS_CUDA = {
    "small": {"N": 64, "K": 512, "H": 512},
    "medium": {"N": 4096, "K": 1024, "H": 4096},
    "large": {"N": 8192, "K": 2048, "H": 8192},
}
# Rows of a transformer's width: layer_norm's normalized shape is a constant of the
# source, as nn.LayerNorm's is, so only the row count changes with the size. CUDA "large"
# is the issue's [32768, 1024].
NORM_WIDTH = 1024
_NORMS = {
    "tiny": {"N": 16, "H": NORM_WIDTH},
    "small": {"N": 256, "H": NORM_WIDTH},
    "medium": {"N": 2048, "H": NORM_WIDTH},
    "large": {"N": 8192, "H": NORM_WIDTH},
}
_NORMS_CUDA = {"small": {"N": 64, "H": NORM_WIDTH}, "large": {"N": 32768, "H": NORM_WIDTH}}
# Attention rows: 256 keys; CUDA "large" is the issue's [4096 * 16, 256].
_SOFTMAXES = {
    "tiny": {"N": 64, "H": 256},
    "small": {"N": 1024, "H": 256},
    "medium": {"N": 8192, "H": 256},
    "large": {"N": 16384, "H": 256},
}
_SOFTMAXES_CUDA = {"small": {"N": 256, "H": 256}, "large": {"N": 65536, "H": 256}}
# Few long rows (a language model's logits over its vocabulary for a few tokens): fewer
# rows than the machine has multiprocessors or threads.
_LONG_ROWS = {
    "tiny": {"N": 2, "H": 1024},
    "small": {"N": 2, "H": 65536},
    "medium": {"N": 4, "H": 262144},
    "large": {"N": 8, "H": 524288},
}
_LONG_ROWS_CUDA = {"small": {"N": 4, "H": 8192}, "large": {"N": 16, "H": 262144}}
# MLP-Mixer's residual stream (B, N tokens, C channels); CUDA "large" is Mixer-B/16's at
# batch 32.
_MIXER_STREAMS = {
    "tiny": {"B": 2, "N": 16, "C": 32},
    "small": {"B": 4, "N": 49, "C": 128},
    "medium": {"B": 8, "N": 196, "C": 512},
    "large": {"B": 16, "N": 196, "C": 768},
}
_MIXER_STREAMS_CUDA = {"small": {"B": 2, "N": 49, "C": 256}, "large": {"B": 32, "N": 196, "C": 768}}
# Batch-1 NCHW activations (a diffusion UNet at inference): GroupNorm's rows are its groups.
_IMAGES_BATCH1 = {
    "tiny": {"N": 1, "C": 8, "H": 4, "W": 4},
    "small": {"N": 1, "C": 32, "H": 32, "W": 32},
    "medium": {"N": 1, "C": 64, "H": 64, "W": 64},
    "large": {"N": 1, "C": 128, "H": 64, "W": 64},
}
_IMAGES_BATCH1_CUDA = {
    "small": {"N": 1, "C": 64, "H": 16, "W": 16},
    "large": {"N": 1, "C": 256, "H": 128, "W": 128},
}
# ConvNeXt-T's first stage: 96 channels (on CUDA a warp walks 12 of them, a step of 8
# elements and one of 4) over 56 x 56 at 224 x 224 inputs.
_CONVNEXT_STAGE1 = {
    "tiny": {"N": 1, "C": 96, "H": 4, "W": 4},
    "small": {"N": 1, "C": 96, "H": 56, "W": 56},
    "medium": {"N": 4, "C": 96, "H": 56, "W": 56},
    "large": {"N": 8, "C": 96, "H": 56, "W": 56},
}
_CONVNEXT_STAGE1_CUDA = {
    "small": {"N": 2, "C": 96, "H": 56, "W": 56},
    "large": {"N": 32, "C": 96, "H": 56, "W": 56},
}
# GPT-2's attention scores [batch, heads, T, T]; CUDA "large" is the GPT-2 block row's.
_ATTENTIONS = {
    "tiny": {"B": 1, "heads": 2, "T": 16},
    "small": {"B": 1, "heads": 12, "T": 64},
    "medium": {"B": 1, "heads": 12, "T": 128},
    "large": {"B": 4, "heads": 12, "T": 128},
}
_ATTENTIONS_CUDA = {
    "small": {"B": 1, "heads": 12, "T": 64},
    "large": {"B": 32, "heads": 12, "T": 256},
}
# CPU autocast computes in bfloat16; CUDA in float16 (the usual choice for inference).
AUTOCAST_DTYPES = {"cpu": torch.bfloat16, "cuda": torch.float16}

_LAYERS = {
    "tiny": {"T": LSTM_LAYER_STEPS, "B": 2, "H": 8},
    "small": {"T": LSTM_LAYER_STEPS, "B": 8, "H": 64},
    "medium": {"T": LSTM_LAYER_STEPS, "B": 16, "H": 128},
    "large": {"T": LSTM_LAYER_STEPS, "B": 64, "H": 512},
}

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="elementwise_chain",
            description="(x * y + 1).relu().sigmoid()",
            source=_source(
                """
                def elementwise_chain(x, y):
                    return (x * y + 1).relu().sigmoid()
                """
            ),
            make_inputs=_rows_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="gelu_bias",
            description="gelu(x + bias), bias broadcast over the last dim",
            source=_source(
                """
                def gelu_bias(x, bias):
                    return torch.nn.functional.gelu(x + bias)
                """
            ),
            make_inputs=_bias_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="bias_gelu_dropout",
            description="dropout(gelu(x + bias), 0.1) in training: a random mask per call",
            source=_source(
                """
                def bias_gelu_dropout(x, bias):
                    return torch.nn.functional.dropout(
                        torch.nn.functional.gelu(x + bias), 0.1, True
                    )
                """
            ),
            make_inputs=_bias_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
            dropout=0.1,
        ),
        Workload(
            name="norm_tail",
            description="(x - mean) * rstd * w + b; mean, rstd (N,1); w, b (H,)",
            source=_source(
                """
                def norm_tail(x, mean, rstd, w, b):
                    return (x - mean) * rstd * w + b
                """
            ),
            make_inputs=_norm_tail_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="transpose_2d",
            description="(x.t() * y + 1).relu(): x read transposed",
            source=_source(
                """
                def transpose_2d(x, y):
                    return (x.t() * y + 1.0).relu()
                """
            ),
            make_inputs=_transpose_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="permute_nhwc",
            description="(x.permute(0, 2, 3, 1) + y).relu(): NCHW x read as NHWC",
            source=_source(
                """
                def permute_nhwc(x, y):
                    return (x.permute(0, 2, 3, 1) + y).relu()
                """
            ),
            make_inputs=_permute_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="channels_last_residual",
            description="(a + r).relu(): a channels-last, r row-major NCHW",
            source=_source(
                """
                def channels_last_residual(a, r):
                    return (a + r).relu()
                """
            ),
            make_inputs=_channels_last_residual_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="se_gate",
            description="x * sigmoid(s): a squeeze-excite gate, s (N, C, 1, 1) per row of x",
            source=_source(
                """
                def se_gate(x, s):
                    return x * torch.sigmoid(s)
                """
            ),
            make_inputs=_se_gate_inputs,
            sizes=_SE_GATES,
            cuda_sizes=_SE_GATES_CUDA,
        ),
        Workload(
            name="batchnorm_relu",
            description="inference BatchNorm (running statistics) then ReLU, NCHW",
            source=_source(
                """
                def batchnorm_relu(x, w, b, mean, var):
                    return torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5, True).relu()
                """
            ),
            make_inputs=_batch_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="batchnorm_relu_train",
            description="BatchNorm with batch statistics (training mode, no gradients) "
            "then ReLU: the running statistics updated per call",
            source=_source(
                """
                def batchnorm_relu_train(x, w, b, mean, var):
                    return torch.batch_norm(x, w, b, mean, var, True, 0.1, 1e-5, True).relu()
                """
            ),
            make_inputs=_batch_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="groupnorm_silu",
            description="GroupNorm (8 groups) then SiLU, NCHW (a diffusion UNet's block)",
            source=_source(
                """
                def groupnorm_silu(x, w, b):
                    return torch.nn.functional.silu(torch.group_norm(x, 8, w, b, 1e-5))
                """
            ),
            make_inputs=_group_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="layer_norm_channels",
            description="LayerNorm over the channels of NCHW, written out as ConvNeXt's "
            "channels-first LayerNorm: statistics over dim 1, then the affine",
            source=_channels_first_layer_norm_source("layer_norm_channels"),
            make_inputs=_group_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="layer_norm_channels_last",
            description="layer_norm_channels over a channels-last activation: each "
            "position's channels are one run in memory",
            source=_channels_first_layer_norm_source("layer_norm_channels_last"),
            make_inputs=_channels_last_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="softmax_channels",
            description="softmax over the channels of NCHW logits plus a bias, as a "
            "segmentation head's class probabilities: rows are columns",
            source=_source(
                """
                def softmax_channels(x, y):
                    return torch.softmax(x + y, 1)
                """
            ),
            make_inputs=_pair_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="mixer_layer_norm",
            description="MLP-Mixer's residual add and LayerNorm over a stream laid out "
            "transposed: rows are columns of the input and runs of the result",
            source=_source(
                """
                def mixer_layer_norm(x, t, w, b):
                    y = x + t
                    return y, torch.layer_norm(y, [x.size(-1)], w, b, 1e-6)
                """
            ),
            make_inputs=_mixer_stream_inputs,
            sizes=_MIXER_STREAMS,
            cuda_sizes=_MIXER_STREAMS_CUDA,
        ),
        Workload(
            name="layer_norm_2d",
            description="timm's LayerNorm2d: layer_norm of a permuted NCHW activation over "
            "its channels, permuted back (its result channels-last)",
            source=_layer_norm_2d_source("layer_norm_2d"),
            make_inputs=_group_norm_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
        ),
        Workload(
            name="layer_norm_2d_96",
            description="layer_norm_2d at ConvNeXt-T's first stage: 96 channels over 56 x 56",
            source=_layer_norm_2d_source("layer_norm_2d_96"),
            make_inputs=_group_norm_inputs,
            sizes=_CONVNEXT_STAGE1,
            cuda_sizes=_CONVNEXT_STAGE1_CUDA,
        ),
        Workload(
            name="groupnorm_silu_batch1",
            description="GroupNorm (8 groups) then SiLU at batch 1: 8 rows",
            source=_source(
                """
                def groupnorm_silu_batch1(x, w, b):
                    return torch.nn.functional.silu(torch.group_norm(x, 8, w, b, 1e-5))
                """
            ),
            make_inputs=_group_norm_inputs,
            sizes=_IMAGES_BATCH1,
            cuda_sizes=_IMAGES_BATCH1_CUDA,
        ),
        Workload(
            name="squared_error_mean",
            description="((x - y) * (x - y)).mean(): a loss, the whole tensor one row",
            source=_source(
                """
                def squared_error_mean(x, y):
                    return ((x - y) * (x - y)).mean()
                """
            ),
            make_inputs=_rows_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="expand_leading",
            description="(x.expand(N, H) * y + 1).relu(): x (1, H) expanded",
            source=_source(
                """
                def expand_leading(x, y):
                    return (x.expand(y.size(0), y.size(1)) * y + 1.0).relu()
                """
            ),
            make_inputs=_expand_inputs,
            sizes=_ROWS,
            cuda_sizes=_ROWS_CUDA,
        ),
        Workload(
            name="lstm_cell",
            description="LSTM cell: two matmuls, then chunked gates fused",
            source=_lstm_source(f"lstm_cell{_LSTM_CELL_ARGS}", _LSTM_CELL_GATES),
            make_inputs=_lstm_cell_inputs,
            sizes=_CELLS,
        ),
        Workload(
            name="lstm_cell_train",
            description="LSTM cell's training step: forward, then gradients of all inputs",
            source=_lstm_source(f"lstm_cell_train{_LSTM_CELL_ARGS}", _LSTM_CELL_GATES),
            make_inputs=_lstm_cell_inputs,
            sizes=_CELLS,
            training=True,
        ),
        Workload(
            name="gemm_epilogue_autocast",
            description="gelu(x @ w + b) * 2.0 under autocast (CPU bfloat16, CUDA float16)",
            source=_source(
                """
                def gemm_epilogue_autocast(x, w, b):
                    return torch.nn.functional.gelu(torch.mm(x, w) + b) * 2.0
                """
            ),
            make_inputs=_gemm_epilogue_inputs,
            sizes=_GEMMS,
            cuda_sizes=_GEMMS_CUDA,
            autocast=AUTOCAST_DTYPES,
        ),
        Workload(
            name="column_sum",
            description="a bias gradient beside its activation's: (g * sigmoid(x)).sum(0) "
            "over [N, H]",
            source=_source(
                """
                def column_sum(g, x):
                    return (g * torch.sigmoid(x)).sum(0)
                """
            ),
            make_inputs=_pair_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
            long_sums=True,
        ),
        Workload(
            name="column_var",
            description="feature statistics: the unbiased variance of x - y over dim 0 of "
            "[N, H] (columns, one pass on CUDA)",
            source=_source(
                """
                def column_var(x, y):
                    return (x - y).var(0)
                """
            ),
            make_inputs=_pair_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
            long_sums=True,
        ),
        Workload(
            name="channel_stats",
            description="BatchNorm's per-channel statistics of x - y: mean and biased "
            "variance over dims 0, 2, 3 of NCHW",
            source=_source(
                """
                def channel_stats(x, y):
                    d = x - y
                    return d.mean([0, 2, 3], keepdim=True), d.var([0, 2, 3], False, True)
                """
            ),
            make_inputs=_pair_inputs,
            sizes=_IMAGES,
            cuda_sizes=_IMAGES_CUDA,
            long_sums=True,
        ),
        Workload(
            name="layer_norm",
            description=f"layer_norm over rows of {NORM_WIDTH}",
            source=_source(
                f"""
                def layer_norm(x, w, b):
                    return torch.layer_norm(x, [{NORM_WIDTH}], w, b, 1e-5)
                """
            ),
            make_inputs=_layer_norm_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
        ),
        Workload(
            name="residual_layer_norm",
            description="h = x + bias + residual; returns h and layer_norm(h)",
            source=_residual_layer_norm_source("residual_layer_norm"),
            make_inputs=_residual_layer_norm_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
        ),
        Workload(
            name="residual_rms_norm",
            description="h = x + bias + residual; returns h and rms_norm(h) (Llama's norm)",
            source=_source(
                f"""
                def residual_rms_norm(x, r, bias, w, b):
                    h = x + bias + r
                    return h, torch.rms_norm(h, [{NORM_WIDTH}], w, 1e-6)
                """
            ),
            make_inputs=_residual_layer_norm_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
        ),
        Workload(
            name="residual_layer_norm_train",
            description="residual_layer_norm's training step: forward, then every gradient",
            source=_residual_layer_norm_source("residual_layer_norm_train"),
            make_inputs=_residual_layer_norm_inputs,
            sizes=_NORMS,
            cuda_sizes=_NORMS_CUDA,
            training=True,
        ),
        Workload(
            name="softmax",
            description="softmax over rows of 256",
            source=_source(
                """
                def softmax(x):
                    return torch.softmax(x, -1)
                """
            ),
            make_inputs=_softmax_inputs,
            sizes=_SOFTMAXES,
            cuda_sizes=_SOFTMAXES_CUDA,
        ),
        Workload(
            name="softmax_long_rows",
            description="softmax over a few rows of a vocabulary's length",
            source=_source(
                """
                def softmax_long_rows(x):
                    return torch.softmax(x, -1)
                """
            ),
            make_inputs=_softmax_inputs,
            sizes=_LONG_ROWS,
            cuda_sizes=_LONG_ROWS_CUDA,
        ),
        Workload(
            name="masked_softmax",
            description="GPT-2 attention's scale, causal mask and softmax over [B, heads, T, T]",
            source=_source(
                """
                def masked_softmax(att, mask):
                    return torch.softmax((att * 0.125).masked_fill(mask == 0, float("-inf")), -1)
                """
            ),
            make_inputs=_masked_softmax_inputs,
            sizes=_ATTENTIONS,
            cuda_sizes=_ATTENTIONS_CUDA,
        ),
        Workload(
            name="attention_dropout",
            description="masked_softmax, then attention's dropout(0.1) in training",
            source=_source(
                """
                def attention_dropout(att, mask):
                    probs = torch.softmax((att * 0.125).masked_fill(mask == 0, float("-inf")), -1)
                    return torch.nn.functional.dropout(probs, 0.1, True)
                """
            ),
            make_inputs=_masked_softmax_inputs,
            sizes=_ATTENTIONS,
            cuda_sizes=_ATTENTIONS_CUDA,
            dropout=0.1,
        ),
        Workload(
            name="lstm_cell_autocast",
            description="LSTM cell under autocast (CPU bfloat16, CUDA float16)",
            source=_lstm_source(f"lstm_cell_autocast{_LSTM_CELL_ARGS}", _LSTM_CELL_GATES),
            make_inputs=_lstm_cell_inputs,
            sizes=_CELLS,
            autocast=AUTOCAST_DTYPES,
        ),
        Workload(
            name="lstm_gates",
            description="the LSTM cell's elementwise part, given both gate matmuls",
            source=_lstm_source(
                "lstm_gates(gates_x, gates_h, b_ih, b_hh, cx)",
                "gates = gates_x + gates_h + b_ih + b_hh",
            ),
            make_inputs=_lstm_gates_inputs,
            sizes=_CELLS,
        ),
        Workload(
            name="milstm_cell",
            description="multiplicative-integration LSTM cell",
            source=_lstm_source(
                "milstm_cell(x, hx, cx, w_ih, w_hh, alpha, beta_i, beta_h, bias)",
                "wx = x @ w_ih.t()",
                "uz = hx @ w_hh.t()",
                "gates = alpha * wx * uz + beta_i * wx + beta_h * uz + bias",
            ),
            make_inputs=_milstm_cell_inputs,
            sizes=_CELLS,
        ),
        Workload(
            name="gru_cell",
            description="GRU cell: two gate tensors, each chunked by 3",
            source=_source(
                """
                def gru_cell(x, hx, w_ih, w_hh, b_ih, b_hh):
                    gi = x @ w_ih.t() + b_ih
                    gh = hx @ w_hh.t() + b_hh
                    i_r, i_z, i_n = gi.chunk(3, 1)
                    h_r, h_z, h_n = gh.chunk(3, 1)
                    r = torch.sigmoid(i_r + h_r)
                    z = torch.sigmoid(i_z + h_z)
                    n = torch.tanh(i_n + r * h_n)
                    return n + z * (hx - n)
                """
            ),
            make_inputs=_gru_cell_inputs,
            sizes=_CELLS,
        ),
        Workload(
            name="lstm_layer",
            description=f"LSTM layer: {LSTM_LAYER_STEPS} steps looped inside the function",
            source=_source(
                """
                def lstm_layer(x, hx, cx, w_ih, w_hh, b_ih, b_hh):
                    outputs: list[Tensor] = []
                    for t in range(x.size(0)):
                        gates = x[t] @ w_ih.t() + hx @ w_hh.t() + b_ih + b_hh
                        i, f, g, o = gates.chunk(4, 1)
                        i = torch.sigmoid(i)
                        f = torch.sigmoid(f)
                        g = torch.tanh(g)
                        o = torch.sigmoid(o)
                        cx = f * cx + i * g
                        hx = o * torch.tanh(cx)
                        outputs.append(hx)
                    return torch.stack(outputs), hx, cx
                """
            ),
            make_inputs=_lstm_layer_inputs,
            sizes=_LAYERS,
        ),
    )
}


def make_inputs(
    workload: Workload, size: str, dtype: torch.dtype, device: torch.device, seed: int = 0
) -> Inputs:
    """The workload's inputs at `size`, the same values on every call with the same seed."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    inputs = workload.make_inputs(workload.dims(size, device), dtype, device, gen)
    if workload.training:
        inputs = tuple(t.requires_grad_() for t in inputs)
    return inputs
