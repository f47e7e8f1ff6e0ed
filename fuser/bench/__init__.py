"""fuser's benchmark suite and demo: `python -m fuser.bench --quick` (or `fuser-bench`).

Runs each workload (workloads.py) on every available device under each mode (modes.py:
eager, TorchScript, this fuser, NNC, oneDNN Graph, torch.compile), checks every result
against eager, and prints a table; writes results.json and speedup.png under --out.
"""
