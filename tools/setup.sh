#!/usr/bin/env bash
# Sets up a fresh machine for fuser: Python packages (torch pinned: an unpinned torch
# would pull a multi-GB CUDA build), GoogleTest for the C++ tests, graphviz for the
# report's drawings, and the editable build of the extension (--no-build-isolation: it
# compiles against the torch here).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${FUSER_TORCH_VERSION:-2.13.0}

have_torch=$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)
if [ "$have_torch" != "$TORCH_VERSION" ]; then
  "$PYTHON" -m pip install -q "torch==$TORCH_VERSION"
fi
# nvidia-cuda-nvrtc gives libnvrtc without a GPU, so the CUDA printer is compiled in CI.
"$PYTHON" -m pip install -q pybind11 ninja cmake pytest "pytest-xdist>=3.2" ruff mypy matplotlib "nvidia-cuda-nvrtc==13.0.*" \
  || "$PYTHON" -m pip install -q pybind11 ninja cmake pytest "pytest-xdist>=3.2" ruff mypy

# GoogleTest for the C++ tests; graphviz's dot for the report's PNG and dot-parse tests.
if [ "${FUSER_BUILD_TESTS:-0}" = "1" ] && { [ ! -f /usr/include/gtest/gtest.h ] || ! command -v dot >/dev/null; }; then
  if command -v apt-get >/dev/null; then
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libgtest-dev graphviz >/dev/null
  fi
fi

"$PYTHON" -m pip install -q --no-build-isolation -e .
