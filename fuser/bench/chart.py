"""The PNG chart: speedup over eager of every mode, one group of horizontal bars per row.

Rows run down the page, so a --full run on CUDA (dozens of rows) stays readable; the
speedup axis is logarithmic and bars start at 1, so 2x faster and 2x slower are bars of
equal length on either side of eager.
matplotlib is an optional extra (`pip install fuser[plot]`); it is imported only here,
only when a chart is drawn, so `fuser.bench` works without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fuser.bench.modes import EAGER, MODES
from fuser.bench.results import SuiteResult

INCHES_PER_BAR = 0.13


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_chart(result: SuiteResult, path: Path) -> bool:
    """Draws the chart into `path`; False (and no file) when matplotlib is missing."""
    if not matplotlib_available():
        return False
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    rows = [row for row in result.rows if row.time_us(EAGER) is not None]
    # A mode with no time on any row (oneDNN on CUDA, say) gets no empty slot.
    modes = [m for m in result.mode_names if m != EAGER and any(r.speedup(m) for r in rows)]
    labels = [f"{r.workload} {r.size} {r.dtype} {r.device}" for r in rows]
    bar = 0.8 / max(len(modes), 1)

    height = 1.5 + INCHES_PER_BAR * max(len(modes), 1) * max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(9.0, height))
    for i, mode in enumerate(modes):
        positions = [j + (i - (len(modes) - 1) / 2) * bar for j in range(len(rows))]
        # Bars grow from 1 (eager): rightwards when faster, leftwards when slower. A
        # missing time (NaN) draws no bar rather than a misleading one.
        widths = [(row.speedup(mode) or float("nan")) - 1.0 for row in rows]
        color = f"C{list(MODES).index(mode)}"  # one colour per mode in every chart
        ax.barh(positions, widths, bar, left=1.0, label=mode, color=color)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()  # first row on top, as in the table
    ax.set_xlabel("speedup over eager (log scale; right of 1 is faster)")
    ax.set_title(f"fuser benchmark, torch {result.metadata.get('torch_version', '?')}")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
