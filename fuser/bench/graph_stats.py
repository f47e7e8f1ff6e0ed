"""Counting fusion groups in the graph a scripted function actually runs.

Guarded groups sit inside prim::If blocks and loop bodies inside prim::Loop blocks, so
the count walks every sub-block, and the forward graph of each prim::DifferentiableGraph
(training). Fallback graphs are node attributes, not blocks, and are rightly left out:
they hold the unfused copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _all_nodes(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _all_nodes(sub)
        if node.kind() == "prim::DifferentiableGraph":  # a training graph's forward
            yield from _all_nodes(node.g("Subgraph"))


def count_groups(graph: Any, kind_prefix: str) -> int:
    """Nodes of `graph` (sub-blocks included) whose kind starts with `kind_prefix`;
    a prefix because oneDNN numbers its group kinds (prim::oneDNNFusionGroup_0)."""
    return sum(1 for node in _all_nodes(graph) if node.kind().startswith(kind_prefix))


def optimized_graph(scripted_fn: Any, args: tuple[Any, ...]) -> Any | None:
    """The optimized graph of `scripted_fn` for `args`; it must have run a few times under
    the flags it was optimized with. None when the function is not a scripted one."""
    graph_for = getattr(scripted_fn, "graph_for", None)
    if graph_for is None:
        return None
    # graph_for reads the executor's debug state; when that fails it runs the function
    # once more and returns torch.jit.last_executed_optimized_graph().
    return graph_for(*args)
