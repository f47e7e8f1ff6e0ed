"""The PNG chart: speedup over eager of every mode, one group of bars per row.

matplotlib is an optional extra (`pip install fuser[plot]`); it is imported only here,
only when a chart is drawn, so `fuser.bench` works without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fuser.bench.modes import EAGER
from fuser.bench.results import SuiteResult


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
    labels = [f"{r.workload}\n{r.size} {r.dtype} {r.device}" for r in rows]
    width = 0.8 / max(len(modes), 1)

    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(rows) + 2), 5.5))
    for i, mode in enumerate(modes):
        positions = [j + (i - (len(modes) - 1) / 2) * width for j in range(len(rows))]
        # A missing time draws no bar rather than a misleading zero-height one.
        heights = [row.speedup(mode) or float("nan") for row in rows]
        ax.bar(positions, heights, width, label=mode)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("speedup over eager (higher is faster)")
    ax.set_title(f"fuser benchmark ({result.metadata.get('torch_version', '?')})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
