// The fuser's settings: environment flags read once (DESIGN.md section 4) plus the
// values the API may change at run time. The C++ twin of fuser/config.py.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace fuser {

struct Config {
  bool killed = false;            // FUSER_DISABLE=1: nothing is fused, whatever the code calls
  bool enable_at_import = false;  // FUSER_ENABLE=1
  std::atomic<int> arg_limit{128};  // FUSER_ARG_LIMIT; NVRTC's kernel-argument limit
  std::string cache_dir;          // FUSER_CACHE_DIR, default ~/.cache/fuser
  bool dump_graph = false;        // FUSER_DUMP=graph
  bool dump_kernels = false;      // FUSER_DUMP=kernels
  bool dump_reasons = false;      // FUSER_DUMP=reasons
  bool dump_interpreted = false;  // FUSER_DUMP=interpreted
  bool fuse_cpu = true;           // FUSER_DEVICES contains cpu
  bool fuse_cuda = true;          // FUSER_DEVICES contains cuda
  bool keep_singletons = false;   // FUSER_SINGLETON=1: keep groups of one node
  // FUSER_MIN_GROUP_SIZE=N: groups of fewer than N compute nodes are dissolved (default 2:
  // one node is not worth a kernel); FUSER_SINGLETON=1 makes the default 1.
  std::atomic<int> min_group_size{2};
  // FUSER_MAX_GROUPS=N: one pipeline run keeps its first N groups (program order) and
  // dissolves the rest; 0 = no limit. For bisecting a model group by group.
  std::atomic<int> max_groups{0};
  bool use_interpreter = false;   // FUSER_EXECUTOR=interpreter: debug path, no codegen
  bool use_disk_cache = true;     // FUSER_DISK_CACHE=0 turns the disk cache off
  bool hoist_projections = true;  // FUSER_HOIST=0: a loop's per-step input GEMMs stay per step
  bool pool_first = true;  // FUSER_POOL_FIRST=0: max pools keep reading their epilogue's result
  // FUSER_SIBLING_GROUPS=0: elementwise groups that read one tensor stay apart
  // (partition.cpp: mergeOneSiblingPair; reducing siblings still merge).
  bool elementwise_siblings = true;
  // FUSER_GRADIENT_SUMS=0: autodiff's sums of parameter gradients (_grad_sum_to_size,
  // layer_norm's weight and bias gradients) stay ATen's ops.
  bool gradient_sums = true;
  bool max_pool_kernel = true;  // FUSER_MAX_POOL_KERNEL=0: channels-last CUDA max pools stay ATen's
  bool transpose_tiles = true;    // FUSER_TRANSPOSE_TILES=0: transposed reads walk rows
  // FUSER_TILE_SIDE=32|64: CUDA transpose tiles of that side whatever the dtypes; 0
  // (default): codegen::transposeTileSide. For measuring one against the other.
  int tile_side = 0;
  // FUSER_TILE_GROUP=G: CUDA tile kernels take G tiles down the rows before the next
  // column of tiles (codegen::Kernel::tile_group); 1: row-major order; 0 (default):
  // codegen::transposeTileGroup.
  int tile_group = 0;
  // FUSER_TILE_MIN_BLOCKS=B: CUDA tile kernels ask ptxas for B resident blocks per SM
  // (codegen::Kernel::min_blocks_per_sm; 1: no cap on registers); 0 (default):
  // codegen::tileMinBlocksPerSm.
  int tile_min_blocks = 0;
  // FUSER_LEAVE_TO_ONEDNN=0: with oneDNN Graph on, still take the post-ops it would fuse
  // into a convolution or matmul (onednn_beside.h); for measuring the other order.
  bool leave_to_onednn = true;
  // FUSER_CHANNELS_LAST: which convolution networks run channels-last
  // (passes/channels_last.cpp): 1 CUDA ones (default), 0 none, `all` CPU ones too (for
  // testing the pass where there is no GPU; not measured to pay on CPU).
  bool channels_last_cuda = true;
  bool channels_last_cpu = false;
  // FUSER_COLUMN_SUMS: which row groups take in the leading-dims sums of what their rows
  // walk (fusibility.h: checkRowGroup; layer_norm's weight and bias gradients beside its
  // input gradient): 1 CUDA ones (default: the kernel sums them as it walks its rows), 0
  // none, `all` CPU ones too (for testing where there is no GPU: CPU kernels write the
  // summed values whole, for ATen's sum, which reads more than a group of their own).
  bool column_sums_cuda = true;
  bool column_sums_cpu = false;
  // FUSER_SHAPE_KERNELS=N: a CUDA group's strided kernel is compiled for each of the
  // first N shapes it meets, sizes and strides as constants; later shapes share one
  // kernel that reads them from its arguments. 0: that shared kernel only.
  int shape_kernels = 4;
  // FUSER_CROSS_COMPILE=sm_90: every kernel built for the CPU is also printed as CUDA and
  // compiled by NVRTC for that architecture (not loaded), so machines without a GPU
  // check the CUDA printer on every kernel they run (FUSER_DUMP=kernels prints that CUDA
  // source too). 0 = off. `sm_90:front` runs NVRTC's front end only (checkSyntax in
  // runtime/cuda/nvrtc_compiler.h): a fifth of the time, but limits that NVVM and ptxas
  // enforce (static shared memory, parameter space) go unchecked. The tests take that
  // depth, and the full one where they test such limits (tests/python/conftest.py).
  int cross_compile_arch = 0;
  bool cross_compile_front_only = false;
  // FUSER_AUTOTUNE=0: a kernel with several variants (runtime/variant_timing.h) takes
  // variant 0, the heuristic's, without timing. FUSER_FORCE_VARIANT=i: always variant i
  // (the last one where a kernel has fewer); -1 (default): chosen.
  bool autotune = true;
  int force_variant = -1;
  // FUSER_ROW_SPLITS=S: every reducing group's rows are cut in S slices, each row's
  // reductions done in stages of several kernels (codegen/split_rows.h); 1: never cut;
  // 0 (default): cut where rows are too few to fill the machine.
  int row_splits = 0;
};

// The process-wide settings; the environment is read on first use.
Config& config();

// Smallest group the partition keeps: 1 under FUSER_SINGLETON=1 (or the test switch),
// else min_group_size.
int minGroupSize();

// One message per bad environment value, naming the variable and the accepted values.
const std::vector<std::string>& configWarnings();

}  // namespace fuser
