#!/usr/bin/env bash
# README command (a): set up, then the main job, the benchmark suite (--quick).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
python3 -m fuser.bench --quick "$@"
