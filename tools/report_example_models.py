"""Saves the report examples' models as TorchScript files: resnet50 (torchvision,
frozen) where torchvision imports, and the benchmark's LSTM cell as a module.

    python tools/report_example_models.py OUT_DIR DEVICE
"""

import importlib.util
import sys

import torch

from fuser.bench.workloads import WORKLOADS

out, device = sys.argv[1], sys.argv[2]
try:
    import torchvision

    model = torchvision.models.resnet50().eval().to(device)
    torch.jit.save(torch.jit.freeze(torch.jit.script(model)), f"{out}/resnet50.pt")
except Exception as error:  # the CPU torch cannot load the registry's torchvision
    print(f"no resnet50: {type(error).__name__}: {error}")

# TorchScript reads a function's source from its file: the workload's text goes to one.
source_file = f"{out}/lstm_cell_source.py"
with open(source_file, "w") as file:
    file.write("import torch\nfrom torch import Tensor\n\n" + WORKLOADS["lstm_cell"].source)
spec = importlib.util.spec_from_file_location("lstm_cell_source", source_file)
assert spec is not None and spec.loader is not None
source_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(source_module)
cell = source_module.lstm_cell


class Cell(torch.nn.Module):
    def forward(self, x, hx, cx, w_ih, w_hh, b_ih, b_hh):  # type: ignore[no-untyped-def]
        return cell(x, hx, cx, w_ih, w_hh, b_ih, b_hh)


torch.jit.save(torch.jit.script(Cell()), f"{out}/lstm_cell.pt")
