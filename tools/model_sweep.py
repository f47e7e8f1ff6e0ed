"""Real models through the fuser, against eager: models of torchvision, timm and
transformers (those installed: the device machine has all three), inference (scripted
and frozen, or traced) and a training step (in eval mode, so that dropout and batch
statistics compare), on one device, TF32 off.

Per model and mode: the fused results' error against eager (the largest norm-wise
relative error of an output or, for a step, a parameter gradient) beside TorchScript's
own (the fuser off; oneDNN Graph off in both), the fusion groups formed, the
kernel launches (a first call's variant timing included), and the calls that ran
interpreted or failed a guard.
A model that TorchScript cannot script or trace is reported as such. An exception with
the fuser on is a finding (FAIL); so is a result whose error is far above TorchScript's
error of that result, unless it is about as close to float64's as eager's is (sums taken
in another order land elsewhere, not farther from the exact result); a result eager
gets no digit of against float64 (a gradient zero but for rounding) is not judged.
`--wide-timm` sweeps 87 timm architectures instead (batch 1; convolutional ones at
128 x 128, transformers at their own input size).

usage: PYTHONPATH=. python tools/model_sweep.py --device cuda [--only tv_resnet18,hf_gpt2]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib
import time
from collections.abc import Callable
from typing import Any

import torch

import fuser
from fuser.bench.jit_flags import jit_flags
from fuser.bench.models import LastHiddenState
from fuser.bench.modes import MODES

# Errors are judged norm-wise per result, ||got - want|| / ||want||, the largest over
# every output and gradient: the fused results may be this far from eager's beyond
# TorchScript's own distance.
ALLOWED = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


# A model, its example inputs, and how TorchScript takes it ("script" or "trace").
ModelMaker = Callable[[], tuple[torch.nn.Module, tuple[Any, ...], str]]


def image_models(
    prefix: str, build: Callable[[str], torch.nn.Module], names: list[str]
) -> dict[str, ModelMaker]:
    """Scripted image classifiers `build(name)`, each on two 224 x 224 images."""

    def maker(name: str) -> ModelMaker:
        return lambda: (build(name), (torch.randn(2, 3, 224, 224),), "script")

    return {f"{prefix}_{n}": maker(n) for n in names}


def torchvision_models() -> dict[str, ModelMaker]:
    models = importlib.import_module("torchvision.models")
    names = [
        "resnet18",
        "mobilenet_v3_large",
        "efficientnet_b0",
        "convnext_tiny",
        "vit_b_16",
        "swin_t",
        "regnet_y_400mf",
        "densenet121",
        "shufflenet_v2_x1_0",
    ]
    return image_models("tv", lambda n: getattr(models, n)(weights=None), names)


def timm_models() -> dict[str, ModelMaker]:
    timm = importlib.import_module("timm")
    names = [
        "resnet50d",
        "vit_small_patch16_224",
        "deit_tiny_patch16_224",
        "convnext_nano",
        "efficientnet_b0",
        "mixer_b16_224",
        "regnetz_b16",
        "coatnet_0_rw_224",
    ]
    return image_models(
        "timm", lambda n: timm.create_model(n, pretrained=False, scriptable=True), names
    )


# timm architectures of many families, for --wide-timm: convolutional ones (any input
# size) and ones with a fixed input size (transformers, MLP mixers).
WIDE_TIMM_CONV = (
    "resnet18 resnet26d seresnext26d_32x4d resnext26ts ecaresnet26t skresnet18 "
    "res2net50_14w_8s resnest14d densenet121 dla34 dpn48b cspresnet50 cspdarknet53 darknet17 "
    "vovnet39a ese_vovnet19b_dw selecsls42b hrnet_w18_small regnetx_002 regnety_002 rexnet_100 "
    "ghostnet_100 mnasnet_100 mobilenetv2_050 mobilenetv3_small_050 lcnet_050 tinynet_e "
    "efficientnet_lite0 efficientnet_b1 fbnetc_100 hardcorenas_a mixnet_s tf_efficientnet_b0 "
    "efficientnetv2_rw_t nf_resnet26 dm_nfnet_f0 repvgg_a0 convnext_atto convnextv2_atto "
    "poolformer_s12 convmixer_768_32 edgenext_xx_small mobilevit_xxs mobilevitv2_050 "
    "efficientformer_l1 levit_128s inception_v3 xception41 gernet_s halonet26t botnet26t_256 "
    "lambda_resnet26t fastvit_t8 repvit_m1 ghostnetv2_100 tresnet_m sebotnet33ts_256 "
    "gcresnext26ts resnetblur18 resnetaa50d"
).split()
WIDE_TIMM_FIXED = (
    "vit_tiny_patch16_224 deit_tiny_distilled_patch16_224 cait_xxs24_224 xcit_nano_12_p16_224 "
    "pvt_v2_b0 twins_svt_small swin_tiny_patch4_window7_224 swinv2_cr_tiny_224 "
    "maxvit_nano_rw_256 coat_lite_tiny crossvit_tiny_240 gcvit_xxtiny beit_base_patch16_224 "
    "mixer_s16_224 resmlp_12_224 gmlp_ti16_224 tnt_s_patch16_224 pit_ti_224 visformer_tiny "
    "sequencer2d_s nest_tiny mvitv2_tiny davit_tiny efficientvit_b0 tiny_vit_5m_224 hgnet_tiny "
    "inception_next_tiny"
).split()


def wide_timm_models() -> dict[str, ModelMaker]:
    timm = importlib.import_module("timm")

    def maker(name: str) -> ModelMaker:
        def make() -> tuple[torch.nn.Module, tuple[Any, ...], str]:
            model = timm.create_model(name, pretrained=False, scriptable=True)
            config = getattr(model, "pretrained_cfg", None) or {}
            side = config.get("input_size", (3, 224))[-1] if name in WIDE_TIMM_FIXED else 128
            return model, (torch.randn(1, 3, side, side),), "script"

        return make

    return {f"timm_{n}": maker(n) for n in WIDE_TIMM_CONV + WIDE_TIMM_FIXED}


def transformers_models() -> dict[str, ModelMaker]:
    transformers = importlib.import_module("transformers")

    def tokens() -> tuple[Any, ...]:
        return (torch.randint(0, 1000, (2, 64)),)

    def traced(
        make: Callable[[], torch.nn.Module],
    ) -> ModelMaker:
        return lambda: (LastHiddenState(make()), tokens(), "trace")

    bert = transformers.BertConfig(
        num_hidden_layers=2,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=1024,
        use_cache=False,
    )
    gpt2 = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, use_cache=False)
    t5 = transformers.T5Config(
        num_layers=2, d_model=256, d_kv=64, num_heads=4, d_ff=1024, use_cache=False
    )
    return {
        "hf_bert": traced(lambda: transformers.BertModel(bert)),
        "hf_gpt2": traced(lambda: transformers.GPT2Model(gpt2)),
        "hf_t5_encoder": traced(lambda: transformers.T5EncoderModel(t5)),
    }


def bench_models() -> dict[str, ModelMaker]:
    """The benchmark's own GPT-2 block (always available)."""
    from fuser.bench.models import GPT2Block

    return {"gpt2_block": lambda: (GPT2Block(256, 4, 64), (torch.randn(2, 64, 256),), "script")}


def available(wide_timm: bool = False) -> dict[str, ModelMaker]:
    found: dict[str, ModelMaker] = {}
    sources = (
        (wide_timm_models,)
        if wide_timm
        else (bench_models, torchvision_models, timm_models, transformers_models)
    )
    for source in sources:
        try:
            found.update(source())
        except Exception as error:  # noqa: BLE001 - a library that does not load here
            print(f"# {source.__name__}: not available ({type(error).__name__}: {error})")
    return found


def flat(results: Any) -> list[torch.Tensor]:
    """The floating tensors of a model's results (tuples, lists, dicts, HF outputs)."""
    if isinstance(results, torch.Tensor):
        return [results] if results.is_floating_point() else []
    if isinstance(results, dict):
        results = list(results.values())
    if isinstance(results, (tuple, list)):
        return [t for r in results for t in flat(r)]
    return []


def errors(got: list[torch.Tensor], want: list[torch.Tensor]) -> list[float]:
    """Each result's norm-wise relative error (a wrong small gradient shows); inf where
    the results do not pair up or are not finite."""
    if len(got) != len(want):
        return [float("inf")]
    out = []
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape:
            out.append(float("inf"))
            continue
        diff = float((g.double() - w.double()).norm())
        scale = max(float(w.double().norm()), 1e-30)
        out.append(diff / scale if diff == diff else float("inf"))
    return out


def switches(fused: bool, device: torch.device) -> Any:
    """The JIT's switches of the benchmark's mode, oneDNN Graph off: its own numerics
    (CPU) are not the fuser's, and it fails on the autodiff graphs of some steps with
    the fuser off (\"Schema not found for node: prim::Return\")."""
    return dataclasses.replace(MODES["fuser" if fused else "script"].flags(device), onednn=False)


def compile_model(model: torch.nn.Module, args: tuple[Any, ...], how: str, training: bool) -> Any:
    if how == "trace":
        traced = torch.jit.trace(model, args, check_trace=False)
        return traced if training else torch.jit.freeze(traced)
    if not training:
        return torch.jit.freeze(torch.jit.script(model))
    # Scripted modules of one class share their graph executors: a type of its own keeps
    # the previous mode's optimized graph from being the one run.
    return torch.jit._recursive.create_script_module(
        model, torch.jit._recursive.infer_methods_to_compile, share_types=False
    )


def run(
    compiled: Any,
    args: tuple[Any, ...],
    training: bool,
    weights: list[torch.Tensor] | None,
    calls: int = 4,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The last of `calls` calls' results and, for a step, its parameter gradients."""
    out: list[torch.Tensor] = []
    grads: list[torch.Tensor] = []
    for _ in range(calls):
        if not training:
            with torch.no_grad():
                out = [t.clone() for t in flat(compiled(*args))]
            continue
        results = flat(compiled(*args))
        params = [p for p in compiled.parameters() if p.requires_grad]
        if weights is None:
            weights = [torch.randn_like(r) for r in results]
        loss = sum((r * w).sum() for r, w in zip(results, weights, strict=True))
        grads = [
            g if g is not None else torch.zeros_like(p)
            for g, p in zip(
                torch.autograd.grad(loss, params, allow_unused=True), params, strict=True
            )
        ]
        out = [r.detach() for r in results]
    return out, grads


def sweep_one(
    name: str,
    make: ModelMaker,
    device: torch.device,
    dtype: torch.dtype,
    training: bool,
) -> str:
    torch.manual_seed(0)
    model, args, how = make()
    model = model.to(device).eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    args = tuple(a.to(device, dtype) if a.is_floating_point() else a.to(device) for a in args)
    mode = "step" if training else "infer"
    try:
        torch.manual_seed(1)
        want_out, want_grads = run(model, args, training, None, calls=1)
    except Exception as error_:  # noqa: BLE001
        return f"{name:28} {mode:5} eager failed: {type(error_).__name__}: {str(error_)[:80]}"
    torch.manual_seed(1)
    weights = [torch.randn_like(r) for r in want_out] if training else None
    if training:
        try:
            want_out, want_grads = run(model, args, training, weights, calls=1)
        except Exception as error_:  # noqa: BLE001 - eager's second step may fail too
            return f"{name:28} {mode:5} eager failed: {type(error_).__name__}: {str(error_)[:80]}"
    results = {}
    for label, on in (("script", False), ("fuser", True)):
        try:
            compiled = compile_model(copy.deepcopy(model), args, how, training)
        except Exception as error_:  # noqa: BLE001
            return f"{name:28} {mode:5} cannot {how}: {type(error_).__name__}: {str(error_)[:70]}"
        fuser.reset_stats()
        start = time.perf_counter()
        try:
            with (
                jit_flags(switches(on, device)),
                fuser.enabled(on),
                torch.autograd.set_multithreading_enabled(False),
            ):
                got_out, got_grads = run(compiled, args, training, weights)
        except Exception as error_:  # noqa: BLE001
            verdict = "FAIL" if on else "script failed"
            raised = f"{type(error_).__name__}: {str(error_)[:70]}"
            return f"{name:28} {mode:5} {verdict}: {label} raised {raised}"
        if device.type == "cuda":
            torch.cuda.synchronize()
        results[label] = (
            errors(got_out + got_grads, want_out + want_grads),
            dict(fuser.stats()),
            time.perf_counter() - start,
            got_out + got_grads,
        )
    ts_errs, _, _, _ = results["script"]
    fu_errs, stats, seconds, fused = results["fuser"]
    line = (
        f"{name:28} {mode:5} {{verdict}} error {max(fu_errs, default=0.0):.2e} "
        f"(TorchScript {max(ts_errs, default=0.0):.2e}) "
        f"groups {stats['groups_formed']:3} launches {stats['kernel_launches']:4} "
        f"interpreted {stats['interpreted_runs']:3} guard_failures {stats['guard_failures']:3} "
        f"{seconds:6.1f} s"
    )
    # Judged result by result: a gradient that is rounding noise in every mode (BERT's key
    # bias, mathematically zero) must not set the bar for the others.
    if len(fused) != len(want_out + want_grads):
        return line.format(verdict="FAIL") + "; the fused results do not pair up with eager's"
    # TorchScript's results not pairing up (its own finding) leave the dtype's floor.
    if len(ts_errs) != len(fu_errs):
        ts_errs = [0.0] * len(fu_errs)
    far = [
        i
        for i, (fu, ts) in enumerate(zip(fu_errs, ts_errs, strict=True))
        if not fu <= max(10 * ts, ALLOWED[dtype])
    ]
    if not far:
        return line.format(verdict="ok  ")
    # Farther from eager than TorchScript is: judge those against float64's results (a
    # sum taken in another order lands elsewhere, not necessarily farther from exact).
    wide = copy.deepcopy(model).double()
    wide_args = tuple(a.double() if a.is_floating_point() else a for a in args)
    wide_weights = [w.double() for w in weights] if weights is not None else None
    try:
        exact_out, exact_grads = run(wide, wide_args, training, wide_weights, calls=1)
    except Exception as error_:  # noqa: BLE001
        return line.format(verdict="FAIL") + f"; float64 run raised {type(error_).__name__}"
    exact = exact_out + exact_grads
    ours, eagers = errors(fused, exact), errors(want_out + want_grads, exact)
    if len(ours) != len(eagers):
        return line.format(verdict="FAIL") + "; float64's results do not pair up"
    # A result eager gets no digit of (its error at least the value: a gradient that is
    # zero but for rounding, as attention's key bias's) is noise in every mode: not judged.
    noise = [i for i in far if eagers[i] >= 1.0]
    judged = [i for i in far if i not in noise]
    note = f"; {len(noise)} results rounding noise in eager too (not judged)" if noise else ""
    if not judged:
        return line.format(verdict="ok  ") + note
    worst = max(judged, key=lambda i: ours[i] / max(eagers[i], 1e-30))
    detail = f"; result {worst} from float64: fuser {ours[worst]:.2e}, eager {eagers[worst]:.2e}"
    if all(ours[i] <= 2 * eagers[i] for i in judged):
        return line.format(verdict="ok  ") + detail + note
    # A result that jumps when the input moves by rounding (a max pool's argmax between
    # near-equal values, a ReLU's kink) is judged against how far eager's own result
    # moves from float64's under such a move.
    moved = sensitivity(model, args, training, weights, exact, dtype)
    if moved is not None and all(ours[i] <= 2 * max(eagers[i], moved[i]) for i in judged):
        return (
            line.format(verdict="ok  ")
            + detail
            + f"; eager's own moves to {moved[worst]:.2e} when its input moves by rounding"
            + note
        )
    return line.format(verdict="FAIL") + detail + note


# Relative noise put on the inputs to see how far eager's results move: what rounding
# otherwise in every op leaves in a deep layer's values (an ulp of float32 is 6e-8
# relative; the groups of a network's step differ from eager's by up to 2e-7 each, and
# dozens of layers add up). timm's hgnet_tiny has a batch norm's output of 3e-10 before
# a ReLU: which side of zero it lands on is rounding, and it moves a whole channel's
# gradients by 1e-3.
_ROUNDING_NOISE = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def sensitivity(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    training: bool,
    weights: list[torch.Tensor] | None,
    exact: list[torch.Tensor],
    dtype: torch.dtype,
    tries: int = 8,
) -> list[float] | None:
    """Per result, the farthest eager's result lands from float64's over `tries` runs on
    inputs moved by rounding noise; None where eager raises or its results do not pair up."""
    farthest: list[float] | None = None
    for k in range(tries):
        gen = torch.Generator(device="cpu").manual_seed(100 + k)
        moved = tuple(
            a * (1 + _ROUNDING_NOISE[dtype] * torch.randn(a.shape, generator=gen).to(a))
            if a.is_floating_point()
            else a
            for a in args
        )
        try:
            out, grads = run(model, moved, training, weights, calls=1)
        except Exception:  # noqa: BLE001 - a model that fails a second call
            return None
        errs = errors(out + grads, exact)
        if len(errs) != len(exact):
            return None
        farthest = (
            errs if farthest is None else [max(a, b) for a, b in zip(farthest, errs, strict=True)]
        )
    return farthest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--modes", default="infer,step")
    parser.add_argument("--wide-timm", action="store_true", help="87 timm architectures")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    # TF32 convolutions (cuDNN's default) round to 10 bits: a layout or algorithm the
    # fused graph's convolutions get would move results by 1e-4, hiding the fuser's own.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    models = available(args.wide_timm)
    only = [n for n in args.only.split(",") if n]
    for name, make in models.items():
        if only and name not in only:
            continue
        for mode in args.modes.split(","):
            print(sweep_one(name, make, device, dtype, training=mode == "step"), flush=True)


if __name__ == "__main__":
    main()
