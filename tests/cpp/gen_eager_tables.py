"""Writes the eager reference tables of the C++ tests, from the installed torch:

tests/cpp/data/result_types.txt (test_type_promotion.cpp): torch.result_type of pairs
and triples of operands, `arguments | result`.

tests/cpp/data/op_dtypes.txt (test_op_table.cpp): eager's result dtype for each fusible
schema over a grid of argument dtypes and kinds.

    PYTHONPATH=. python tests/cpp/gen_eager_tables.py   # after building (lists the schemas)

Each op_dtypes line: `schema name | arguments | result`, the arguments separated by spaces:
  t:<dtype>  tensor of rank 1      z:<dtype>  0-dim tensor
  f:<x> i:<x> b:<x>  Python float / int / bool scalar (a graph constant)
  n  None    s:<text>  string    dt:<dtype>  a ScalarType    dev:cpu  a device
  mf:contiguous  a MemoryFormat
and the result is a dtype or `error` (eager raised).
"""

import itertools
import sys
from pathlib import Path

import torch

import fuser

DTYPES = {
    "b": torch.bool,
    "u8": torch.uint8,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
}
NAMES = {v: k for k, v in DTYPES.items()}
ALL = list(DTYPES)
FEW = ["b", "i64", "f16", "f64"]


def tensor_specs(count: int) -> list[list[str]]:
    """Dtype/rank combinations of `count` tensor arguments."""
    if count == 1:
        return [[f"t:{d}"] for d in ALL] + [["z:f32"], ["z:i64"]]
    if count == 2:
        specs = [[f"t:{a}", f"t:{b}"] for a in ALL for b in ALL]
        specs += [[f"t:{a}", f"z:{b}"] for a in ALL for b in ("i64", "f64")]
        specs += [["z:f64", f"t:{b}"] for b in ALL]
        return specs
    specs = [[f"t:{a}"] * count for a in ALL]
    specs += [[f"t:{a}", *[f"t:{b}"] * (count - 1)] for a in FEW for b in FEW if a != b]
    specs += [[f"t:{a}", f"z:{b}", *[f"t:{a}"] * (count - 2)] for a in FEW for b in FEW if a != b]
    return specs


def typename(arg: torch.Argument) -> str:
    """The type as the schema text spells it: `Scalar?`, `ScalarType`, ..."""
    t = str(arg.real_type)
    optional = t.startswith("Optional[")
    if optional:
        t = t[len("Optional[") : -1]
    return {"number": "Scalar"}.get(t, t) + ("?" if optional else "")


def other_choices(arg: torch.Argument, schema: torch.FunctionSchema) -> list[str]:
    t = typename(arg)
    # No bool: TorchScript passes True to a Scalar argument as the int 1.
    if arg.name in ("alpha", "value") and t == "Scalar":
        return ["i:2", "f:2.5"]
    if t == "Scalar":
        return (
            ["f:2.5", "i:2"]
            if schema.name != "aten::pow"
            else ["f:2.5", "i:2", "i:3", "f:0.5", "i:-1"]
        )
    if t == "Scalar?":
        return ["n", "f:2.5", "i:2"]
    if t == "str?":
        return ["n", "s:trunc", "s:floor"]
    if t == "str":
        return ["s:none", "s:tanh"]
    if arg.name in ("cuda_enabled", "cpu_enabled"):  # the autocast casts' flags
        return ["b:False", "b:True"]
    if schema.name == "aten::native_dropout" and arg.name == "train":
        return ["b:False"]  # eval mode; training reaches kernels as fuser::philox_dropout
    if schema.name == "aten::dropout" and arg.name == "train":
        return ["b:True"]  # eval mode is the input itself, never in a group (ops/dropout.h)
    if t == "float":
        return ["f:0.5"]
    if t == "int" and arg.name in ("seed", "offset"):  # a Philox state (fuser::philox_dropout)
        return ["i:2"]
    if t == "int" and arg.name == "decimals":
        return ["i:2", "i:-1"]
    if t in ("ScalarType", "int?", "ScalarType?"):
        choices = ["dt:f16", "dt:i32", "dt:b", "dt:f64"]
        return choices + (["n"] if t.endswith("?") else [])
    if t in ("Device", "Device?"):
        return ["dev:cpu"]
    if t == "MemoryFormat":  # contiguous's: the one the table fuses
        return ["mf:contiguous"]
    if t in ("bool", "bool?", "MemoryFormat?", "Layout?"):
        return ["n"] if t.endswith("?") else ["b:False"]
    raise ValueError(f"no choices for {t} {arg.name} in {schema}")


def value(spec: str):
    kind, _, text = spec.partition(":")
    if kind == "t":
        return torch.ones(2, dtype=DTYPES[text])
    if kind == "z":
        return torch.ones((), dtype=DTYPES[text])
    if kind == "f":
        return float(text)
    if kind == "i":
        return int(text)
    if kind == "b":
        return text == "True"
    if kind == "n":
        return None
    if kind == "s":
        return text
    if kind == "dt":
        return DTYPES[text]
    if kind == "dev":
        return torch.device(text)
    if kind == "mf":
        return getattr(torch, f"{text}_format")
    raise ValueError(spec)


def eager_result(schema: torch.FunctionSchema, specs: list[str]) -> str:
    namespace, _, name = schema.name.partition("::")
    overload = schema.overload_name
    packet = getattr(getattr(torch.ops, namespace), name)
    op = getattr(packet, overload or "default")
    args, kwargs = [], {}
    for arg, spec in zip(schema.arguments, specs, strict=False):
        v = value(spec)
        if arg.kwarg_only:
            kwargs[arg.name] = v
        else:
            args.append(v)
    try:
        out = op(*args, **kwargs)
    except (RuntimeError, IndexError):  # (a dim out of range raises IndexError)
        return "error"
    if isinstance(out, tuple):  # the first output's, which the entry's `lower` gives
        out = out[0]
    return NAMES[out.dtype]


def result_type_lines() -> list[str]:
    """Pairs through torch.result_type; triples through clamp, which promotes all three."""
    tensors = [f"{k}:{d}" for k in "tz" for d in ALL]
    scalars = ["f:2.5", "i:2", "b:True"]
    lines = []
    for a in tensors + scalars:
        for b in tensors + scalars:
            if a in scalars and b in scalars:
                continue
            first, second = (b, a) if a in scalars else (a, b)  # result_type wants a tensor first
            dtype = torch.result_type(value(first), value(second))
            lines.append(f"{a} {b} | {NAMES[dtype]}")
    for a in tensors:
        for b, c in itertools.product(
            ["z:f64", "z:i64", "t:f16", "z:b", "t:i8"], ["z:f32", "z:i64"]
        ):
            try:
                out = torch.clamp(value(a), value(b), value(c))
            except RuntimeError:
                continue
            lines.append(f"{a} {b} {c} | {NAMES[out.dtype]}")
        for b, c in itertools.product(scalars, scalars):
            try:
                out = torch.clamp(value(a), value(b), value(c))
            except RuntimeError:
                continue
            lines.append(f"{a} {b} {c} | {NAMES[out.dtype]}")
    return lines


def main() -> None:
    data = Path(__file__).parent / "data"
    promotion = result_type_lines()
    (data / "result_types.txt").write_text("\n".join(promotion) + "\n")
    print(f"{len(promotion)} cases -> {data / 'result_types.txt'}", file=sys.stderr)
    lines = []
    for text in fuser._C.supported_schemas():
        schema = torch._C.parse_schema(text)
        types = [typename(a) for a in schema.arguments]
        tensor_positions = [i for i, t in enumerate(types) if t in ("Tensor", "Tensor?")]
        tensor_grid = tensor_specs(len(tensor_positions))
        if schema.name == "aten::native_dropout_backward":  # fused for bool masks only
            tensor_grid = [[f"t:{d}", "t:b"] for d in ("f16", "bf16", "f32", "f64")]
        for k, i in enumerate(tensor_positions):
            if types[i] == "Tensor?":  # the same grid with this argument None
                tensor_grid += [g[:k] + ["n"] + g[k + 1 :] for g in tensor_grid]
        # All optional tensors None would be the Scalar? overload in a graph.
        optional = [k for k, i in enumerate(tensor_positions) if types[i] == "Tensor?"]
        tensor_grid = [g for g in tensor_grid if not optional or any(g[k] != "n" for k in optional)]
        tensor_grid = list(dict.fromkeys(tuple(g) for g in tensor_grid))
        others = [i for i in range(len(schema.arguments)) if i not in tensor_positions]
        whole = schema.name in ("aten::sum", "aten::mean") and len(schema.arguments) == 2
        if whole or schema.name in ("aten::any", "aten::all"):
            # The whole-tensor forms; every reduction is checked apart (test_op_table).
            print(f"skipped: {text} reduces", file=sys.stderr)
            continue
        try:
            choices = [other_choices(schema.arguments[i], schema) for i in others]
        except ValueError as why:  # reductions and batch_norm: test_op_table checks them apart
            print(f"skipped: {why}", file=sys.stderr)
            continue
        other_grid = list(itertools.product(*choices))
        for tensors in tensor_grid:
            for rest in other_grid:
                specs = [""] * len(schema.arguments)
                for i, s in zip(tensor_positions, tensors, strict=False):
                    specs[i] = s
                for i, s in zip(others, rest, strict=False):
                    specs[i] = s
                full_name = schema.name + (
                    f".{schema.overload_name}" if schema.overload_name else ""
                )
                lines.append(f"{full_name} | {' '.join(specs)} | {eager_result(schema, specs)}")
    out = Path(__file__).parent / "data" / "op_dtypes.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} cases -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
