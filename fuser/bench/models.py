"""The model workloads: whole networks as users deploy them, scripted and frozen.

`torch.jit.freeze(torch.jit.script(model).eval())` of torchvision's resnet50 and
mobilenet_v3_large, and of a GPT-2 style transformer block written the usual way
(pre-LayerNorm, causal multi-head attention with softmax, tanh-GELU MLP, residuals).

A model workload is a Workload whose functions are modules: `eager_function()` is the
module itself, `scripted_function()` a scripted and frozen copy. Each call builds a
fresh instance (TorchScript caches optimized graphs per module, so a module optimized
under one mode's switches must not be timed under the next), loaded from the same
state_dict. The weights depend on the row's size (the GPT block's width and sequence
length), device and dtype, so the runner first places the workload on its row with
`placed()`.

torchvision is optional. The registry's torchvision wheels are CUDA builds whose C ops
fail to load beside a CPU torch (`import torchvision` raises RuntimeError "operator
torchvision::nms does not exist"); the model definitions need none of those ops, but
the package cannot be imported without them. Its rows are then skipped, with the reason.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from fuser.bench.workloads import AUTOCAST_DTYPES, Dims, Inputs, Workload

MODEL_SEED = 0


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention as GPT-2 (and nanoGPT) write it."""

    def __init__(self, width: int, heads: int, max_seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.attn_drop = nn.Dropout(0.1)
        self.resid_drop = nn.Dropout(0.1)
        self.register_buffer(
            "mask", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        head = c // self.heads
        q = q.view(b, t, self.heads, head).transpose(1, 2)
        k = k.view(b, t, self.heads, head).transpose(1, 2)
        v = v.view(b, t, self.heads, head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head))
        # mypy types a buffer as Tensor | Module; TorchScript knows it is a Tensor.
        future = self.mask[:, :, :t, :t] == 0  # type: ignore[index]
        att = att.masked_fill(future, float("-inf"))
        att = self.attn_drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.proj(y))


class TanhGelu(nn.Module):
    """GPT-2's GELU, the tanh approximation written out (HF's gelu_new, nanoGPT's NewGELU)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class GPT2Block(nn.Module):
    """x + attn(ln_1(x)), then + mlp(ln_2(x)); the MLP widens 4x."""

    def __init__(self, width: int, heads: int, max_seq: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, max_seq)
        self.ln_2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.gelu = TanhGelu()
        self.fc_proj = nn.Linear(4 * width, width)
        self.mlp_drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_drop(self.fc_proj(self.gelu(self.fc(self.ln_2(x)))))


def _gpt2_block(dims: Dims) -> nn.Module:
    return GPT2Block(dims["D"], dims["heads"], dims["T"])


def _torchvision_model(name: str) -> Callable[[Dims], nn.Module]:
    def make(dims: Dims) -> nn.Module:
        models = importlib.import_module("torchvision.models")
        return getattr(models, name)(weights=None)

    return make


def _unavailable(package: str, module: str) -> str | None:
    """Why `module` of `package` cannot be imported here; None when it can."""
    try:
        importlib.import_module(module)
    except ImportError as error:
        return f"{package} is not installed ({error}); pip install {package}"
    except (RuntimeError, OSError) as error:  # torchvision's C ops fail beside this torch
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return (
            f"{package} does not load beside torch {torch.__version__}: "
            f"{type(error).__name__}: {first}"
        )
    return None


def torchvision_unavailable() -> str | None:
    """Why torchvision's model definitions cannot be imported here; None when they can."""
    return _unavailable("torchvision", "torchvision.models")


def _timm_model(name: str) -> Callable[[Dims], nn.Module]:
    def make(dims: Dims) -> nn.Module:
        timm = importlib.import_module("timm")
        return timm.create_model(name, pretrained=False, scriptable=True)

    return make


def timm_unavailable() -> str | None:
    """Why timm's model definitions cannot be imported here (timm imports torchvision);
    None when they can."""
    return _unavailable("timm", "timm")


def _available() -> str | None:
    return None


def _images(dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> Inputs:
    b, hw = dims["B"], dims["HW"]
    return (torch.randn(b, 3, hw, hw, generator=gen, dtype=dtype, device=device),)


def _tokens(dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> Inputs:
    b, t, d = dims["B"], dims["T"], dims["D"]
    return (torch.randn(b, t, d, generator=gen, dtype=dtype, device=device),)


def _realistic_norm_statistics(model: nn.Module, gen: torch.Generator) -> None:
    """Batch norms get running statistics and affine terms away from the identity, so
    that freezing folds something real into the convolutions."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            assert module.running_mean is not None and module.running_var is not None
            module.running_mean.normal_(0.0, 0.1, generator=gen)
            module.running_var.uniform_(0.5, 1.5, generator=gen)
            if module.affine:
                module.weight.data.uniform_(0.5, 1.5, generator=gen)
                module.bias.data.normal_(0.0, 0.1, generator=gen)


@dataclass(frozen=True)
class ModelWorkload(Workload):
    # Defaults only because Workload's last fields have them; every entry names its own.
    make_model: Callable[[Dims], nn.Module] = _gpt2_block
    unavailable_reason: Callable[[], str | None] = _available
    # How TorchScript takes the model: "script", or "trace" for a model that cannot be
    # scripted (transformers' models), traced on the row's inputs.
    deploy: str = "script"
    # Set by placed(): the row's dims, device and dtype, which the weights follow.
    placement: tuple[tuple[tuple[str, int], ...], torch.device, torch.dtype] | None = None

    def eager_function(self) -> Any:
        """A fresh module on the row's device and dtype, in eval mode (training mode for
        a row with dropout or train_mode), with the weights every mode of the row shares."""
        if self.placement is None:
            raise RuntimeError(f"model workload {self.name} was not placed on a row")
        dims_items, device, dtype = self.placement
        with torch.random.fork_rng(devices=[]):  # its initial weights are overwritten
            model = self.make_model(dict(dims_items))
        model.load_state_dict(_initial_state(self.name, dims_items))
        training = self.dropout is not None or self.train_mode
        return model.to(device=device, dtype=dtype).train(training)

    def scripted_function(self) -> Any:
        """A fresh module, scripted and frozen as deployed models are; a training row's
        stays unfrozen, its weights parameters that the step differentiates."""
        eager = self.eager_function()
        if self.deploy == "trace":
            return torch.jit.freeze(torch.jit.trace(eager.eval(), self._example_inputs()))
        if not self.training:
            return torch.jit.freeze(torch.jit.script(eager).eval())
        # Unfrozen, a scripted module shares its class's compiled methods, and with them
        # the graph executors, with every module of that class: the previous mode's
        # optimized graph would be timed. A type of its own gives this mode fresh ones.
        return torch.jit._recursive.create_script_module(
            eager, torch.jit._recursive.infer_methods_to_compile, share_types=False
        )

    def _example_inputs(self) -> Inputs:
        """Inputs of the row's sizes for the tracer (which records their shapes' ops)."""
        assert self.placement is not None
        dims_items, device, dtype = self.placement
        gen = torch.Generator(device=device).manual_seed(MODEL_SEED)
        return self.make_inputs(dict(dims_items), dtype, device, gen)


@functools.lru_cache(maxsize=4)
def _initial_state(name: str, dims_items: tuple[tuple[str, int], ...]) -> dict[str, torch.Tensor]:
    """The weights of model workload `name` at these dims: seeded, on the CPU in float32."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(MODEL_SEED)
        model = EVERY_MODEL_WORKLOAD[name].make_model(dict(dims_items))
    gen = torch.Generator().manual_seed(MODEL_SEED)
    _realistic_norm_statistics(model, gen)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def placed(workload: Workload, size: str, device: torch.device, dtype: torch.dtype) -> Workload:
    """`workload` on one row: model workloads learn the dims, device and dtype their
    weights follow; other workloads are returned as they are."""
    if not isinstance(workload, ModelWorkload):
        return workload
    dims = tuple(workload.dims(size, device).items())
    return dataclasses.replace(workload, placement=(dims, device, dtype))


def model_unavailable(workload: Workload) -> str | None:
    """Why a workload cannot be built here (torchvision missing); None when it can."""
    return workload.unavailable_reason() if isinstance(workload, ModelWorkload) else None


# Convolution networks: batch 1 on CPU (a deployed CPU model serves one request at a
# time), 32 on CUDA; 224 x 224 images as the models were trained on.
_IMAGES = {"tiny": {"B": 1, "HW": 64}, "medium": {"B": 1, "HW": 224}}
_IMAGES_CUDA = {"tiny": {"B": 1, "HW": 64}, "medium": {"B": 32, "HW": 224}}
# GPT-2 small's width and heads; batch 1 of 128 tokens on CPU, 32 x 256 on CUDA.
_BLOCK = {
    "tiny": {"B": 1, "T": 16, "D": 64, "heads": 4},
    "medium": {"B": 1, "T": 128, "D": 768, "heads": 12},
}
_BLOCK_CUDA = {
    "tiny": {"B": 1, "T": 16, "D": 64, "heads": 4},
    "medium": {"B": 32, "T": 256, "D": 768, "heads": 12},
}

_MODELS: tuple[ModelWorkload, ...] = (
    ModelWorkload(
        name="resnet50",
        description="torchvision resnet50, scripted and frozen",
        source="",
        make_inputs=_images,
        sizes=_IMAGES,
        cuda_sizes=_IMAGES_CUDA,
        make_model=_torchvision_model("resnet50"),
        unavailable_reason=torchvision_unavailable,
    ),
    ModelWorkload(
        name="mobilenet_v3_large",
        description="torchvision mobilenet_v3_large, scripted and frozen",
        source="",
        make_inputs=_images,
        sizes=_IMAGES,
        cuda_sizes=_IMAGES_CUDA,
        make_model=_torchvision_model("mobilenet_v3_large"),
        unavailable_reason=torchvision_unavailable,
    ),
    ModelWorkload(
        name="efficientnet_b0_timm",
        description="timm efficientnet_b0 (squeeze-excite gates from means over H and W), "
        "scripted and frozen",
        source="",
        make_inputs=_images,
        sizes=_IMAGES,
        cuda_sizes=_IMAGES_CUDA,
        make_model=_timm_model("efficientnet_b0"),
        unavailable_reason=timm_unavailable,
    ),
    ModelWorkload(
        name="gpt2_block",
        description="GPT-2 block: pre-LayerNorm causal attention, tanh-GELU MLP",
        source="",
        make_inputs=_tokens,
        sizes=_BLOCK,
        cuda_sizes=_BLOCK_CUDA,
        make_model=_gpt2_block,
    ),
    ModelWorkload(
        name="gpt2_block_train",
        description="GPT-2 block's training step: forward, then the gradients of its input "
        "and every weight (dropout off, as in eval mode, so that results compare)",
        source="",
        make_inputs=_tokens,
        sizes=_BLOCK,
        cuda_sizes=_BLOCK_CUDA,
        make_model=_gpt2_block,
        training=True,
    ),
)
# The training step again with the block's three dropouts (p 0.1) on.
_MODELS += (
    dataclasses.replace(
        _MODELS[-1],
        name="gpt2_block_train_dropout",
        description="GPT-2 block's training step with its three dropouts (p 0.1) on: "
        "each mode draws its own masks",
        dropout=0.1,
    ),
)

# A convnet's training step in training mode: every BatchNorm normalizes with its
# batch's statistics.
_MODELS += (
    ModelWorkload(
        name="resnet18_train",
        description="torchvision resnet18's training step in training mode (BatchNorm "
        "with batch statistics): forward, then the gradients of the input and every weight",
        source="",
        make_inputs=_images,
        sizes=_IMAGES,
        cuda_sizes=_IMAGES_CUDA,
        make_model=_torchvision_model("resnet18"),
        unavailable_reason=torchvision_unavailable,
        training=True,
        train_mode=True,
    ),
)


def _under_autocast(model: ModelWorkload) -> ModelWorkload:
    """The same model with float32 weights and inputs, run under torch.autocast (CPU
    bfloat16, CUDA float16) as mixed-precision inference is deployed."""
    return dataclasses.replace(
        model,
        name=f"{model.name}_autocast",
        description=f"{model.description}, under autocast (CPU bfloat16, CUDA float16)",
        autocast=AUTOCAST_DTYPES,
    )


MODEL_WORKLOADS: dict[str, ModelWorkload] = {
    w.name: w for w in (*_MODELS, *(_under_autocast(m) for m in _MODELS if not m.training))
}


def _zoo_image_model(
    library: str,
    prefix: str,
    name: str,
    make: Callable[[str], Callable[[Dims], nn.Module]],
    unavailable: Callable[[], str | None],
) -> ModelWorkload:
    return ModelWorkload(
        name=f"{prefix}_{name}",
        description=f"{library} {name}, scripted and frozen",
        source="",
        make_inputs=_images,
        sizes=_ZOO_IMAGES,
        cuda_sizes=_ZOO_IMAGES_CUDA,
        make_model=make(name),
        unavailable_reason=unavailable,
    )


# The zoo's sizes: medium as the model set's on CUDA (batch 32) and a batch of 4 on CPU;
# small is one image on either, a served request's latency (on CUDA the host's cost
# per call shows there).
# (Tiny is one image of 224 x 224 too: the ViT, Mixer and CoAtNet models take no other.)
_ZOO_IMAGES = {
    "tiny": {"B": 1, "HW": 224},
    "small": {"B": 1, "HW": 224},
    "medium": {"B": 4, "HW": 224},
}
_ZOO_IMAGES_CUDA = {**_ZOO_IMAGES, "medium": {"B": 32, "HW": 224}}

# More deployed image classifiers, run with --zoo (not with --models: building and timing
# them all in every mode takes minutes): the layouts and ops the set above lacks
# (LayerNorm over channels, attention, depthwise convolutions, dense concatenations,
# channel shuffles, token mixing), as a user's own model would bring them.
_ZOO_TORCHVISION = (
    "resnet18",
    "efficientnet_b0",
    "regnet_y_400mf",
    "densenet121",
    "shufflenet_v2_x1_0",
    "convnext_tiny",
    "vit_b_16",
    "swin_t",
)
_ZOO_TIMM = (
    "resnet50d",
    "regnetz_b16",
    "convnext_nano",
    "vit_small_patch16_224",
    "mixer_b16_224",
    "coatnet_0_rw_224",
)


class LastHiddenState(nn.Module):
    """A transformers model's last hidden state as one tensor: the tracer takes neither
    dicts nor ModelOutput results."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, return_dict=False)[0]


def _transformers_model(name: str) -> Callable[[Dims], nn.Module]:
    """transformers' `name` at its base model's configuration, randomly initialized (the
    benchmark downloads nothing), without a key-value cache as an encoder is served."""

    def make(dims: Dims) -> nn.Module:
        transformers = importlib.import_module("transformers")
        model_class, config_class, settings = _TRANSFORMERS_MODELS[name]
        config = getattr(transformers, config_class)(use_cache=False, **settings)
        return LastHiddenState(getattr(transformers, model_class)(config))

    return make


def transformers_unavailable() -> str | None:
    """Why transformers' models cannot be imported here; None when they can."""
    return _unavailable("transformers", "transformers")


def _token_ids(
    dims: Dims, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> Inputs:
    # Ids below every model's vocabulary; the row's dtype is the weights'.
    return (torch.randint(0, 1000, (dims["B"], dims["T"]), generator=gen, device=device),)


# Each model's class, its configuration's class and the settings that differ from the
# library's defaults (its base model's configuration). Llama's default is a 7B model:
# this one is GPT-2 small's size with Llama's blocks (RMSNorm, rotary position
# embeddings, a SiLU-gated MLP).
_TRANSFORMERS_MODELS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bert": ("BertModel", "BertConfig", {}),
    "gpt2": ("GPT2Model", "GPT2Config", {}),
    "t5_encoder": ("T5EncoderModel", "T5Config", {}),
    "llama": (
        "LlamaModel",
        "LlamaConfig",
        {
            "hidden_size": 768,
            "intermediate_size": 2048,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "num_key_value_heads": 12,
            "vocab_size": 32000,
        },
    ),
}
# Sequences of 128 tokens: one request (small), a batch of 4 on CPU and 32 on CUDA (medium).
_ZOO_TOKENS = {
    "tiny": {"B": 1, "T": 16},
    "small": {"B": 1, "T": 128},
    "medium": {"B": 4, "T": 128},
}
_ZOO_TOKENS_CUDA = {**_ZOO_TOKENS, "medium": {"B": 32, "T": 128}}


def _zoo_transformers_model(name: str) -> ModelWorkload:
    return ModelWorkload(
        name=f"hf_{name}",
        description=f"transformers {_TRANSFORMERS_MODELS[name][0]}, traced and frozen",
        source="",
        make_inputs=_token_ids,
        sizes=_ZOO_TOKENS,
        cuda_sizes=_ZOO_TOKENS_CUDA,
        make_model=_transformers_model(name),
        unavailable_reason=transformers_unavailable,
        deploy="trace",
    )


ZOO_WORKLOADS: dict[str, ModelWorkload] = {
    w.name: w
    for w in (
        *(
            _zoo_image_model("torchvision", "tv", n, _torchvision_model, torchvision_unavailable)
            for n in _ZOO_TORCHVISION
        ),
        *(_zoo_image_model("timm", "timm", n, _timm_model, timm_unavailable) for n in _ZOO_TIMM),
        *(_zoo_transformers_model(n) for n in _TRANSFORMERS_MODELS),
    )
}


# The model set and the zoo: every workload whose functions are modules.
EVERY_MODEL_WORKLOAD: dict[str, ModelWorkload] = {**MODEL_WORKLOADS, **ZOO_WORKLOADS}
