"""The kernel variants row kernels choose at first run (runtime/variant_timing.h), with
their timings (* marks the chosen one; in brackets the rounds each candidate ran faster
than the heuristic's, the first), for two shapes of layer_norm, of softmax and
of softmax over a few long rows (CPU: a sixteenth of the rows); then a second process
on the same cache, which reads every choice from disk and times nothing.

    python tools/variant_report.py [cpu|cuda]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

PROGRAM = """
import json, sys, torch, fuser
fuser.enable()
device = sys.argv[1]
cases = {
    "layer_norm": ("def f(x, w, b):\\n    return torch.layer_norm(x, [1024], w, b, 1e-5)\\n",
                   [(32768, 1024), (4096, 1024)]),
    "softmax": ("def f(x, w, b):\\n    return torch.softmax(x, -1)\\n",
                [(65536, 256), (8192, 256)]),
    # Few long rows: cut in slices (several kernels) beside whole rows.
    "softmax_long_rows": ("def f(x, w, b):\\n    return torch.softmax(x, -1)\\n",
                          [(16, 262144), (4, 262144)]),
}
for name, (src, shapes) in cases.items():
    for shape in shapes:
        if device == "cpu":
            shape = (max(1, shape[0] // 16), shape[1])
        f = torch.jit.CompilationUnit(src).f
        x = torch.randn(*shape, device=device)
        w, b = torch.randn(shape[1], device=device), torch.randn(shape[1], device=device)
        for _ in range(3):
            f(x, w, b)
print(json.dumps({"log": fuser._C.variant_log(), "stats": fuser.stats()}))
"""


def run(device: str, cache: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, device],
        env={**os.environ, "FUSER_CACHE_DIR": cache},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    with tempfile.TemporaryDirectory() as cache:
        first = run(device, cache)
        second = run(device, cache)
    print(
        f"first process: {first['stats']['variants_timed']} choices timed, "
        f"{first['stats']['variant_timing_us'] / 1000:.1f} ms timing in all"
    )
    for r in first["log"]:
        parts = r["key"].split("|")
        rows = next(p for p in parts if p.startswith("rows<="))
        length = next(p for p in parts if p.startswith("n="))
        shape = f"{rows} {length}"
        # Each candidate's median and, past the heuristic's, the rounds it won against it.
        # (A choice read from disk or left untimed has no times.)
        if not r["us"]:
            print(f"  {shape}: {r['names'][r['chosen']]} (not timed)")
            continue
        cells = ", ".join(
            f"{'*' if i == r['chosen'] else ''}{n} {us:.1f} us"
            + (f" ({w}/{r['rounds']})" if i > 0 else "")
            for i, (n, us, w) in enumerate(zip(r["names"], r["us"], r["wins"], strict=True))
        )
        print(f"  {shape}: {cells}; timing {r['timing_ms']:.1f} ms")
    s = second["stats"]
    print(f"second process: {s['variants_timed']} timed, {s['variant_disk_hits']} read from disk")


if __name__ == "__main__":
    main()
