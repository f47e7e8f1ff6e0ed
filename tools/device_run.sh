#!/usr/bin/env bash
# The run on the lent GPU machine (Python 3.12, torch 2.11+cu130, no network): build
# from source, CUDA tests, then the benchmark. Logs go to $OUT (or ./device_out).
# Usage: bash tools/device_run.sh [tests|bench|host|models|zoo|layouts|reductions|splits|dropout|training|batchnorm|columns|profile|all] [extra fuser.bench arguments]
#   profile: device time per call and the top kernels of PROFILE_ROWS in PROFILE_MODES.
#   reductions: the row-kernel tests on CUDA, then the reduction rows (layer_norm,
#   residual + layer_norm, softmax) at large size in float32 and float16 beside NNC and
#   torch.compile, the lone-op rows again with single-op groups kept
#   (FUSER_MIN_GROUP_SIZE=1), the GPT-2 block (float32, float16, autocast), then a
#   copy of each row's bytes (tools/copy_floor.py) beside the rows' kernel times.
#   splits: the tests of rows cut in slices, reductions, dropout and variants on CUDA,
#   the slices variants chosen, then the few-long-rows rows (softmax over long rows,
#   batch-1 and batch-32 GroupNorm, a whole-tensor mean; SPLIT_ROWS) beside NNC and
#   torch.compile, with slice counts forced (SPLIT_SWEEP="2 4"), and again as whole rows
#   (FUSER_ROW_SPLITS=1).
#   dropout: the dropout tests on CUDA, then the random-dropout rows (bias + gelu +
#   dropout, attention's masked softmax + dropout) at large size in float32 and float16
#   beside NNC and torch.compile, and the GPT-2 training step.
#   training: layer_norm's backward, dropout, reduction and bias-gradient tests on CUDA and
#   gelu_backward's parity, then the training-step rows (residual + layer_norm at large
#   size, the GPT-2 block with and without dropout) beside torch.compile, and their top
#   kernels.
#   batchnorm: the batch_norm tests on CUDA (batch statistics and inference), the
#   BatchNorm + ReLU rows in training and eval mode beside NNC and torch.compile, a
#   convnet's training step (BN_MODELS, default resnet18_train) and the top kernels.
#   columns: the tests of reductions over leading dims and of one-pass variances on CUDA
#   (with the row-kernel and slices tests), then the column-sum, column-variance,
#   channel-statistics and GroupNorm rows (COLUMN_ROWS) in float32 and float16 beside
#   NNC and torch.compile, and their top kernels.
#   host: the CUDA driver's launch cost by launch path (tools/launch_cost), the per-group
#   host cost (fuser.bench.host_cost) and a sampling profile of fused calls.
#   zoo: the zoo's image classifiers and transformers models (fuser.bench --zoo) at
#   ZOO_SIZE (default medium, batch 32) in ZOO_DTYPES (default float16; each dtype takes
#   about 6 minutes) beside TorchScript and NNC (ZOO_MODES).
#   models: the model rows (CUDA float32/float16, CPU float32 with oneDNN Graph beside us
#   and without leaving it its post-ops) and the per-group host cost.
#   layouts: the transpose-tile tests on CUDA, then the layout rows (transpose, permute,
#   channels-last beside row-major, expanded broadcast) at their large size in every
#   dtype, with tile sides and orders forced (TILE_CONFIGS="side:group ...", see
#   FUSER_TILE_SIDE and FUSER_TILE_GROUP), then as chosen beside NNC and torch.compile
#   (at LAYOUT_SIZES, default large). FUSER_TRANSPOSE_TILES=0 times the rows
#   path (set NO_TILES=1).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# /opt/gcc's g++ there links a static libstdc++ into shared objects, which breaks
# iostreams shared with torch: build with the system compiler.
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++
export FUSER_CACHE_DIR=${FUSER_CACHE_DIR:-/tmp/fuser-device-cache}
# Each test failure is named here as it happens (tests/python/conftest.py): a run cut by
# its time limit before pytest's summary still says which tests failed.
export FUSER_TEST_FAILURES=${FUSER_TEST_FAILURES:-$OUT/failures.txt}
what=${1:-all}
shift || true

python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
nvidia-smi -L

if [ "$what" = tests ] || [ "$what" = all ]; then
  # Files stay whole per worker (test_variants clears the shared variants cache).
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" \
    --dist loadfile \
    tests/python/test_cuda.py tests/python/test_runtime.py tests/python/test_cuda_codegen.py \
    tests/python/test_rnn_cells.py tests/python/test_cat.py tests/python/test_projections.py \
    tests/python/test_output_layout.py tests/python/test_param_space.py \
    tests/python/test_epilogues.py tests/python/test_host_cost.py tests/python/test_report.py \
    tests/python/test_transpose_tiles.py tests/python/test_reductions.py \
    tests/python/test_batch_norm.py tests/python/test_batch_norm_training.py \
    tests/python/test_variants.py \
    tests/python/test_matmul_operands.py tests/python/test_attention_masks.py \
    tests/python/test_attention_masks_once.py tests/python/test_sibling_groups.py \
    tests/python/test_cuda_graphs.py tests/python/test_random_inplace.py \
    tests/python/test_dropout.py \
    tests/python/test_layer_norm_backward.py tests/python/test_split_rows.py \
    tests/python/test_column_reductions.py tests/python/test_one_pass_variance.py \
    tests/python/test_grad_sum_to_size.py \
    tests/python/test_random_reductions.py tests/python/test_channels_last.py \
    tests/python/test_max_pool_first.py tests/python/test_max_pool_kernel.py \
    tests/python/test_native16.py tests/python/test_exact_16bit.py \
    tests/python/test_random_dtypes.py tests/python/test_random_modules.py \
    tests/python/test_random_control.py tests/python/test_threads.py \
    tests/python/test_gradient_sums.py tests/python/test_random_training.py \
    $(ls tests/python/test_inplace*.py tests/python/test_autocast*.py 2>/dev/null) \
    2>&1 | tee "$OUT/test_cuda.log" | tail -5
  # Again with one kernel for all shapes: the kernels that read sizes from their
  # arguments, which groups otherwise meet only past their first shapes.
  FUSER_SHAPE_KERNELS=0 PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_cuda.py tests/python/test_runtime.py tests/python/test_rnn_cells.py \
    tests/python/test_cat.py 2>&1 | tee "$OUT/test_cuda_shared_kernels.log" | tail -5
  FUSER_TEST_DEVICE=cuda PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider \
    -n "${TEST_WORKERS:-4}" tests/python/test_ops.py 2>&1 | tee "$OUT/test_ops_cuda.log" | tail -5
fi
if [ "$what" = zoo ]; then
  PYTHONPATH=. python3 -m fuser.bench --device cuda --zoo --size "${ZOO_SIZE:-medium}" \
    --dtype "${ZOO_DTYPES:-float16}" --mode "${ZOO_MODES:-script,nnc,fuser}" \
    --out "$OUT/zoo" "$@" 2>&1 | tee "$OUT/zoo.log" | grep -v '^\['
fi

if [ "$what" = models ]; then
  PYTHONPATH=. python3 -m fuser.bench.host_cost --device cuda 2>&1 | tee "$OUT/host_cost.log"
  PYTHONPATH=. python3 -m fuser.bench --device cuda --models --dtype float32,float16 \
    --out "$OUT/models_cuda" "$@" 2>&1 | tee "$OUT/models_cuda.log"
  PYTHONPATH=. python3 -m fuser.bench --device cpu --models --out "$OUT/models_cpu" "$@" \
    2>&1 | tee "$OUT/models_cpu.log"
  FUSER_LEAVE_TO_ONEDNN=0 PYTHONPATH=. python3 -m fuser.bench --device cpu --models \
    --mode fuser --out "$OUT/models_cpu_take_all" 2>&1 | tee "$OUT/models_cpu_take_all.log"
fi
if [ "$what" = host ]; then
  # The driver's own launch cost by launch path (no torch, then inside torch), the
  # per-group host cost, and where a fused call's host time goes (sampling profile).
  bash tools/launch_cost/build.sh /tmp/launch_cost > "$OUT/launch_cost_build.log" 2>&1 \
    || tail -5 "$OUT/launch_cost_build.log"
  /tmp/launch_cost/launch_cost /tmp/launch_cost/tiny.cubin 2>&1 | tee "$OUT/launch_cost.log"
  python3 tools/launch_cost/launch_cost.py /tmp/launch_cost 2>&1 | tee "$OUT/launch_cost_torch.log"
  PYTHONPATH=. python3 -m fuser.bench.host_cost --device cuda 2>&1 | tee "$OUT/host_cost.log"
  for pattern in flat broadcast4d; do
    PYTHONPATH=. python3 tools/launch_cost/profile_host.py /tmp/launch_cost/libsampler.so \
      "$OUT/host_profile" --pattern "$pattern" --modes fuser
  done
fi
if [ "$what" = layouts ]; then
  layout_rows=transpose_2d,permute_nhwc,channels_last_residual,expand_leading
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_transpose_tiles.py tests/python/test_output_layout.py \
    tests/python/test_cuda_codegen.py 2>&1 | tee "$OUT/test_layouts.log" | tail -5
  if [ "${NO_TILES:-0}" = 1 ]; then
    FUSER_TRANSPOSE_TILES=0 PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
      --workload "$layout_rows" --mode fuser --out "$OUT/layouts_rows" 2>&1 | tail -20
  fi
  # side:group pairs (0: chosen by the fuser).
  for config in ${TILE_CONFIGS:-0:0 32:1 64:1}; do
    side=${config%:*} group=${config#*:}
    echo "== FUSER_TILE_SIDE=$side FUSER_TILE_GROUP=$group"
    FUSER_TILE_SIDE=$side FUSER_TILE_GROUP=$group PYTHONPATH=. python3 -m fuser.bench \
      --device cuda --size large --workload "$layout_rows" --mode fuser \
      --out "$OUT/sweep_${side}_$group" 2>&1 | grep -E "^(transpose|permute|chan|expand)"
  done 2>&1 | tee "$OUT/layouts_sweep.log"
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size "${LAYOUT_SIZES:-large}" \
    --workload "$layout_rows" --mode fuser,nnc,compile --out "$OUT/layouts" "$@" 2>&1 | tee "$OUT/layouts.log" | tail -40
fi
if [ "$what" = reductions ]; then
  rows=layer_norm,residual_layer_norm,softmax,masked_softmax,batchnorm_relu,groupnorm_silu,residual_layer_norm_train
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_reductions.py tests/python/test_batch_norm.py \
    tests/python/test_variants.py tests/python/test_copy_floor.py 2>&1 \
    | tee "$OUT/test_reductions.log" | tail -8
  # The variants each row kernel chose, with their timings (first process: timed).
  PYTHONPATH=. python3 tools/variant_report.py cuda 2>&1 | tee "$OUT/variants.log"
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size large --workload "$rows" \
    --dtype float32,float16 --mode script,fuser,nnc,compile --out "$OUT/reductions" "$@" \
    2>&1 | tee "$OUT/reductions.log" | tail -30
  FUSER_MIN_GROUP_SIZE=1 PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
    --workload layer_norm,softmax --dtype float32,float16 --mode fuser \
    --out "$OUT/reductions_single" 2>&1 | tee "$OUT/reductions_single.log" | tail -12
  PYTHONPATH=. python3 -m fuser.bench --device cuda --workload gpt2_block,gpt2_block_autocast \
    --dtype float32,float16 --mode script,fuser,compile --out "$OUT/gpt2" 2>&1 \
    | tee "$OUT/gpt2.log" | tail -14
  # The floor at the rows' own sizes: a copy of the same bytes, per call and per kernel,
  # beside each row's kernel time alone (fuser and torch.compile).
  floor_rows=softmax:large:float16,softmax:large:float32,layer_norm:large:float16
  floor_rows=$floor_rows,layer_norm:large:float32,residual_layer_norm:large:float16
  PYTHONPATH=. python3 tools/copy_floor.py "$floor_rows" 2>&1 | tee "$OUT/copy_floor.log"
  PYTHONPATH=. python3 tools/kernel_times.py "$floor_rows" --modes fuser,compile 2>&1 \
    | tee "$OUT/kernel_times.log" | grep '^{\|Error'
fi
if [ "$what" = splits ]; then
  rows=${SPLIT_ROWS:-softmax_long_rows,groupnorm_silu_batch1,squared_error_mean,groupnorm_silu}
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" \
    --dist loadfile tests/python/test_split_rows.py tests/python/test_reductions.py \
    tests/python/test_dropout.py tests/python/test_variants.py 2>&1 \
    | tee "$OUT/test_splits.log" | tail -8
  PYTHONPATH=. python3 tools/variant_report.py cuda 2>&1 | tee "$OUT/variants.log" | tail -20
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size large --workload "$rows" \
    --dtype float32,float16 --mode eager,fuser,nnc,compile --out "$OUT/splits" "$@" 2>&1 \
    | tee "$OUT/splits.log" | tail -12
  # Slice counts forced (SPLIT_SWEEP="2 4 8"), fuser alone.
  for splits in ${SPLIT_SWEEP:-}; do
    echo "== FUSER_ROW_SPLITS=$splits"
    FUSER_ROW_SPLITS=$splits PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
      --workload "$rows" --dtype float32,float16 --mode fuser --out "$OUT/splits_$splits" 2>&1 \
      | grep -E "^(softmax|groupnorm|squared)"
  done 2>&1 | tee "$OUT/splits_sweep.log"
  # The same rows as whole rows, one kernel each (no slices).
  FUSER_ROW_SPLITS=1 PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
    --workload "$rows" --dtype float32,float16 --mode fuser --out "$OUT/splits_whole_rows" \
    2>&1 | tee "$OUT/splits_whole_rows.log" | tail -10
fi
if [ "$what" = dropout ]; then
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider tests/python/test_dropout.py \
    2>&1 | tee "$OUT/test_dropout.log" | tail -6
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
    --workload bias_gelu_dropout,attention_dropout,gelu_bias,masked_softmax \
    --dtype float32,float16 --mode fuser,nnc,compile --out "$OUT/dropout" "$@" 2>&1 \
    | tee "$OUT/dropout.log" | tail -16
  PYTHONPATH=. python3 -m fuser.bench --device cuda --workload gpt2_block_train,gpt2_block_train_dropout \
    --dtype float32,float16 --mode script,fuser,compile --out "$OUT/gpt2_train" 2>&1 \
    | tee "$OUT/gpt2_train.log" | tail -8
fi
if [ "$what" = training ]; then
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" \
    --dist loadfile tests/python/test_layer_norm_backward.py tests/python/test_dropout.py \
    tests/python/test_reductions.py tests/python/test_grad_sum_to_size.py \
    tests/python/test_column_reductions.py tests/python/test_column_sums.py 2>&1 \
    | tee "$OUT/test_training.log" | tail -6
  FUSER_TEST_DEVICE=cuda PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_ops.py -k "gelu or every_table" 2>&1 | tee "$OUT/test_ops_gelu.log" | tail -4
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
    --workload residual_layer_norm_train --dtype float32,float16 --mode eager,fuser,nnc,compile \
    --out "$OUT/ln_train" "$@" 2>&1 | tee "$OUT/ln_train.log" | tail -10
  PYTHONPATH=. python3 -m fuser.bench --device cuda --workload gpt2_block_train,gpt2_block_train_dropout \
    --dtype float32,float16 --mode script,fuser,compile --out "$OUT/gpt2_train" 2>&1 \
    | tee "$OUT/gpt2_train.log" | tail -12
  PYTHONPATH=. python3 tools/kernel_times.py \
    "${PROFILE_ROWS:-gpt2_block_train:medium:float32,residual_layer_norm_train:large:float32}" \
    --modes eager,fuser,compile --top "${PROFILE_TOP:-8}" 2>&1 | grep -v Warning \
    | tee "$OUT/profile_training.log"
fi
if [ "$what" = batchnorm ]; then
  # BatchNorm with batch statistics: its tests on CUDA, the kernel-level rows, a convnet's
  # training step, and the kernels each mode runs.
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" \
    --dist loadfile tests/python/test_batch_norm_training.py tests/python/test_batch_norm.py \
    2>&1 | tee "$OUT/test_batchnorm.log" | tail -6
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size large \
    --workload batchnorm_relu_train,batchnorm_relu --dtype float32,float16 \
    --mode eager,fuser,nnc,compile --out "$OUT/bn_rows" "$@" 2>&1 | tee "$OUT/bn_rows.log" | tail -10
  PYTHONPATH=. python3 -m fuser.bench --device cuda --workload "${BN_MODELS:-resnet18_train}" \
    --dtype float32 --mode "${BN_MODEL_MODES:-eager,script,fuser,compile}" --out "$OUT/bn_models" \
    2>&1 | tee "$OUT/bn_models.log" | tail -8
  PYTHONPATH=. python3 tools/kernel_times.py \
    "${PROFILE_ROWS:-batchnorm_relu_train:large:float32}" \
    --modes eager,fuser,compile --top "${PROFILE_TOP:-6}" 2>&1 | grep -v Warning \
    | tee "$OUT/profile_batchnorm.log"
fi
if [ "$what" = columns ]; then
  # Reductions over leading dims (rows that are columns, or a kept dim between reduced
  # ones): their tests on CUDA beside the row-kernel ones, the rows, the kernels.
  PYTHONPATH=.:tests/python python3 -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-4}" \
    --dist loadfile tests/python/test_column_reductions.py tests/python/test_reductions.py \
    tests/python/test_split_rows.py tests/python/test_cuda_codegen.py \
    tests/python/test_one_pass_variance.py tests/python/test_layer_norm_backward.py \
    tests/python/test_random_reductions.py 2>&1 | tee "$OUT/test_columns.log" | tail -6
  PYTHONPATH=. python3 -m fuser.bench --device cuda --size "${COLUMN_SIZES:-small,large}" \
    --workload "${COLUMN_ROWS:-column_sum,column_var,channel_stats,batchnorm_relu_train,groupnorm_silu,groupnorm_silu_batch1}" \
    --dtype float32,float16 --mode "${COLUMN_MODES:-eager,fuser,nnc,compile}" --out "$OUT/column_rows" "$@" \
    2>&1 | tee "$OUT/column_rows.log" | tail -16
  PYTHONPATH=. python3 tools/kernel_times.py \
    "${PROFILE_ROWS:-column_var:large:float32,channel_stats:large:float32,groupnorm_silu:large:float32}" \
    --modes eager,fuser,compile --top "${PROFILE_TOP:-4}" 2>&1 | grep -v Warning \
    | tee "$OUT/profile_columns.log"
fi
if [ "$what" = profile ]; then
  # Device time per call beside call time, and the kernels taking it (tools/kernel_times.py).
  PYTHONPATH=. python3 tools/kernel_times.py \
    "${PROFILE_ROWS:-softmax:large:float16,layer_norm:large:float16,groupnorm_silu:large:float32}" \
    --modes "${PROFILE_MODES:-eager,fuser,compile}" --top "${PROFILE_TOP:-4}" \
    ${PROFILE_SEQUENCE:+--sequence} 2>&1 \
    | grep -v Warning | tee "$OUT/profile.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  PYTHONPATH=. python3 -m fuser.bench --device cuda --out "$OUT/bench" "$@" 2>&1 | tee "$OUT/bench.log"
fi
