"""The graph as graphviz `dot` text: fused operators coloured by group (or each group one
box, the readable form for a whole model), refused operators coloured by reason class,
edges labelled with the profiled tensor sizes. Layout is graphviz's; `write_png` runs
`dot` where it is installed.

Loops and non-guard Ifs are boxes whose blocks are drawn as clusters under them;
constants and list/tuple plumbing are not drawn, edges go through them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

from fuser.report import graph_walk as gw
from fuser.report.reason_classes import reason_class

GROUP_COLOURS = (
    "#8dd3c7",
    "#bebada",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
    "#d9d9d9",
)
REASON_COLOURS = {
    "unsupported operator": "#fb8072",
    "no profile": "#fdae6b",
    "unsupported dtype": "#e6550d",
    "argument limit": "#f768a1",
    "group too small": "#fee391",
    "no fusible neighbour": "#fee391",
    "aliasing": "#c994c7",
}
OTHER_REASON_COLOUR = "#fcbba1"
STRUCTURE_COLOUR = "#f0f0f0"


class DotMissing(RuntimeError):
    pass


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(kind: str) -> str:
    return kind.split("::")[-1]


class _Drawing:
    def __init__(self, collapse: bool) -> None:
        self.collapse = collapse
        self.lines: list[str] = []
        self.edges: dict[tuple[str, str], str] = {}
        # (scope, value name) -> [(node id, value that leaves that node)]
        self.producers: dict[tuple[str, str], list[tuple[str, Any]]] = {}
        self.count = 0
        self.groups = 0

    def new_id(self) -> str:
        self.count += 1
        return f"n{self.count}"

    def node(self, label: str, fill: str, shape: str = "box", indent: str = "  ") -> str:
        nid = self.new_id()
        self.lines.append(
            f"{indent}{nid} [label={_quote(label)}, shape={shape}, style=filled, "
            f"fillcolor={_quote(fill)}];"
        )
        return nid

    def produce(self, scope: str, value: Any, sources: list[tuple[str, Any]]) -> None:
        self.producers[(scope, value.debugName())] = sources

    def sources(self, scope: str, value: Any) -> list[tuple[str, Any]]:
        return self.producers.get((scope, value.debugName()), [])

    def connect(self, scope: str, consumer: str, values: Iterator[Any] | list[Any]) -> None:
        for value in values:
            for pid, leaving in self.sources(scope, value):
                self.edges.setdefault((pid, consumer), gw.size_label(leaving))

    def draw_block(self, scope: str, block: Any, indent: str) -> None:
        for node in block.nodes():
            self.draw_node(scope, node, indent)

    def draw_node(self, scope: str, node: Any, indent: str) -> None:
        kind = node.kind()
        if kind in ("prim::Constant", gw.TYPE_GUARD):
            return
        if gw.is_guarded_if(node):
            group = next(
                n for n in next(iter(node.blocks())).nodes() if n.kind() == gw.FUSION_GROUP
            )
            group_ids = self.draw_group(scope, group, indent)
            for out, sources in zip(node.outputs(), group_ids, strict=True):
                self.produce(scope, out, sources)
            return
        if kind == gw.FUSION_GROUP:  # an unguarded group (a graph fused by hand or a test)
            for out, sources in zip(
                node.outputs(), self.draw_group(scope, node, indent), strict=True
            ):
                self.produce(scope, out, sources)
            return
        if gw.is_op(node):
            reason = gw.reason_of(node)
            cls = reason_class(reason)
            nid = self.node(
                f"{_short(kind)}\n({cls})",
                REASON_COLOURS.get(cls, OTHER_REASON_COLOUR),
                indent=indent,
            )
            self.connect(scope, nid, list(node.inputs()))
            for out in node.outputs():
                self.produce(scope, out, [(nid, out)])
            return
        if list(node.blocks()):
            nid = self.node(kind, STRUCTURE_COLOUR, shape="octagon", indent=indent)
            self.connect(scope, nid, list(node.inputs()))
            for i, block in enumerate(node.blocks()):
                self.lines.append(f"{indent}subgraph cluster_{nid}_{i} {{")
                self.lines.append(f"{indent}  label={_quote(f'{_short(kind)} block {i}')};")
                for param in block.inputs():
                    self.produce(scope, param, [(nid, param)])
                self.draw_block(scope, block, indent + "  ")
                self.lines.append(f"{indent}}}")
            for out in node.outputs():
                self.produce(scope, out, [(nid, out)])
            return
        # plumbing (lists, tuples, ...): its outputs come from its inputs' producers
        sources = [s for v in node.inputs() for s in self.sources(scope, v)]
        for out in node.outputs():
            self.produce(scope, out, sources)

    def draw_group(self, scope: str, group: Any, indent: str) -> list[list[tuple[str, Any]]]:
        """Draws `group`; returns the sources of each of its outputs."""
        index = self.groups
        self.groups += 1
        colour = GROUP_COLOURS[index % len(GROUP_COLOURS)]
        ops = gw.subgraph_ops(group)
        subgraph = group.g("Subgraph")
        if self.collapse:
            names = ", ".join(dict.fromkeys(_short(n.kind()) for n in ops))
            nid = self.node(f"group #{index}: {len(ops)} ops\n{names}", colour, indent=indent)
            self.connect(scope, nid, list(group.inputs()))
            return [[(nid, out)] for out in subgraph.outputs()]
        inner = f"{scope}/g{index}"
        for outer_value, sub_input in zip(group.inputs(), subgraph.inputs(), strict=True):
            self.produce(inner, sub_input, self.sources(scope, outer_value))
        self.lines.append(f"{indent}subgraph cluster_group_{index} {{")
        self.lines.append(
            f"{indent}  label={_quote(f'group #{index}')}; style=filled; color={_quote(colour)};"
        )
        for node in subgraph.nodes():
            if gw.is_op(node):
                nid = self.node(_short(node.kind()), colour, indent=indent + "  ")
                self.connect(inner, nid, list(node.inputs()))
                for out in node.outputs():
                    self.produce(inner, out, [(nid, out)])
            elif node.kind() != "prim::Constant":
                self.draw_node(inner, node, indent + "  ")
        self.lines.append(f"{indent}}}")
        return [self.sources(inner, out) for out in subgraph.outputs()]


def to_dot(graph: Any, collapse: bool = True, title: str = "fuser report") -> str:
    """`dot` text of a captured graph (GraphReport.graph)."""
    d = _Drawing(collapse)
    for i, value in enumerate(graph.inputs()):
        if gw.is_tensor(value):
            nid = d.node(f"input {i}", "white", shape="ellipse")
            d.produce("", value, [(nid, value)])
    d.draw_block("", graph.block(), "  ")
    out_id = d.node("output", "white", shape="ellipse")
    d.connect("", out_id, list(graph.outputs()))
    header = [
        "digraph fuser {",
        f"  label={_quote(title)};",
        "  node [fontname=Helvetica, fontsize=10];",
        "  edge [fontname=Helvetica, fontsize=8];",
    ]
    edges = [f"  {a} -> {b} [label={_quote(label)}];" for (a, b), label in d.edges.items()]
    return "\n".join(header + d.lines + edges + ["}"]) + "\n"


def write_png(dot_text: str, path: str) -> None:
    """Renders `dot_text` to a PNG with graphviz's `dot`; DotMissing when not installed."""
    dot = shutil.which("dot")
    if dot is None:
        raise DotMissing(
            "graphviz's `dot` is not installed (e.g. apt-get install graphviz): no PNG "
            "written; write the drawing with --dot FILE and render it where dot exists"
        )
    subprocess.run([dot, "-Tpng", "-o", path], input=dot_text, text=True, check=True)
