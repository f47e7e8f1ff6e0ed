"""Reason classes: the refusal strings of the pass (csrc/passes/*, FusionDecision) sorted
into a few kinds a reader can act on. First matching row wins; a table, so a new reason
in the pass is one row here."""

from __future__ import annotations

import re

# (substring of the reason, class)
REASON_TABLE: tuple[tuple[str, str], ...] = (
    ("operator not in the fusible table", "unsupported operator"),
    ("no profiled", "no profile"),
    ("has dtype", "unsupported dtype"),
    ("FUSER_DEVICES", "device not enabled"),
    ("no kernel backend", "device not supported"),
    ("different devices", "mixed devices"),
    ("argument limit", "argument limit"),
    ("kernel parameter", "argument limit"),
    ("its kernel would take", "argument limit"),
    ("minimum group size", "group too small"),
    ("maximum number of groups", "group limit"),
    ("a group of one node", "no fusible neighbour"),
    ("alias analysis", "aliasing"),
    ("constant tensor", "unsupported argument"),
    ("kernel arguments", "unsupported argument"),
    ("different blocks", "control flow"),
    ("read after the group", "output shape"),
    ("chunk", "chunk layout"),
    ("cat", "cat layout"),
    ("piece", "cat layout"),
)
UNKNOWN_REASON = "other"
NO_REASON = "not fused (no reason recorded)"


def reason_class(reason: str | None) -> str:
    if reason is None:
        return NO_REASON
    for needle, name in REASON_TABLE:
        if needle in reason:
            return name
    return UNKNOWN_REASON


def generic_reason(reason: str) -> str:
    """The reason with value names blanked (`%x3` -> `%_`), so equal reasons of different
    nodes count together."""
    return re.sub(r"%[\w.]+", "%_", reason)
