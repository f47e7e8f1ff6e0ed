#!/usr/bin/env bash
# The report examples of the closing note: resnet50 (torchvision, frozen, batch 32) and
# the LSTM cell (the benchmark's workload), saved as TorchScript and reported by
# `python -m fuser.report` in a fresh process. Writes text, JSON and dot under $OUT (or
# ./report_out); PNGs where graphviz's dot is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-report_out}
mkdir -p "$OUT"
DEVICE=${1:-cuda}
python3 tools/report_example_models.py "$OUT" "$DEVICE"
png() { command -v dot >/dev/null && echo "--png $OUT/$1.png" || echo ""; }
[ -f "$OUT/resnet50.pt" ] && python3 -m fuser.report "$OUT/resnet50.pt" --input "float32[32,3,224,224]@$DEVICE" \
  --dot "$OUT/resnet50.dot" $(png resnet50) > "$OUT/resnet50.txt" 2>&1
B=256; H=1024
python3 -m fuser.report "$OUT/lstm_cell.pt" --input "float32[$B,$H]@$DEVICE" \
  --input "float32[$B,$H]@$DEVICE" --input "float32[$B,$H]@$DEVICE" \
  --input "float32[$((4 * H)),$H]@$DEVICE" --input "float32[$((4 * H)),$H]@$DEVICE" \
  --input "float32[$((4 * H))]@$DEVICE" --input "float32[$((4 * H))]@$DEVICE" \
  --dot "$OUT/lstm_cell.dot" --expand $(png lstm_cell) > "$OUT/lstm_cell.txt" 2>&1
tail -n +1 "$OUT/resnet50.txt" "$OUT/lstm_cell.txt"
