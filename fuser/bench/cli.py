"""`python -m fuser.bench` / `fuser-bench`: parse options, run the suite, write the
table (stdout), the JSON file and the PNG chart (under --out). Exit status 1 when any
fuser correctness check failed, 2 for bad options."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from fuser.bench.chart import write_chart
from fuser.bench.json_report import read_json, write_json
from fuser.bench.machine import available_devices, busy_note
from fuser.bench.models import MODEL_WORKLOADS, ZOO_WORKLOADS, model_unavailable
from fuser.bench.modes import EAGER, MODES
from fuser.bench.presets import FULL, QUICK, SLOW_TO_BUILD_MODES, SMOKE
from fuser.bench.progress import Progress
from fuser.bench.runner import RunOptions, run_suite, workload_named
from fuser.bench.table import render_smoke_list, render_table
from fuser.bench.workloads import SIZE_NAMES, WORKLOADS

DTYPE_NAMES = ("float32", "float16", "bfloat16")
# The kernel workloads run by default; the models with --models, --zoo or --workload.
ALL_WORKLOADS = (*WORKLOADS, *MODEL_WORKLOADS, *ZOO_WORKLOADS)

JSON_NAME = "results.json"
CHART_NAME = "speedup.png"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fuser-bench",
        description="Benchmark fuser against eager PyTorch, TorchScript, NNC, oneDNN Graph "
        "and torch.compile.",
    )
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument(
        "--quick", action="store_true", help="medium sizes, short measurements (default)"
    )
    speed.add_argument("--full", action="store_true", help="small, medium and large sizes")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, correctness only: every workload through each mode, no timing",
    )
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all")
    parser.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help=f"repeatable or comma-separated; one of {', '.join(ALL_WORKLOADS)}",
    )
    parser.add_argument(
        "--models",
        action="store_true",
        help=f"the model set ({', '.join(MODEL_WORKLOADS)}): scripted, frozen, profiled; "
        "not in the default set",
    )
    parser.add_argument(
        "--show",
        type=Path,
        metavar="JSON",
        help="print the table of a saved results.json (rows of a run cut short included) and exit",
    )
    parser.add_argument(
        "--zoo",
        action="store_true",
        help=f"more image classifiers ({', '.join(ZOO_WORKLOADS)}), scripted and frozen; "
        "torchvision and timm, each skipped with its reason where it does not import",
    )
    parser.add_argument(
        "--mode",
        action="append",
        metavar="NAME",
        help=f"repeatable or comma-separated; of {', '.join(MODES)} (eager always runs)",
    )
    parser.add_argument(
        "--size",
        action="append",
        metavar="NAME",
        help=f"repeatable or comma-separated; of {', '.join(SIZE_NAMES)} (instead of the preset's)",
    )
    parser.add_argument(
        "--dtype",
        action="append",
        metavar="NAME",
        help="repeatable or comma-separated; of float32, float16, bfloat16 (default: all the "
        "device runs fast)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench_out"), help="output folder")
    return parser


def _split(values: list[str] | None) -> list[str]:
    return [name.strip() for value in values or [] for name in value.split(",") if name.strip()]


def _choose(
    parser: argparse.ArgumentParser, asked: list[str], known: Sequence[str], what: str
) -> list[str]:
    unknown = [name for name in asked if name not in known]
    if unknown:
        parser.error(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
    return [name for name in known if name in asked]  # suite order, no duplicates


def _devices(parser: argparse.ArgumentParser, asked: str) -> list[torch.device]:
    devices = available_devices()
    if asked == "all":
        return devices
    chosen = [d for d in devices if d.type == asked]
    if not chosen:
        parser.error(f"--device {asked}: no {asked} device is available here")
    return chosen


def parse_options(argv: Sequence[str] | None) -> tuple[RunOptions, Path]:
    """What to run, and the folder to write into."""
    parser = build_parser()
    args = parser.parse_args(argv)
    preset = SMOKE if args.smoke else FULL if args.full else QUICK
    asked_modes = _split(args.mode) or list(preset.default_modes)
    modes = _choose(parser, [EAGER, *asked_modes], list(MODES), "mode")
    asked_workloads = _split(args.workload)
    if args.models:
        asked_workloads += list(MODEL_WORKLOADS)
    if args.zoo:
        asked_workloads += list(ZOO_WORKLOADS)
    workloads = _choose(parser, asked_workloads or list(WORKLOADS), ALL_WORKLOADS, "workload")
    if args.size:
        preset = dataclasses.replace(
            preset, sizes=tuple(_choose(parser, _split(args.size), SIZE_NAMES, "size"))
        )
    dtype_names = None
    if args.dtype:
        dtype_names = _choose(parser, _split(args.dtype), DTYPE_NAMES, "dtype")
    options = RunOptions(
        preset=preset,
        devices=_devices(parser, args.device),
        workloads=workloads,
        modes=modes,
        dtype_names=dtype_names,
    )
    return options, args.out


def skip_unavailable(options: RunOptions) -> RunOptions:
    """`options` without the workloads that cannot be built here (torchvision models
    when torchvision does not import), each skipped with its reason printed."""
    kept = []
    for name in options.workloads:
        reason = model_unavailable(workload_named(name))
        if reason is None:
            kept.append(name)
        else:
            print(f"skipped {name}: {reason}")
    return dataclasses.replace(options, workloads=kept)


def main(argv: Sequence[str] | None = None) -> int:
    saved = build_parser().parse_args(argv).show
    if saved is not None:
        print(render_table(read_json(saved)))
        return 0
    options, out_dir = parse_options(argv)
    options = skip_unavailable(options)
    if not options.workloads:
        print("nothing to run")
        return 0
    left_out = [m for m in SLOW_TO_BUILD_MODES if m not in options.modes]
    if options.preset is SMOKE and left_out:
        print(f"note: --smoke leaves out {', '.join(left_out)}; add --mode to include it")

    with warnings.catch_warnings():
        # float32 matmuls stay exact on purpose (eager's default), so inductor's advice
        # to use TF32 is noise here.
        warnings.filterwarnings("ignore", message=".*TensorFloat32 tensor cores.*")
        # The JSON file is rewritten after every row: a run cut short (a time limit on a
        # lent machine) keeps the rows it finished.
        json_path = out_dir / JSON_NAME
        result = run_suite(
            options, Progress(options.row_count()), lambda so_far: write_json(so_far, json_path)
        )
    note = busy_note(result.metadata["load_average"]) if options.preset.timed else None

    print(render_smoke_list(result) if options.preset is SMOKE else render_table(result))
    write_json(result, json_path)
    print(f"wrote {json_path}")
    if note:
        print(note)
    if options.preset.timed:
        chart_path = out_dir / CHART_NAME
        if write_chart(result, chart_path):
            print(f"wrote {chart_path}")
        else:
            print("note: matplotlib is not installed, so no chart (pip install fuser[plot])")
    if result.failed_rows:
        print(
            f"FAILED: {len(result.failed_rows)} row(s) differ from eager or raised", file=sys.stderr
        )
        return 1
    return 0
