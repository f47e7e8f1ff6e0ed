#!/usr/bin/env bash
# Builds the launch-cost experiment (launch_cost.cu: a standalone program and a library
# launch_cost.py runs inside torch) and the sampling profiler (sampler.cpp, for
# profile_host.py) into $1 (default /tmp/launch_cost), for sm_90.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/launch_cost}
mkdir -p "$out"
nvcc -O2 -arch=sm_90 -cubin -o "$out/tiny.cubin" "$here/launch_cost.cu"
nvcc -O2 -arch=sm_90 -Xcompiler -fPIC -shared -o "$out/liblaunch_cost.so" "$here/launch_cost.cu" -L/usr/local/cuda/lib64/stubs -lcuda
nvcc -O2 -o "$out/launch_cost" "$here/main.cpp" -L"$out" -llaunch_cost -Xlinker -rpath="$out"
g++ -O2 -fPIC -shared -o "$out/libsampler.so" "$here/sampler.cpp" -lrt
