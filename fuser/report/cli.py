"""python -m fuser.report MODEL.pt --input 'float32[32,3,224,224]' [--input ...]

Loads a saved TorchScript model (torch.jit.save), makes random inputs from the specs
(DTYPE[D0,D1,...][@DEVICE]) and prints the report as text (default) or JSON; --dot and
--png draw the graph (groups collapsed to one box each unless --expand).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from fuser.report import dot, inputs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fuser.report", description=__doc__.split("\n")[2])
    p.add_argument("model", help="a TorchScript file saved with torch.jit.save")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="SPEC",
        help="one per model input, in order: DTYPE[D0,D1,...][@DEVICE], e.g. float32[8,3,32,32]",
    )
    p.add_argument("--train", action="store_true", help="inputs require grad; backward is run")
    p.add_argument("--eval", action="store_true", help="call model.eval() first")
    p.add_argument("--min-group-size", type=int, help="dissolve groups of fewer nodes")
    p.add_argument("--max-groups", type=int, help="keep only the first N groups (0: all)")
    p.add_argument("--arg-limit", type=int, help="most inputs + outputs of one group")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--dot", metavar="FILE", help="write the graph as graphviz dot text")
    p.add_argument("--png", metavar="FILE", help="render the graph with graphviz's dot")
    p.add_argument("--expand", action="store_true", help="draw each group's nodes")
    p.add_argument("--no-measure", action="store_true", help="no bandwidth or kernel timing")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import fuser

    try:
        example = [inputs.from_spec(spec) for spec in args.input]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # The model's parameters and constants go where its inputs are (a frozen model's
    # weights are constants saved on the device it was frozen on).
    devices = {t.device for t in example}
    model = torch.jit.load(args.model, map_location=devices.pop() if len(devices) == 1 else "cpu")
    if args.eval:
        model.eval()
    if args.train:
        example = [t.requires_grad_() if t.is_floating_point() else t for t in example]
    if not args.train:
        torch.set_grad_enabled(False)
    result = fuser.report(
        model,
        *example,
        min_group_size=args.min_group_size,
        max_groups=args.max_groups,
        arg_limit=args.arg_limit,
        measure=not args.no_measure,
    )
    print(json.dumps(result.to_dict(), indent=2) if args.json else str(result))
    status = 0
    if args.dot or args.png:
        graph = result.graphs[0]
        text = dot.to_dot(
            graph.graph, collapse=not args.expand, title=f"{args.model} ({graph.phase})"
        )
        if args.dot:
            with open(args.dot, "w") as f:
                f.write(text)
        if args.png:
            try:
                dot.write_png(text, args.png)
            except dot.DotMissing as e:
                print(f"error: {e}", file=sys.stderr)
                status = 1
    return status
