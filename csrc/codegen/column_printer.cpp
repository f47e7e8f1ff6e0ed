// Row kernels whose rows are neighbours in memory (Kernel::columns: a sum over the
// leading dims, say), on either backend. Walking such a row alone reads one element per
// cache line (CPU: 8x eager's time for a column sum of 8192 x 768) or one element per
// thread and load (CUDA: half the copy bandwidth), so a block of neighbouring rows is
// walked together: for each element of the row, every row of the block reads its value
// beside the others'. CPU: blocks of up to kCpuColumnBlock rows per task, a vector loop
// over them (a block as wide as the tensor streams through memory). CUDA: each thread
// takes Kernel::row_vector rows and reads them as one 16-byte vector where strides and
// alignment allow. Every value known per row (row_start, a pass's reductions and what
// follows them) lives in an array of one entry per row of the block; each loop over the
// block reads back the entries it needs. Rows cut in slices (split_rows.h) number their
// units slice by slice, rows innermost. Whole outputs (a normalization over channels,
// a gradient beside its bias's sum) go through their own strides (Kernel::
// strided_outputs), each stored in the first walk that knows its value: a value that
// needs no reduction in the walk of the first pass, beside the sums it feeds. Where an
// output's rows are runs but the inputs' lie side by side (a normalization over a
// transposed input, its result contiguous), the block's values go out through a tile:
// a run of each row's elements at a time (CPU: on the stack; CUDA: in shared memory).
// Nothing is drawn at random.
#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/cpp_trig_prelude.h"
#include "codegen/cpp_vector_math.h"
#include "codegen/cuda_prelude.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"
#include "codegen/split_rows.h"
#include "codegen/walk_native16.h"

namespace fuser::codegen {
namespace {

// CUDA: elements of a thread's rows walked per step of the unrolled loop (H200, column
// sum of 32768 x 1024 floats: 88.8 us at 4, 71.2 at 8; one at a time, 32768 threads
// moved 1 TB/s).
constexpr int kColumnUnroll = 8;
// CUDA: warps of a block that walk the same rows, each every kColumnGroups-th element
// (cudaRowBlock's 256 threads: 32 units of rows each).
constexpr int kColumnGroups = 8;
// CPU: elements of every row of a block a tiled walk stores at a time (printTiledWalk),
// and the most bytes its tiles may take on the stack (a walk storing more outputs stores
// each element at its own row's offset: many float64 outputs overflowed a thread's stack).
constexpr int kCpuStoreTile = 16;  // two 8 x 8 squares (printTileTransposes)
static_assert(kCpuStoreTile == 16);
constexpr int64_t kCpuTileBytes = 128 * 1024;
// CPU: elements of each row a column walk sums in float before adding them to the row's
// double (openCpuSumSteps), as the row kernels' blocks of 256.
constexpr int kCpuSumStep = 256;
// CPU: the bytes a block's held element values may take on the stack and, past that,
// in each thread's buffers (printHoldBuffers). Blocks keep their kCpuColumnBlock rows
// when they hold: narrower ones read their inputs in shorter runs (one core, float32
// softmax over 64 channels from memory, [8, 64, 32, 32] with inputs rotated: 900 us
// unheld, 784 held in blocks of 1024 rows, 1103 in blocks of 512; over 128 channels the
// fused call 2778 us unheld, 3980 held in blocks of 512).
constexpr int64_t kCpuHoldBytes = 256 * 1024;
constexpr int64_t kCpuHoldHeapBytes = 2 * 1024 * 1024;
// CPU: the least cost of computing a value again (cpuRecomputeCost) for which it is held:
// a store and a load per later walk cost about 2. One core: holding a float32
// LayerNorm's input and centred values (cost 1 and 2) took it from 191 to 310 us.
constexpr int kCpuHoldMinCost = 4;
// CUDA: the most bytes the tiles of a block's whole outputs may take in shared memory
// (printCudaTileStores) and the elements of each row a tile holds at most: 32 floats are
// one 128-byte line. A tile holds the elements of whole steps of the unrolled loop.
constexpr int64_t kCudaTileBytes = 32 * 1024;
constexpr int kCudaTileElements = 32;
// CUDA: elements a warp walks per step in a kernel of 4 resident blocks (Kernel::
// column_blocks), whose threads have 64 registers. Its steps too must hold whole tiles:
// a tiled step stores each tile as its last element comes in.
constexpr int kColumnUnrollAtFourBlocks = kColumnUnroll / 2;
static_assert(kColumnUnrollAtFourBlocks % (kCudaTileElements / kColumnGroups) == 0);

class ColumnPrinter {
 public:
  ColumnPrinter(const Kernel& k, bool cuda)
      : k_(k), s_(scheduleRows(k)), cuda_(cuda), block_(cuda ? k.row_vector : kCpuColumnBlock) {
    for (const TensorOutput& o : k.outputs) {
      TORCH_CHECK(o.per_row || k.strided_outputs,
                  "fuser: a column kernel stores whole outputs through their strides");
    }
    for (const Expr& e : k.exprs) {
      TORCH_CHECK(e.op != IrOp::ElementIndex, "fuser: column kernels draw no random numbers");
    }
    TORCH_CHECK(cuda || !k.one_pass_variance, "fuser: one-pass variances are printed for CUDA only");
    TORCH_CHECK(!k.columns_in_shared || (cuda && k.row_stage < 0 && k.outer_ndim >= 1),
                "fuser: CUDA columns of whole rows in a run are copied into shared memory");
    constant_.assign(k.exprs.size(), false);
    for (ExprId id : s_.constants) constant_[id] = true;
    if (cuda) chooseCudaTile();
    if (cuda) native16_.emplace(k);
    if (!cuda && k.row_stage < 0) chooseHolds();
  }

  std::string print() {
    const bool staged = k_.row_stage >= 0;
    const int passes = static_cast<int>(s_.passes.size());
    // A stage before the last walks its slice for its pass; the last walks its slice
    // where whole outputs wait for the last reductions, and stores the per-row outputs.
    const bool pass_stage = staged && k_.row_stage < passes;
    const bool stores_whole = !storedIn(passes).empty();
    const bool slices = staged && (pass_stage || stores_whole);
    printHead(staged);
    printRowExprs(out_, k_, s_.constants, "  ", "0");
    const std::string b = std::to_string(block_);
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "  int64_t fx_off" << i << "[" << b << "];\n";
    for (size_t o = 0; k_.strided_outputs && o < k_.outputs.size(); ++o) {
      out_ << "  int64_t fx_ooff" << o << "[" << b << "];\n";
    }
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (!perRow(static_cast<ExprId>(id))) continue;
      out_ << "  " << computeTypeName(k_.exprs[id].type) << " fx_c" << id << "[" << b << "];\n";
    }
    out_ << "  int64_t fx_rows = 1;\n";
    for (int d = 0; d < k_.outer_ndim; ++d) out_ << "  fx_rows *= fx_sizes[" << d << "];\n";
    const std::string splits = staged ? "fx_iargs[" + std::to_string(splitCountArg(k_)) + "]" : "1";
    out_ << "  const int64_t fx_splits = " << splits << "; (void)fx_splits;\n";
    printHoldBuffers();
    printUnits();
    if (slices) {
      out_ << "    const int64_t fx_len = (fx_n + fx_splits - 1) / fx_splits;\n"
           << "    const int64_t fx_lo = fx_s * fx_len < fx_n ? fx_s * fx_len : fx_n;\n"
           << "    const int64_t fx_hi = fx_lo + fx_len < fx_n ? fx_lo + fx_len : fx_n;\n";
    } else {
      out_ << "    const int64_t fx_lo = 0, fx_hi = fx_n;\n";
    }
    out_ << "    (void)fx_lo; (void)fx_hi; (void)fx_s;\n";
    // The block's offsets and what each row computes before its first pass.
    openRows();
    printRowIndex();
    printRowOffsets(out_, k_, "      ");
    for (size_t i = 0; i < k_.inputs.size(); ++i) out_ << "      fx_off" << i << "[fx_j] = off" << i << ";\n";
    for (size_t o = 0; k_.strided_outputs && o < k_.outputs.size(); ++o) {
      out_ << "      fx_ooff" << o << "[fx_j] = ooff" << o << ";\n";
    }
    printRowExprs(out_, k_, s_.row_start, "      ", "0");
    keep(s_.row_start);
    closeRows();
    if (tile_ > 0) {  // every warp walks the same rows: the first writes their offsets
      out_ << "    if (fx_g == 0) {\n    #pragma unroll\n    for (int fx_j = 0; fx_j < " << block_
           << "; ++fx_j) {\n";
      for (size_t o : tiled_) {
        out_ << "      fx_trow" << o << "[fx_lane * " << block_ << " + fx_j] = fx_ooff" << o
             << "[fx_j];\n";
      }
      out_ << "    }\n    }\n";
    }
    if (k_.columns_in_shared) printCopiesToShared();
    if (staged) {
      if (cuda_) {
        printCudaFinished();
      } else {
        printFinished();
      }
    }
    if (pass_stage) {
      printPass(s_.passes[k_.row_stage], k_.row_stage, /*partials=*/true);
    } else if (!staged) {
      for (int p = 0; p < passes; ++p) printWalk(s_.passes[p], p);
    }
    if (!pass_stage) {
      if (stores_whole) printWalk(RowSchedule::Pass{}, passes);
      std::vector<ExprId> stored;
      for (const TensorOutput& o : k_.outputs) {
        if (o.per_row) stored.push_back(o.value);
      }
      openRows();
      bringIn({}, stored, "      ", /*offsets=*/false);
      printRowIndex();
      for (size_t o = 0; k_.strided_outputs && o < k_.outputs.size(); ++o) {
        out_ << "      const int64_t ooff" << o << " = fx_ooff" << o << "[fx_j]; (void)ooff" << o
             << ";\n";
      }
      // Every slice's unit of a row walks its own part; one stores the row's values.
      out_ << "      " << storeGuard() << (slices ? "if (fx_s == 0) " : "") << "{\n";
      printPerRowStores(out_, k_, "      ");
      out_ << "      }\n";
      closeRows();
    }
    out_ << "  }\n}\n";
    return out_.str();
  }

 private:
  // The signature, pointers (the workspace's for a stage) and CUDA's shared arrays.
  void printHead(bool staged) {
    if (cuda_) {
      printCudaRowKernelHead(out_, k_);
      printSharedArrays();
      if (k_.columns_in_shared) {
        out_ << "  extern __shared__ __align__(16) unsigned char fx_dyn[];\n";
      }
      printRowPointers(out_, k_, "a.ptrs", "a.strides");
      if (staged) printSplitBufferPointers(out_, k_, s_, "a.ptrs");
      return;
    }
    out_ << kCppPrelude << kCppVectorMath << trigPreludeFor(k_) << kCommonPrelude << kRowHelpers
         << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printRowPointers(out_, k_, "fx_ptrs", "fx_strides");
    out_ << "  (void)fx_dargs; (void)fx_iargs; (void)fx_error;\n";
    if (staged) printSplitBufferPointers(out_, k_, s_, "fx_ptrs");
  }

  // Opens the scope of one block of rows: slice fx_s, rows [fx_r0, fx_r0 + fx_nb) of it,
  // unit fx_u0 (s * rows + r0). CPU: a loop over the task's range of units. CUDA: a
  // block is kColumnGroups warps over the same 32 units (each `block_` neighbouring
  // rows), warp fx_g walking every kColumnGroups-th element; units past the last row
  // compute row rows - 1 again and store nothing, so that every thread reaches the
  // barriers. Every thread of the launch is live (cudaColumnThreads: whole blocks; the
  // runtime checks): a warp walks its share of every row, so none may sit out, and its
  // stores need no test of their own (behind one, the compiler rebuilt each store's
  // address from the strides: 8 instructions a store where 2 do).
  void printUnits() {
    const std::string b = std::to_string(block_);
    if (!cuda_) {
      out_ << "  for (int64_t fx_u0 = fx_begin, fx_nb = 0; fx_u0 < fx_end; fx_u0 += fx_nb) {\n"
           << "    const int64_t fx_s = fx_u0 / fx_rows, fx_r0 = fx_u0 - fx_s * fx_rows;\n"
           << "    fx_nb = fx_rows - fx_r0 < fx_end - fx_u0 ? fx_rows - fx_r0 : fx_end - fx_u0;\n"
           << "    if (fx_nb > " << b << ") fx_nb = " << b << ";\n";
      if (k_.outer_ndim > 1) {  // a block ends with its run of the innermost outer dim
        const std::string run = "fx_sizes[" + std::to_string(k_.outer_ndim - 1) + "]";
        out_ << "    if (fx_nb > " << run << " - fx_r0 % " << run << ") fx_nb = " << run
             << " - fx_r0 % " << run << ";\n";
      }
      return;
    }
    const std::string threads = std::to_string(cudaRowBlock(k_));
    out_ << "  const int64_t fx_t = (int64_t)blockIdx.x * " << threads << " + threadIdx.x;\n"
         << "  const int fx_g = threadIdx.x / 32, fx_lane = threadIdx.x % 32;\n"
         << "  {\n"
         << "    const int64_t fx_units = (fx_rows + " << b << " - 1) / " << b << ";\n"
         << "    const int64_t fx_per_slice = (fx_units + 31) / 32;  // blocks\n"
         << "    const int64_t fx_block = fx_t / " << threads << ";\n"
         << "    const int64_t fx_s = fx_block / fx_per_slice;\n"
         << "    const int64_t fx_r0 = ((fx_block - fx_s * fx_per_slice) * 32 + fx_lane) * " << b
         << ";\n"
         << "    const int64_t fx_nb = fx_rows - fx_r0 < " << b
         << " ? (fx_rows > fx_r0 ? fx_rows - fx_r0 : 0) : " << b << ";\n"
         << "    const int64_t fx_u0 = fx_s * fx_rows + fx_r0; (void)fx_u0;\n";
  }

  // Input `n` (its index, printed) reads one element for every row of the block.
  bool shared(const std::string& n) const { return k_.inputs[std::stoi(n)].outer_zero_stride; }

  // CPU: input `n`'s element of row fx_j where the block's rows lie side by side from
  // its first row's (or one element for every row: shared).
  std::string sideBySideLoad(const std::string& n) const {
    return "in" + n + "[fx_off" + n + "[0] + fx_eo" + n + (shared(n) ? "]" : " + fx_j]");
  }

  // A value known once per row (not per element, not the same for every row).
  bool perRow(ExprId id) const { return !s_.element[id] && !constant_[id]; }

  // The whole outputs walk `l` stores (l == passes: the storing walk after the last
  // pass; RowSchedule::columnStoreWalk).
  std::vector<size_t> storedIn(int l) const {
    std::vector<size_t> out;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].per_row && s_.columnStoreWalk(k_, o) == l) out.push_back(o);
    }
    return out;
  }

  // The element values a walk computes: its pass's, and those its stored outputs need.
  // Walking with held values (hold_), it computes the values it holds for later walks
  // and reads those held by earlier ones (heldBefore) instead of computing them again.
  std::vector<ExprId> walkElements(const RowSchedule::Pass& pass,
                                   const std::vector<size_t>& stores) const {
    std::vector<bool> need(k_.exprs.size(), false);
    if (hold_) {
      for (ExprId r : pass.reduces) need[k_.exprs[r].args[0]] = true;
      for (size_t id = 0; id < holds_.size(); ++id) need[id] = need[id] || holdsFrom(id) == walk_;
    } else {
      for (ExprId id : pass.element) need[id] = true;
    }
    for (size_t o : stores) need[k_.outputs[o].value] = true;
    for (size_t i = k_.exprs.size(); i-- > 0;) {
      if (!need[i] || !s_.element[i] || heldBefore(static_cast<ExprId>(i))) continue;
      for (ExprId a : k_.exprs[i].args) need[a] = true;
    }
    std::vector<ExprId> out;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (need[i] && s_.element[i] && !heldBefore(static_cast<ExprId>(i))) {
        out.push_back(static_cast<ExprId>(i));
      }
    }
    return out;
  }

  // ---- CPU: element values held for later walks ---------------------------------------
  // A value an earlier walk computes and a later one reads again (RowSchedule::held)
  // where computing it again costs more than keeping it (kCpuHoldMinCost: a softmax's
  // exponentials, a 16-bit sum rounded, not a float load) is kept for every element of
  // the block's rows, fx_h<b>[e * fx_nb + j], b its buffer (chooseHolds), where a whole
  // block of kCpuColumnBlock rows fits (fx_hold): on the stack up to kCpuHoldBytes, else
  // in buffers each thread keeps per kernel (grown to its longest row, freed when the
  // thread ends) up to kCpuHoldHeapBytes. Longer rows compute their values again in
  // every walk, as without holds. One core, bfloat16 softmax over 64 channels plus a
  // bias ([8, 64, 32, 32], the kernel alone): 785 -> 420 us with its inputs in cache,
  // 981 -> 844 from memory.
  void printHoldBuffers() {
    if (hold_bytes_ == 0) return;
    const std::string block = std::to_string(kCpuColumnBlock);
    const int64_t stack = kCpuHoldBytes / hold_bytes_ / kCpuColumnBlock * kCpuColumnBlock;
    const int64_t heap = kCpuHoldHeapBytes / hold_bytes_;
    out_ << "  bool fx_hold = fx_n * " << block << " <= " << stack << ";\n";
    for (size_t b = 0; b < slot_types_.size(); ++b) {
      const std::string n = std::to_string(b), t = slot_types_[b];
      out_ << "  " << t << " fx_hs" << n << "[" << stack << "];\n"
           << "  " << t << "* fx_h" << n << " = fx_hs" << n << ";\n"
           << "  static thread_local FxThreadBuffer<" << t << "> fx_heap" << n << ";\n";
    }
    // Rows too long for the stack take the thread's buffers (FxThreadBuffer); where one
    // is refused, the walks compute their values again.
    out_ << "  if (!fx_hold && fx_n * " << block << " <= " << heap << ") {\n"
         << "    fx_hold = true;\n";
    for (size_t b = 0; b < slot_types_.size(); ++b) {
      const std::string n = std::to_string(b);
      out_ << "    fx_h" << n << " = fx_heap" << n << ".atLeast(fx_n * " << block << ");\n"
           << "    fx_hold = fx_hold && fx_h" << n << ";\n";
    }
    out_ << "  }\n";
  }

  // Which values to hold, and in which buffer: values whose computing again costs at
  // least kCpuHoldMinCost, each in the first buffer of its type whose value no walk
  // after its own reads (a walk reads its held values before it stores new ones, at the
  // same element: softmax's sum, rounded, and its exponentials share one buffer).
  void chooseHolds() {
    const size_t n = k_.exprs.size();
    holds_.assign(n, false);
    slot_.assign(n, -1);
    std::vector<int> cost(n, 0);
    for (size_t id = 0; id < n; ++id) {
      if (!s_.element[id]) continue;
      cost[id] = cpuRecomputeCost(k_, k_.exprs[id]);
      for (ExprId a : k_.exprs[id].args) {
        if (s_.element[a] && !holds_[a]) cost[id] += cost[a];
      }
      holds_[id] = s_.held[id] && s_.used[id] && cost[id] >= kCpuHoldMinCost;
    }
    // The last walk that reads each value, held or computed again (a log_softmax's store
    // computes x - max again from x: x is read there).
    std::vector<int> last_use(n, -1);
    const int passes = static_cast<int>(s_.passes.size());
    hold_ = true;
    for (walk_ = 0; walk_ <= passes; ++walk_) {
      const RowSchedule::Pass none;
      const RowSchedule::Pass& pass = walk_ < passes ? s_.passes[walk_] : none;
      const std::vector<size_t> stores = storedIn(walk_);
      std::vector<ExprId> read = walkElements(pass, stores);
      for (ExprId r : pass.reduces) read.push_back(k_.exprs[r].args[0]);
      for (size_t o : stores) read.push_back(k_.outputs[o].value);
      for (size_t i = 0, computed = read.size(); i < computed; ++i) {
        for (ExprId a : k_.exprs[read[i]].args) read.push_back(a);
      }
      for (ExprId id : read) last_use[id] = std::max(last_use[id], walk_);
    }
    hold_ = false;
    walk_ = 0;
    std::vector<ExprId> occupant;  // per buffer, the value it holds last
    for (size_t id = 0; id < n; ++id) {
      if (!holds_[id]) continue;
      const size_t bytes = c10::elementSize(computeType(k_.exprs[id].type));
      const std::string type = computeTypeName(k_.exprs[id].type);
      for (size_t b = 0; b < occupant.size() && slot_[id] < 0; ++b) {
        if (slot_types_[b] == type && last_use[occupant[b]] <= s_.loop[id]) {
          slot_[id] = static_cast<int>(b);
          occupant[b] = static_cast<ExprId>(id);
        }
      }
      if (slot_[id] < 0) {
        slot_[id] = static_cast<int>(occupant.size());
        occupant.push_back(static_cast<ExprId>(id));
        hold_bytes_ += static_cast<int64_t>(bytes);
        slot_types_.push_back(type);
      }
    }
  }

  // The walk that computes held value `id` (-1: not held).
  int holdsFrom(size_t id) const { return holds_[id] ? s_.loop[id] : -1; }
  // Whether the walk being printed reads `id` from its buffer.
  bool heldBefore(ExprId id) const { return hold_ && holds_[id] && s_.loop[id] < walk_; }
  // Whether walk `l` computes or reads a held value.
  bool walkHolds(int l) const {
    for (size_t id = 0; id < holds_.size(); ++id) {
      if (holds_[id] && s_.loop[id] <= l) return true;
    }
    return false;
  }
  std::string holdAt(ExprId id) const {
    return "fx_h" + std::to_string(slot_[id]) + "[fx_e * fx_nb + fx_j]";
  }

  // Walk `l`: with the held values where the block holds them, else computing them again.
  void printWalk(const RowSchedule::Pass& pass, int l) {
    walk_ = l;
    if (!walkHolds(l)) return printPass(pass, l, /*partials=*/false);
    out_ << "    if (fx_hold) {\n";
    hold_ = true;
    printPass(pass, l, /*partials=*/false);
    hold_ = false;
    out_ << "    } else {\n";
    printPass(pass, l, /*partials=*/false);
    out_ << "    }\n";
  }

  // A loop over the block's rows (CUDA: unrolled over the thread's rows, so that their
  // arrays stay in registers).
  void openRows() {
    if (cuda_) {
      out_ << "    #pragma unroll\n    for (int fx_j = 0; fx_j < " << block_ << "; ++fx_j) {\n";
      return;
    }
    out_ << "    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) {\n";
  }

  // fx_r, row fx_j of the block (CUDA: rows past the last read the last).
  void printRowIndex() {
    out_ << "      const int64_t fx_r = "
         << (cuda_ ? "fx_r0 + fx_j < fx_rows ? fx_r0 + fx_j : fx_rows - 1" : "fx_r0 + fx_j")
         << "; (void)fx_r;\n";
  }

  // The condition on storing row fx_j's values: CUDA's first warp, live rows only.
  std::string storeGuard() const {
    return cuda_ ? "if (fx_g == 0 && fx_j < fx_nb) " : "";
  }
  void closeRows() { out_ << "    }\n"; }

  // Row fx_j's entries of the per-row values that `ids` read (and `also`), as vI, and
  // where `offsets`, its offsets as offI.
  void bringIn(const std::vector<ExprId>& ids, const std::vector<ExprId>& also,
               const std::string& indent, bool offsets) {
    std::vector<bool> printed(k_.exprs.size(), false), needed(k_.exprs.size(), false);
    for (ExprId id : ids) printed[id] = true;
    for (ExprId id : ids) {
      for (ExprId a : k_.exprs[id].args) needed[a] = true;
    }
    for (ExprId id : also) needed[id] = true;
    for (size_t i = 0; offsets && i < k_.inputs.size(); ++i) {
      out_ << indent << "const int64_t off" << i << " = fx_off" << i << "[fx_j]; (void)off" << i
           << ";\n";
    }
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (!needed[id] || printed[id] || !perRow(static_cast<ExprId>(id))) continue;
      out_ << indent << "const " << computeTypeName(k_.exprs[id].type) << " v" << id << " = fx_c"
           << id << "[fx_j];\n";
    }
  }

  // Stores row fx_j's entries of `ids`.
  void keep(const std::vector<ExprId>& ids) {
    for (ExprId id : ids) {
      if (perRow(id)) out_ << "      fx_c" << id << "[fx_j] = v" << id << ";\n";
    }
  }

  // A stage's view of the passes before it: their partials combined per row (or their
  // values read back), and what each row computes from them.
  void printFinished() {
    std::vector<ExprId> finished;
    for (int p = 0; p < k_.row_stage; ++p) {
      finished.insert(finished.end(), s_.passes[p].reduces.begin(), s_.passes[p].reduces.end());
      finished.insert(finished.end(), s_.passes[p].after.begin(), s_.passes[p].after.end());
    }
    openRows();
    out_ << "      const int64_t fx_r = fx_r0 + fx_j;\n";
    bringIn(finished, {}, "      ", /*offsets=*/true);
    printFinishedPasses(out_, k_, s_, "      ", "fx_s == 0");
    keep(finished);
    closeRows();
  }

  // Float sums in double, as rows walk them on either backend; one-pass variances
  // (CUDA only) in Welford triples.
  std::string accumulatorType(const Expr& e) const {
    if (isWelford(e)) return welfordTypeName(e);
    return sumsInDouble(e) ? "double" : computeTypeName(e.type);
  }

  // Walk `l` over elements [fx_lo, fx_hi) of the block's rows: per element, its offset
  // in each input and stored output, then the rows in a vector loop, each accumulating
  // into its own entry and storing its elements of the walk's whole outputs.
  // `partials`: a stage's slice, whose accumulators go to the workspace as they are.
  void printPass(const RowSchedule::Pass& pass, int l, bool partials) {
    out_ << "    {\n";  // the pass's own accumulators and flags
    printPassBody(pass, storedIn(l), partials);
    out_ << "    }\n";
  }

  void printPassBody(const RowSchedule::Pass& pass, const std::vector<size_t>& stores,
                     bool partials) {
    const std::string b = std::to_string(block_);
    const std::vector<ExprId> elements = walkElements(pass, stores);
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "    " << accumulatorType(e) << " fx_acc" << r << "[" << b << "];\n"
           << (cuda_ ? "    #pragma unroll\n    for (int fx_j = 0; fx_j < " + b + "; ++fx_j)"
                     : std::string("    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j)"))
           << " fx_acc" << r << "[fx_j] = " << reduceIdentity(e) << ";\n";
    }
    // The innermost outer dim (the run of rows a block lies in: printUnits) of stride 1
    // in every input the pass reads and output it stores (a contiguous tensor reduced
    // over its leading dims, an NCHW one over its channels), or 0 in an input
    // (TensorInput::outer_zero_stride: one element for every row): the block's rows of
    // input I lie side by side from its first row's. CPU: a vector loop reads them;
    // CUDA: one vector load per input, where the thread has a whole block within one
    // run and every input is aligned to it. Otherwise each row reads at its own offset.
    std::vector<bool> read(k_.inputs.size(), false);
    for (ExprId id : elements) {
      if (k_.exprs[id].op == IrOp::Load) read[k_.exprs[id].index] = true;
    }
    const bool side_by_side = k_.outer_ndim >= 1;
    const std::string run = std::to_string(k_.outer_ndim - 1);
    // A walk whose inputs lie side by side but one of whose stored outputs does not
    // (eager's contiguous result of a normalization over a transposed input) stores
    // through a tile of elements of every row (CPU: printTiledWalk; CUDA:
    // printCudaTileStores).
    const bool tiles =
        side_by_side && !stores.empty() &&
        (cuda_ ? std::any_of(stores.begin(), stores.end(), [this](size_t o) { return isTiled(o); })
               : tileBytes(stores) <= kCpuTileBytes);
    if (side_by_side) {
      // The stored outputs' rows side by side too (CUDA: whole aligned vectors), each
      // (fx_oside<O>), and with the inputs' (fx_side; fx_side_in the inputs' alone).
      for (size_t o : stores) {
        const std::string n = std::to_string(o);
        out_ << "    const bool fx_oside" << n << " = ost" << n << "[" << run << "] == 1";
        if (cuda_) {
          for (int d = k_.outer_ndim; d < k_.outer_ndim + k_.inner_ndim; ++d) {
            out_ << " && ost" << n << "[" << d << "] % " << b << " == 0";
          }
          out_ << " && (unsigned long long)(out" << n << " + fx_ooff" << n << "[0]) % (" << b
               << " * sizeof(*out" << n << ")) == 0";
        }
        out_ << "; (void)fx_oside" << n << ";\n";
      }
      // Read from shared memory (printCopiesToShared), the inputs' rows are always side
      // by side there; a walk that stores still needs the thread's rows whole and in one
      // run (else its vector stores would cross the run or the last row).
      const bool in_shared = k_.columns_in_shared;
      out_ << "    const bool fx_side_in = "
           << (in_shared && stores.empty()
                   ? std::string("true")
                   : inputsSideBySide(in_shared ? std::vector<bool>(read.size()) : read));
      out_ << "; (void)fx_side_in;\n    const bool fx_side = fx_side_in";
      for (size_t o : stores) out_ << " && fx_oside" << o;
      out_ << ";\n";
    }
    if (tiles && !cuda_) printTiledWalk(pass, elements, stores);
    if (cuda_ && side_by_side) {
      printCudaWalk(pass, read, elements, stores, tiles);
    } else {
      const bool steps =
          !cuda_ && std::any_of(pass.reduces.begin(), pass.reduces.end(),
                                [this](ExprId r) { return sumsInDouble(k_.exprs[r]); });
      if (steps) openCpuSumSteps(pass);
      out_ << "    for (int64_t fx_e = " << (steps ? "fx_eb" : cuda_ ? "fx_lo + fx_g" : "fx_lo")
           << "; fx_e < " << (steps ? "fx_ebe" : "fx_hi") << "; fx_e += "
           << (cuda_ ? kColumnGroups : 1) << ") {\n";
      printElementOffsets("fx_e", "", stores);
      if (side_by_side) {
        out_ << "      if (fx_side) {\n";
        printElementLoop(pass, elements, stores, /*side=*/true, "",
                         [this](const std::string& n) { return sideBySideLoad(n); }, steps);
        out_ << "      } else {\n";
      }
      auto own = [](const std::string& n) {
        return "in" + n + "[fx_off" + n + "[fx_j] + fx_eo" + n + "]";
      };
      printElementLoop(pass, elements, stores, /*side=*/false, "", own, steps);
      if (side_by_side) out_ << "      }\n";
      out_ << "    }\n";
      if (steps) closeCpuSumSteps(pass);
      if (tiles) out_ << "    }\n";  // the tiled walk's else
    }
    if (cuda_) {
      for (ExprId r : pass.reduces) printGroupCombine(k_.exprs[r], "fx_acc" + std::to_string(r));
    }
    if (partials) {
      const std::vector<SplitBuffer> buffers = splitBuffers(k_, s_);
      openRows();
      for (ExprId r : pass.reduces) {
        const int buf = splitBufferOf(buffers, SplitBuffer::Kind::Partials, r);
        out_ << "      " << storeGuard() << "fx_buf" << buf << "[fx_u0 + fx_j] = ("
             << splitBufferTypeName(k_, buffers[buf]) << ")fx_acc" << r << "[fx_j];\n";
      }
      closeRows();
      return;
    }
    if (pass.reduces.empty()) return;  // the storing walk
    // The reductions, and what each row computes from them.
    openRows();
    for (ExprId r : pass.reduces) {
      const char* t = computeTypeName(k_.exprs[r].type);
      out_ << "      const " << t << " v" << r << " = (" << t << ")fx_acc" << r << "[fx_j];\n";
    }
    std::vector<ExprId> known(pass.after);
    known.insert(known.end(), pass.reduces.begin(), pass.reduces.end());
    bringIn(known, {}, "      ", /*offsets=*/true);
    printRowExprs(out_, k_, pass.after, "      ", "0");
    keep(pass.reduces);
    keep(pass.after);
    closeRows();
  }

  // CPU sums of floats kept in double (sumsInDouble) take kCpuSumStep elements of each
  // row in float, then add those to the row's double: a double add per element took 14%
  // of LayerNorm2d's kernel over 96 channels (the row kernels step the same way).
  void openCpuSumSteps(const RowSchedule::Pass& pass) {
    const std::string step = std::to_string(kCpuSumStep);
    out_ << "    for (int64_t fx_eb = fx_lo; fx_eb < fx_hi; fx_eb += " << step << ") {\n"
         << "    const int64_t fx_ebe = fx_hi - fx_eb < " << step << " ? fx_hi : fx_eb + " << step
         << ";\n";
    for (ExprId r : pass.reduces) {
      if (!sumsInDouble(k_.exprs[r])) continue;
      out_ << "    float fx_step" << r << "[" << block_ << "];\n"
           << "    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) fx_step" << r << "[fx_j] = 0.0f;\n";
    }
  }

  void closeCpuSumSteps(const RowSchedule::Pass& pass) {
    for (ExprId r : pass.reduces) {
      if (!sumsInDouble(k_.exprs[r])) continue;
      out_ << "    for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) fx_acc" << r
           << "[fx_j] += (double)fx_step" << r << "[fx_j];\n";
    }
    out_ << "    }\n";
  }

  // Whether the block's rows of each input `read` lie side by side from its first row's
  // (CUDA: the thread's whole vector of rows, within one run, each input aligned to it).
  std::string inputsSideBySide(const std::vector<bool>& read) const {
    const std::string b = std::to_string(block_);
    const std::string run = std::to_string(k_.outer_ndim - 1);
    std::ostringstream out;
    out << "true";
    if (cuda_) out << " && fx_nb == " << b;
    if (cuda_ && k_.outer_ndim > 1) {
      out << " && fx_r0 % fx_sizes[" << run << "] + " << b << " <= fx_sizes[" << run << "]";
    }
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!read[i] || k_.inputs[i].outer_zero_stride) continue;
      const std::string n = std::to_string(i);
      out << " && st" << n << "[" << run << "] == 1";
      if (!cuda_) continue;
      for (int d = k_.outer_ndim; d < k_.outer_ndim + k_.inner_ndim; ++d) {
        out << " && st" << n << "[" << d << "] % " << b << " == 0";
      }
      out << " && (unsigned long long)(in" << n << " + fx_off" << n << "[0]) % (" << b
          << " * sizeof(*in" << n << ")) == 0";
    }
    return out.str();
  }

  // Kernel::columns_in_shared: where input I's element e of the thread's rows lies in
  // fx_sh<I>, a vector of block_ rows per lane, element after element.
  std::string sharedAt(const std::string& e) const {
    return "((" + e + " - fx_lo) * 32 + fx_lane) * " + std::to_string(block_);
  }

  // The copies: each warp's elements of each copied input, all issued before the first
  // is waited for. A warp reads back only its own elements (every kColumnGroups-th),
  // which its own lanes copied: a warp's barrier after the wait is enough.
  void printCopiesToShared() {
    std::vector<bool> copied(k_.inputs.size(), false);
    for (size_t i = 0; i < k_.inputs.size(); ++i) copied[i] = cudaColumnCopiesInput(k_.inputs[i]);
    out_ << "    unsigned char* fx_next = fx_dyn;\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!copied[i]) continue;
      const std::string n = std::to_string(i);
      const std::string t = storageTypeName(k_.inputs[i].dtype);
      out_ << "    " << t << "* const fx_sh" << n << " = reinterpret_cast<" << t << "*>(fx_next);\n"
           << "    fx_next += ((fx_hi - fx_lo) * " << 32 * block_ << " * sizeof(" << t
           << ") + 15) / 16 * 16;\n";
    }
    out_ << "    (void)fx_next;\n    {\n"
         << "    const bool fx_copy_side = " << inputsSideBySide(copied) << ";\n";
    // Two loops, not one branch in a loop: the compiler predicated both copies in the
    // one loop, and every thread issued both. Rows of one inner dim step their sources
    // by a pointer (the generic offsets multiply 64-bit indices per element).
    const bool stepped = k_.inner_ndim == 1;
    const std::string inner = std::to_string(k_.outer_ndim);
    const std::string step = std::to_string(kColumnGroups);
    if (stepped) {
      printWarpCopyCondition(copied);
      out_ << "    if (fx_copy_warp) {\n";
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        if (copied[i]) printWarpCopy(i);
      }
      out_ << "    } else ";
    } else {
      out_ << "    ";
    }
    out_ << "if (fx_copy_side) {\n";
    for (size_t i = 0; stepped && i < k_.inputs.size(); ++i) {
      if (!copied[i]) continue;
      const std::string n = std::to_string(i);
      out_ << "    const " << storageTypeName(k_.inputs[i].dtype) << "* fx_src" << n << " = in" << n
           << " + fx_off" << n << "[0] + (fx_lo + fx_g) * st" << n << "[" << inner << "];\n"
           << "    const int64_t fx_step" << n << " = " << step << " * st" << n << "[" << inner
           << "];\n";
    }
    printCopyLoopHead(!stepped);
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!copied[i]) continue;
      const std::string n = std::to_string(i);
      out_ << "      fx_copy_to_shared<" << block_ << " * sizeof(*in" << n << ")>(fx_sh" << n
           << " + fx_at, ";
      if (stepped) {
        out_ << "fx_src" << n << ");\n      fx_src" << n << " += fx_step" << n << ";\n";
      } else {
        out_ << "in" << n << " + fx_off" << n << "[0] + fx_eo" << n << ");\n";
      }
    }
    out_ << "    }\n    } else {\n";
    printCopyLoopHead(/*offsets=*/true);
    out_ << "      #pragma unroll\n      for (int fx_j = 0; fx_j < " << block_ << "; ++fx_j) {\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!copied[i]) continue;
      const std::string n = std::to_string(i);
      out_ << "        fx_copy_to_shared<sizeof(*in" << n << ")>(fx_sh" << n
           << " + fx_at + fx_j, in" << n << " + fx_off" << n << "[fx_j] + fx_eo" << n << ");\n";
    }
    out_ << "      }\n    }\n    }\n    fx_copies_done();\n    __syncwarp();\n    }\n";
  }

  // Whether the warp's rows of every copied input lie side by side in one run, each
  // element's aligned to 16 bytes: its lanes then copy each element's rows of the warp
  // (32 x block_ of them) in 16-byte pieces (printWarpCopy), a quarter of the copies a
  // lane makes of its own float rows. Every lane takes part (__all_sync).
  void printWarpCopyCondition(const std::vector<bool>& copied) {
    const std::string b = std::to_string(block_);
    const std::string run = std::to_string(k_.outer_ndim - 1);
    const std::string inner = std::to_string(k_.outer_ndim);
    out_ << "    const int64_t fx_wr0 = fx_r0 - (int64_t)fx_lane * " << b << ";\n"
         << "    const bool fx_copy_warp = __all_sync(0xffffffffu, fx_copy_side && fx_wr0 + 32 * "
         << b << " <= fx_rows";
    if (k_.outer_ndim > 1) {
      out_ << " && fx_wr0 % fx_sizes[" << run << "] + 32 * " << b << " <= fx_sizes[" << run << "]";
    }
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!copied[i]) continue;
      const std::string n = std::to_string(i);
      out_ << " && (unsigned long long)(in" << n << " + fx_off" << n << "[0] - fx_lane * " << b
           << ") % 16 == 0 && st" << n << "[" << inner << "] * sizeof(*in" << n << ") % 16 == 0";
    }
    out_ << ");\n";
  }

  // Input i's rows of the warp, element after element of the warp's (every
  // kColumnGroups-th), 16 bytes a lane: an element's rows are `pieces` pieces, so a
  // warp's copy takes 32 / pieces elements. Their place in shared memory is the one
  // each lane's own copy would take (sharedAt), read back by other lanes of the warp.
  void printWarpCopy(size_t i) {
    const std::string n = std::to_string(i);
    const int64_t bytes = 32 * block_ * static_cast<int64_t>(c10::elementSize(k_.inputs[i].dtype));
    const int64_t pieces = bytes / 16;
    const std::string first = "(fx_g + " + std::to_string(kColumnGroups) + " * (fx_lane / " +
                              std::to_string(pieces) + "))";
    const std::string piece = "fx_lane % " + std::to_string(pieces) + " * 16";
    const int64_t stride = kColumnGroups * (32 / pieces);  // elements between a lane's copies
    out_ << "    {\n    const unsigned char* fx_wsrc = (const unsigned char*)(in" << n
         << " + fx_off" << n << "[0] - fx_lane * " << block_ << " + (fx_lo + " << first
         << ") * st" << n << "[" << k_.outer_ndim << "]) + " << piece << ";\n"
         << "    unsigned char* fx_wdst = (unsigned char*)fx_sh" << n << " + " << first << " * "
         << bytes << " + " << piece << ";\n"
         << "    const int64_t fx_wstep = " << stride << " * st" << n << "[" << k_.outer_ndim
         << "] * (int64_t)sizeof(*in" << n << ");\n"
         << "    #pragma unroll 4\n    for (int64_t fx_e = fx_lo + " << first
         << "; fx_e < fx_hi; fx_e += " << stride << ") {\n"
         << "      fx_copy_to_shared<16>(fx_wdst, fx_wsrc);\n"
         << "      fx_wsrc += fx_wstep;\n      fx_wdst += " << stride * bytes
         << ";\n    }\n    }\n";
  }

  // A copy loop's head: each warp's elements, the offset of element fx_e in shared memory
  // and, with `offsets`, in each input.
  void printCopyLoopHead(bool offsets) {
    out_ << "    #pragma unroll 4\n    for (int64_t fx_e = fx_lo + fx_g; fx_e < fx_hi; fx_e += "
         << kColumnGroups << ") {\n";
    if (offsets) printElementOffsets("fx_e", "", {});
    out_ << "      const int64_t fx_at = " << sharedAt("fx_e") << ";\n";
  }

  // The stack bytes of the tiles a tiled walk storing `stores` declares.
  int64_t tileBytes(const std::vector<size_t>& stores) const {
    int64_t bytes = 0;
    for (size_t o : stores) {
      bytes += int64_t{kCpuStoreTile} * block_ * static_cast<int64_t>(c10::elementSize(k_.outputs[o].dtype));
    }
    return bytes;
  }

  // CPU, inputs side by side and a stored output's rows apart: kCpuStoreTile elements of
  // the block's rows at a time, read side by side in a vector loop with every stored
  // value put in a tile, then each row's elements of the tile stored as one run (a
  // store per element at its own row's offset took 1.7-3x eager's copy-then-normalize:
  // every element a line of its own). Opens an if whose else is the plain walk.
  void printTiledWalk(const RowSchedule::Pass& pass, const std::vector<ExprId>& elements,
                      const std::vector<size_t>& stores) {
    const std::string t = std::to_string(kCpuStoreTile);
    const std::string tile_size = std::to_string(kCpuStoreTile * block_);
    out_ << "    if (!fx_side && fx_side_in) {\n";
    for (size_t o : stores) {
      const std::string n = std::to_string(o);
      out_ << "    " << storageTypeName(k_.outputs[o].dtype) << " fx_tile" << n << "[" << tile_size
           << "];\n    int64_t fx_toeo" << n << "[" << t << "];\n";
    }
    out_ << "    for (int64_t fx_e0 = fx_lo; fx_e0 < fx_hi; fx_e0 += " << t << ") {\n"
         << "      const int64_t fx_te = fx_hi - fx_e0 < " << t << " ? fx_hi - fx_e0 : " << t
         << ";\n"
         << "      for (int64_t fx_t = 0; fx_t < fx_te; ++fx_t) {\n"
         << "      const int64_t fx_e = fx_e0 + fx_t;\n";
    printElementOffsets("fx_e", "", stores);
    for (size_t o : stores) {
      out_ << "      fx_toeo" << o << "[fx_t] = fx_oeo" << o << ";\n";
    }
    printElementLoop(pass, elements, stores, /*side=*/true, "",
                     [this](const std::string& n) { return sideBySideLoad(n); },
                     /*in_steps=*/false, "fx_t * fx_nb + fx_j");
    out_ << "      }\n";
    for (size_t o : stores) {
      const std::string n = std::to_string(o);
      const size_t element = c10::elementSize(k_.outputs[o].dtype);
      if (element == 2 || element == 4) printTileTransposes(n, element == 2 ? "short" : "int");
      out_ << "      for (int64_t fx_j = " << (element == 2 || element == 4 ? "fx_tj" + n : "0")
           << "; fx_j < fx_nb; ++fx_j) {\n"
           << "        " << storageTypeName(k_.outputs[o].dtype) << "* fx_row = out" << n
           << " + fx_ooff" << n << "[fx_j];\n"
           << "        for (int64_t fx_t = 0; fx_t < fx_te; ++fx_t) fx_row[fx_toeo" << n
           << "[fx_t]] = fx_tile" << n << "[fx_t * fx_nb + fx_j];\n      }\n";
    }
    out_ << "    }\n    } else {\n";
  }

  // A whole tile of 2- or 4-byte elements whose output elements lie in runs of 8 moves in
  // 8 x 8 squares transposed in vector registers; fx_tj<n> says how many rows it stored.
  // A block's rows lie one row stride apart (printUnits ends each block at the end of
  // the innermost outer dim's run and of its slice). Each element stored alone took 40%
  // of LayerNorm2d's kernel (96 channels, 4 x 56 x 56 floats, one core: 1689 -> 1026 us).
  void printTileTransposes(const std::string& n, const std::string& lane) {
    const std::string run = std::to_string(kCpuStoreTile / 2);
    out_ << "      int64_t fx_tj" << n << " = 0;\n"
         << "      if (fx_te == " << kCpuStoreTile << " && fx_nb >= " << run << ") {\n"
         << "        const int64_t fx_ts = fx_ooff" << n << "[1] - fx_ooff" << n << "[0];\n"
         << "        bool fx_runs = true;\n"
         << "        for (int fx_q = 1; fx_q < " << run << "; ++fx_q)\n"
         << "          fx_runs = fx_runs && fx_toeo" << n << "[fx_q] == fx_toeo" << n
         << "[0] + fx_q && fx_toeo" << n << "[" << run << " + fx_q] == fx_toeo" << n << "["
         << run << "] + fx_q;\n"
         << "        for (; fx_runs && fx_tj" << n << " + " << run << " <= fx_nb; fx_tj" << n
         << " += " << run << ") {\n";
    for (int half = 0; half < 2; ++half) {
      const std::string first = std::to_string(half * kCpuStoreTile / 2);
      out_ << "          fx_transpose8x8<" << lane << ">(fx_tile" << n << " + " << first
           << " * fx_nb + fx_tj" << n << ", fx_nb, out" << n << " + fx_ooff" << n << "[fx_tj" << n
           << "] + fx_toeo" << n << "[" << first << "], fx_ts);\n";
    }
    out_ << "        }\n      }\n";
  }

  // fx_eo<I><suffix>: where element `e` of a row lies from the row's start, in input I
  // (where `inputs`); fx_oeo<O><suffix> the same in each output of `stores`.
  void printElementOffsets(const std::string& e, const std::string& suffix,
                           const std::vector<size_t>& stores, bool inputs = true) {
    const int first = k_.outer_ndim, last = k_.outer_ndim + k_.inner_ndim - 1;
    std::vector<std::pair<std::string, std::string>> tensors;  // (offset, strides)
    // An input whose one inner dim has unit stride (a per-channel weight) is read at
    // its element: the unrolled steps' addresses then differ by constants, which the
    // loads take as immediates (the multiply and a 64-bit add per load, else).
    std::vector<bool> unit;
    for (size_t i = 0; inputs && i < k_.inputs.size(); ++i) {
      tensors.emplace_back("fx_eo" + std::to_string(i) + suffix, "st" + std::to_string(i));
      unit.push_back(k_.inner_ndim == 1 && k_.inputs[i].inner_unit_stride);
    }
    for (size_t o : stores) {
      tensors.emplace_back("fx_oeo" + std::to_string(o) + suffix, "ost" + std::to_string(o));
      unit.push_back(false);
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      const auto& [offset, strides] = tensors[t];
      out_ << "      int64_t " << offset << " = "
           << (unit[t]                ? e
               : k_.inner_ndim == 1 ? e + " * " + strides + "[" + std::to_string(first) + "]"
                                      : std::string("0"))
           << "; (void)" << offset << ";\n";
    }
    if (k_.inner_ndim == 1) return;
    out_ << "      {\n        int64_t fx_q = " << e << ";\n";
    for (int d = last; d >= first; --d) {
      out_ << "        { const int64_t fx_idx = fx_q % fx_sizes[" << d << "]; fx_q /= fx_sizes[" << d
           << "];";
      for (const auto& [offset, strides] : tensors) {
        out_ << " " << offset << " += fx_idx * " << strides << "[" << d << "];";
      }
      out_ << " }\n";
    }
    out_ << "      }\n";
  }

  // CUDA: `acc[j]` (reduction `e`'s accumulators, or its partials' combination) of every
  // warp of the block combined through shared memory; every thread gets the result.
  void printGroupCombine(const Expr& e, const std::string& acc) {
    const std::string a = accumulatorType(e);
    const std::string b = std::to_string(block_);
    const std::string red = "fx_red_" + sharedTag(a);
    out_ << "    __syncthreads();\n"
         << "    #pragma unroll\n    for (int fx_j = 0; fx_j < " << b << "; ++fx_j) " << red
         << "[(fx_g * 32 + fx_lane) * " << b << " + fx_j] = " << acc << "[fx_j];\n"
         << "    __syncthreads();\n"
         << "    #pragma unroll\n    for (int fx_j = 0; fx_j < " << b << "; ++fx_j) {\n"
         << "      " << a << " fx_v = " << red << "[fx_lane * " << b << " + fx_j];\n"
         << "      for (int fx_q = 1; fx_q < " << kColumnGroups << "; ++fx_q) fx_v = "
         << reduceCombiner(e) << "<" << a << ">(fx_v, " << red << "[(fx_q * 32 + fx_lane) * " << b
         << " + fx_j]);\n"
         << "      " << acc << "[fx_j] = fx_v;\n    }\n";
  }

  static std::string sharedTag(const std::string& type) {
    if (type.rfind("fx_welford<", 0) == 0) return "w" + sharedTag(type.substr(11, type.size() - 12));
    if (type.rfind("fx_welford_mean<", 0) == 0) {
      return "m" + sharedTag(type.substr(16, type.size() - 17));
    }
    return type == "long long" || type == "int64_t" ? "l" : type == "double" ? "d" : "f";
  }

  // CUDA's shared memory: printGroupCombine's array of each accumulator type in use and
  // the tiles of printCudaTileStores, all at the start of one buffer (no two are in use
  // at once: a combine begins at a barrier, and so do and end a tiled walk's stores),
  // and the tiled outputs' row offsets apart from it (written once, before any walk).
  void printSharedArrays() {
    std::vector<std::string> types;
    for (const Expr& e : k_.exprs) {
      if (e.op != IrOp::Reduce) continue;
      const std::string a = accumulatorType(e);
      if (std::find(types.begin(), types.end(), a) == types.end()) types.push_back(a);
    }
    const int rows = 32 * block_;
    std::string bytes = std::to_string(tile_ > 0 ? tileOffset(tiled_.size()) : 16);
    for (const std::string& a : types) {
      const std::string red = "sizeof(" + a + ") * " + std::to_string(kColumnGroups * rows);
      bytes = "(" + red + " > " + bytes + " ? " + red + " : " + bytes + ")";
    }
    out_ << "  __shared__ __align__(16) unsigned char fx_smem[" << bytes << "];\n";
    for (const std::string& a : types) {
      out_ << "  " << a << "* const fx_red_" << sharedTag(a) << " = reinterpret_cast<" << a
           << "*>(fx_smem);\n";
    }
    for (size_t t = 0; t < tiled_.size(); ++t) {
      const std::string n = std::to_string(tiled_[t]);
      const std::string e = storageTypeName(k_.outputs[tiled_[t]].dtype);
      out_ << "  " << e << "* const fx_tile" << n << " = reinterpret_cast<" << e << "*>(fx_smem + "
           << tileOffset(t) << ");\n"
           << "  __shared__ int64_t fx_trow" << n << "[" << rows << "];\n";
    }
  }

  // CUDA: tiles for the whole outputs whose rows lie apart (TensorOutput::rows_apart)
  // that a walk of this kernel stores, where they fit (tile_ elements of each of the
  // block's rows: kCudaTileElements, or halved while the shared memory would not hold
  // them), else none (tile_ 0: such outputs are stored element by element).
  void chooseCudaTile() {
    // A stage prints one walk: its pass's, or (the last) the storing walk.
    const int passes = static_cast<int>(s_.passes.size());
    const int stage_walk = k_.row_stage < 0 ? -1 : std::min(k_.row_stage, passes);
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (k_.outputs[o].per_row || !k_.outputs[o].rows_apart) continue;
      const int walk = s_.columnStoreWalk(k_, o);
      if (stage_walk < 0 || walk == stage_walk) tiled_.push_back(o);
    }
    if (k_.outer_ndim < 1) tiled_.clear();
    const int64_t rows = 32 * block_;
    const auto row_offsets = static_cast<int64_t>(tiled_.size()) * rows * 8;
    for (tile_ = kCudaTileElements; !tiled_.empty() && tile_ >= kColumnGroups; tile_ /= 2) {
      const int64_t tiles = tileOffset(tiled_.size());
      if (tiles <= kCudaTileBytes &&
          std::max(tiles, reductionBytes()) + row_offsets <= kCudaColumnStaticBytes) {
        return;
      }
    }
    tile_ = 0;
    tiled_.clear();
  }

  // The most bytes printGroupCombine's arrays take (an upper bound of what the compiler
  // counts: each accumulator at least a word).
  int64_t reductionBytes() const {
    int64_t bytes = 0;
    for (const Expr& e : k_.exprs) {
      if (e.op != IrOp::Reduce) continue;
      const auto element = static_cast<int64_t>(c10::elementSize(e.type));
      const int64_t a = isWelford(e)     ? 3 * element
                        : sumsInDouble(e) ? 8
                                          : std::max<int64_t>(element, 8);
      bytes = std::max(bytes, a * kColumnGroups * 32 * block_);
    }
    return bytes;
  }

  bool isTiled(size_t o) const {
    return std::find(tiled_.begin(), tiled_.end(), o) != tiled_.end();
  }

  // Where the tile of tiled_[t] starts in the shared buffer (t = tiled_.size(): the bytes
  // of them all), each aligned to 16 bytes.
  int64_t tileOffset(size_t t) const {
    int64_t bytes = 0;
    for (size_t i = 0; i < t; ++i) {
      const int64_t tile = int64_t{32} * block_ * tile_ *
                           static_cast<int64_t>(c10::elementSize(k_.outputs[tiled_[i]].dtype));
      bytes += (tile + 15) / 16 * 16;
    }
    return bytes;
  }

  // CUDA's view of the passes before this stage: a reduction of the stage before, its
  // partials combined over the block's warps (warp g takes every kColumnGroups-th
  // slice); of earlier stages, its values read back; and what each row computes next.
  void printCudaFinished() {
    const std::vector<SplitBuffer> buffers = splitBuffers(k_, s_);
    const std::string b = std::to_string(block_);
    for (int p = 0; p < k_.row_stage; ++p) {
      for (ExprId r : s_.passes[p].reduces) {
        const Expr& e = k_.exprs[r];
        const std::string v = "v" + std::to_string(r);
        const int values = splitBufferOf(buffers, SplitBuffer::Kind::RowValues, r);
        if (p + 1 < k_.row_stage) {
          openRows();
          printRowIndex();
          out_ << "      const " << computeTypeName(e.type) << " " << v << " = fx_buf" << values
               << "[fx_r];\n";
          keep({r});
          closeRows();
          continue;
        }
        const std::string acc = "fx_fin" + std::to_string(r);
        const std::string a = accumulatorType(e);
        out_ << "    " << a << " " << acc << "[" << b << "];\n";
        openRows();
        printRowIndex();
        out_ << "      " << acc << "[fx_j] = " << reduceIdentity(e) << ";\n"
             << "      for (int64_t fx_q = fx_g; fx_q < fx_splits; fx_q += " << kColumnGroups
             << ") " << acc << "[fx_j] = " << reduceCombiner(e) << "<" << a << ">(" << acc
             << "[fx_j], (" << a << ")fx_buf" << splitBufferOf(buffers, SplitBuffer::Kind::Partials, r)
             << "[fx_q * fx_rows + fx_r]);\n";
        closeRows();
        printGroupCombine(e, acc);
        openRows();
        printRowIndex();
        out_ << "      const " << computeTypeName(e.type) << " " << v << " = ("
             << computeTypeName(e.type) << ")" << acc << "[fx_j];\n";
        if (values >= 0) out_ << "      if (fx_s == 0) { " << storeGuard() << "fx_buf" << values << "[fx_r] = " << v << "; }\n";
        keep({r});
        closeRows();
      }
      openRows();
      bringIn(s_.passes[p].after, {}, "      ", /*offsets=*/true);
      printRowExprs(out_, k_, s_.passes[p].after, "      ", "0");
      keep(s_.passes[p].after);
      closeRows();
    }
  }

  // CUDA's walk where the thread's rows lie side by side in the inputs: kColumnUnroll
  // elements a step, every vector load of the step issued before any arithmetic, so
  // that a thread keeps that many loads in flight, then a smaller step and the rest one
  // at a time; and each row's own loads, an element at a time, where the rows are not
  // side by side.
  void printCudaWalk(const RowSchedule::Pass& pass, const std::vector<bool>& read,
                     const std::vector<ExprId>& elements, const std::vector<size_t>& stores,
                     bool tiles) {
    const std::string b = std::to_string(block_);
    auto vectorLoads = [&](const std::string& suffix, const std::string& e) {
      for (size_t i = 0; i < k_.inputs.size(); ++i) {
        if (!read[i]) continue;
        const std::string n = std::to_string(i);
        const std::string element = storageTypeName(k_.inputs[i].dtype);
        const std::string vec = "FxVec<" + element + ", " + b + ">";
        const std::string at = "in" + n + " + fx_off" + n + "[0] + fx_eo" + n + suffix;
        if (k_.inputs[i].outer_zero_stride) {
          out_ << "      const " << element << " fx_w" << n << suffix << " = *(" << at << ");\n";
        } else if (k_.columns_in_shared && cudaColumnCopiesInput(k_.inputs[i])) {
          out_ << "      const " << vec << " fx_w" << n << suffix << " = *(const " << vec
               << "*)(fx_sh" << n << " + " << sharedAt(e) << ");\n";
        } else {
          out_ << "      const " << vec << " fx_w" << n << suffix << " = *(const " << vec << "*)("
               << at << ");\n";
        }
      }
    };
    auto fromVector = [this](const std::string& n, const std::string& suffix) {
      return "fx_w" + n + suffix + (shared(n) ? std::string() : ".v[fx_j]");
    };
    const int g = kColumnGroups;
    // One step of `count` elements from fx_e: the offsets, every vector load, then the
    // elements; `tiled`: their stored values go through the tiles, whose stores follow
    // each tile_ elements of the block's rows (else as vectors: the rows side by side in
    // the outputs too).
    auto step = [&](int count, bool tiled) {
      for (int u = 0; u < count; ++u) {
        printElementOffsets("(fx_e + " + std::to_string(u * g) + ")", "_" + std::to_string(u),
                            stores);
      }
      for (int u = 0; u < count; ++u) {
        vectorLoads("_" + std::to_string(u), "(fx_e + " + std::to_string(u * g) + ")");
      }
      // Sums kept in double add a step's elements in float first: one conversion and
      // one double add per step, not per element (a conversion to double runs at an
      // eighth of float arithmetic's rate: a float16 column sum of g * sigmoid(x) over
      // [32768, 1024] took 61.9 us on the H100 with a double add per element, 58.0 with
      // float ones).
      for (ExprId r : pass.reduces) {
        if (!sumsInDouble(k_.exprs[r])) continue;
        out_ << "      float fx_step" << r << "[" << b << "];\n"
             << "      #pragma unroll\n      for (int fx_j = 0; fx_j < " << b << "; ++fx_j) fx_step"
             << r << "[fx_j] = 0.0f;\n";
      }
      const int per_tile = tile_ / g;  // unrolled elements a tile holds
      auto elementLoops = [&] {
        for (int u = 0; u < count; ++u) {
          const std::string suffix = "_" + std::to_string(u);
          const std::string tile_at = tiled ? tileAt(u) : "";
          printElementLoop(
              pass, elements, stores, /*side=*/true, suffix,
              [&](const std::string& n) { return fromVector(n, suffix); }, /*in_steps=*/true,
              tile_at);
          if (tiled && (u + 1) % per_tile == 0) {
            printCudaTileStores(stores, "fx_e0 + " + std::to_string((u + 1 - per_tile) * g));
          }
        }
      };
      // A step that only stores takes its 16-bit quotients in their quick form, and is
      // computed again, storing over its first values, where one of them needs more. A
      // warp computes the step again where any lane needs it: about 7 values in 8192 do,
      // so a step of 512 quotients a warp (two rows a thread) is computed again about a
      // third of the time, one of 2048 (eight rows) most of the time; the quick form
      // went 12-21% slower than the division's own test there (float16, 96-768
      // channels, H200), and bfloat16's 15-20% slower with few steps computed again.
      const bool quick = !tiled && pass.reduces.empty() && block_ <= 2;
      const std::vector<c10::ScalarType> formats =
          quick ? native16_->quotientFormats(elements) : std::vector<c10::ScalarType>{};
      for (c10::ScalarType f : formats) {
        out_ << "      FxQuotTest fx_redo" << WalkNative16::quickSuffix(f) << ";\n";
      }
      if (!formats.empty()) redo_ = "fx_redo";
      elementLoops();
      redo_.clear();
      if (!formats.empty()) {
        out_ << "      if (__builtin_expect(false";
        for (c10::ScalarType f : formats) out_ << " || " << WalkNative16::quickRedo(f, "fx_redo");
        out_ << ", 0)) {\n";
        elementLoops();
        out_ << "      }\n";
      }
      for (ExprId r : pass.reduces) {
        if (!sumsInDouble(k_.exprs[r])) continue;
        const std::string n = std::to_string(r);
        out_ << "      #pragma unroll\n      for (int fx_j = 0; fx_j < " << b << "; ++fx_j) "
             << "fx_acc" << n << "[fx_j] += (double)fx_step" << n << "[fx_j];\n";
      }
    };
    out_ << "    int64_t fx_e = fx_lo + fx_g;\n";
    if (tiles) {
      // A block tiles where every thread's rows lie side by side in the inputs (and in
      // the outputs without a tile: a tiled output's never do), the others storing
      // element by element: its threads meet at the tiles' barriers, each step of the
      // same elements (a warp's own bound would differ by its g).
      out_ << "    if (__syncthreads_and(fx_side_in";
      for (size_t o : stores) {
        if (!isTiled(o)) out_ << " && fx_oside" << o;
      }
      out_ << ")) {\n    int64_t fx_e0 = fx_lo;\n"
           << "    for (; fx_e0 + " << unroll_ * g << " <= fx_hi; fx_e0 += "
           << unroll_ * g << ") {\n"
           << "      fx_e = fx_e0 + fx_g;\n";
      step(unroll_, /*tiled=*/true);
      out_ << "    }\n";
      // Then halving steps of whole tiles; fewer elements than a tile's are left to the
      // loop below, stored per row. Stored per row, the 32 channels that whole steps of
      // 64 left of 96 took LayerNorm2d over [32, 96, 56, 56] 85.2 us on the H200; in a
      // tiled step of 32, 51.2.
      for (int count = unroll_ / 2; count >= tile_ / g; count /= 2) {
        out_ << "    if (fx_e0 + " << count * g << " <= fx_hi) {\n      fx_e = fx_e0 + fx_g;\n";
        step(count, /*tiled=*/true);
        out_ << "      fx_e0 += " << count * g << ";\n    }\n";
      }
      out_ << "    fx_e = fx_e0 + fx_g;\n    } else\n";
    }
    out_ << "    if (fx_side) {\n"
         << "    for (; fx_e + " << (unroll_ - 1) * g << " < fx_hi; fx_e += "
         << unroll_ * g << ") {\n";
    step(unroll_, /*tiled=*/false);
    out_ << "    }\n";
    // What whole steps leave, 4 elements or more of a warp's, in a step of 4 too, so
    // that their loads are in flight together (one at a time, each load was waited for
    // before the next); fewer go one at a time below. (Each copy of a step is code
    // NVRTC compiles at a group's first call: halving steps down to 1 made the column
    // kernels 2-3x longer, and the CPU's test run, which compiles their CUDA forms,
    // 28% slower.)
    const int rest = unroll_ / 2;
    out_ << "    if (fx_e + " << (rest - 1) * g << " < fx_hi) {\n";
    step(rest, /*tiled=*/false);
    out_ << "    fx_e += " << rest * g << ";\n    }\n";
    out_ << "    }\n";
    // The rest, and rows not side by side in the inputs (each row's own loads), an
    // element at a time.
    out_ << "    for (; fx_e < fx_hi; fx_e += " << g << ") {\n";
    printElementOffsets("fx_e", "", stores);
    out_ << "      if (fx_side) {\n";
    vectorLoads("", "fx_e");
    printElementLoop(pass, elements, stores, /*side=*/true, "",
                     [&](const std::string& n) { return fromVector(n, ""); });
    out_ << "      } else {\n";
    printElementLoop(pass, elements, stores, /*side=*/false, "", [this](const std::string& n) {
      if (k_.columns_in_shared && cudaColumnCopiesInput(k_.inputs[std::stoi(n)])) {
        return "fx_sh" + n + "[" + sharedAt("fx_e") + " + fx_j]";
      }
      return "in" + n + "[fx_off" + n + "[fx_j] + fx_eo" + n + "]";
    });
    out_ << "      }\n    }\n";
  }

  // Row fx_lane * block_ + fx_j's place in a tile for the u-th element of a step, turned
  // by the lane so that a warp's stores (and printCudaTileStores's loads) fall in 32
  // banks.
  std::string tileAt(int u) const {
    const int per_tile = tile_ / kColumnGroups;
    return "(fx_lane * " + std::to_string(block_) + " + fx_j) * " + std::to_string(tile_) +
           " + ((" + std::to_string(u % per_tile * kColumnGroups) + " + fx_g) ^ (fx_lane & " +
           std::to_string(tile_ - 1) + "))";
  }

  // CUDA: the tiles of `stores`, elements [base, base + tile_) of each of the block's
  // rows, stored between two barriers (the first: every warp's values are in; the
  // second: the tiles are free again): each row's elements by consecutive threads, one
  // coalesced run per row (storing each element at its own row's offset wrote a line
  // of its own per element).
  void printCudaTileStores(const std::vector<size_t>& stores, const std::string& base) {
    const std::string t = std::to_string(tile_);
    const std::string b = std::to_string(block_);
    std::vector<size_t> tiled;
    for (size_t o : stores) {
      if (isTiled(o)) tiled.push_back(o);
    }
    out_ << "      __syncthreads();\n      {\n"
         << "      const int fx_te = threadIdx.x % " << t << ";\n";
    printElementOffsets("(" + base + " + fx_te)", "_t", tiled, /*inputs=*/false);
    // Each thread stores the same rows of every tile, as many as every other thread: a
    // loop of constant trips, whose shared-memory places the compiler keeps from tile to
    // tile (a bound on the row took a remainder loop and their arithmetic per value).
    // Unrolled whole up to 8 trips (a float16 LayerNorm2d's tile stores took 27
    // instructions a value in a loop of 4, 18 unrolled); wider vectors of rows keep a
    // loop, whose code NVRTC compiles at every such group's first call.
    const int spacing = cudaRowBlock(k_) / tile_;  // rows between a thread's
    TORCH_CHECK(32 * block_ % spacing == 0, "fuser: a tile's rows split unevenly");
    const int trips = 32 * block_ / spacing;
    out_ << "      #pragma unroll" << (trips <= 8 ? "" : " 4")
         << "\n      for (int fx_i = 0; fx_i < " << trips
         << "; ++fx_i) {\n        const int fx_k = threadIdx.x / " << t << " + fx_i * " << spacing
         << ";\n";
    for (size_t o : tiled) {
      const std::string n = std::to_string(o);
      out_ << "        out" << n << "[fx_trow" << n << "[fx_k] + fx_oeo" << n << "_t] = fx_tile"
           << n << "[fx_k * " << t << " + (fx_te ^ ((fx_k / " << b << ") & " << tile_ - 1
           << "))];\n";
    }
    out_ << "      }\n      }\n      __syncthreads();\n";
  }

  // The loop over the block's rows for element fx_e (CPU: a vector loop; CUDA:
  // unrolled): the walk's element values, input I's element read as `at(I)`, each
  // row's accumulators (`in_steps`: a double sum's float step accumulator), and each
  // row's element of the stored outputs. `side`: the rows lie side by side in the
  // stored outputs too (CUDA: the thread's elements go out as one vector, built in
  // fx_ws<O><suffix>); else each row stores at its own offset. `tile_at`: each stored
  // value goes to fx_tile<O> there instead (a tiled walk's).
  void printElementLoop(const RowSchedule::Pass& pass, const std::vector<ExprId>& elements,
                        const std::vector<size_t>& stores, bool side, const std::string& suffix,
                        const std::function<std::string(const std::string&)>& at,
                        bool in_steps = false, const std::string& tile_at = "") {
    std::vector<ExprId> operands;
    for (ExprId r : pass.reduces) operands.push_back(k_.exprs[r].args[0]);
    for (size_t o : stores) operands.push_back(k_.outputs[o].value);
    // CUDA's tiled walk: each tiled output to its tile, the others in vectors.
    const bool vector_stores = cuda_ && side && !stores.empty();
    const bool tiled = !tile_at.empty();
    auto vectorOf = [this](size_t o) {  // a thread's elements of output o, one per row
      return "FxVec<" + std::string(storageTypeName(k_.outputs[o].dtype)) + ", " +
             std::to_string(block_) + ">";
    };
    for (size_t o : stores) {
      if (vector_stores && !(tiled && isTiled(o))) {
        out_ << "      " << vectorOf(o) << " fx_ws" << o << suffix << ";\n";
      }
    }
    if (cuda_) {
      out_ << "      #pragma unroll\n      for (int fx_j = 0; fx_j < " << block_ << "; ++fx_j) {\n";
    } else {
      out_ << "      #pragma omp simd\n      for (int64_t fx_j = 0; fx_j < fx_nb; ++fx_j) {\n";
    }
    bringIn(elements, operands, "        ", /*offsets=*/false);
    auto load = [&](const Expr& e) {
      return loadConversion(k_.inputs[e.index].dtype, e.type, at(std::to_string(e.index)));
    };
    if (cuda_) {
      native16_->print(
          out_, elements, "        ", [&](const Expr& e) { return at(std::to_string(e.index)); },
          load, redo_);
    } else {
      for (size_t id = 0; hold_ && id < holds_.size(); ++id) {
        const ExprId e = static_cast<ExprId>(id);
        if (!heldBefore(e) || !readsHeld(elements, operands, e)) continue;
        out_ << "        const " << computeTypeName(k_.exprs[id].type) << " v" << id << " = "
             << holdAt(e) << ";\n";
      }
      printRowExprs(out_, k_, elements, "        ", load);
      for (ExprId id : elements) {
        if (hold_ && holdsFrom(id) == walk_) {
          out_ << "        " << holdAt(id) << " = v" << id << ";\n";
        }
      }
    }
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const bool stepped = in_steps && sumsInDouble(e);
      const std::string a = stepped ? "float" : accumulatorType(e);
      const std::string acc = (stepped ? "fx_step" : "fx_acc") + std::to_string(r) + "[fx_j]";
      out_ << "        " << acc << " = " << reduceStep(e, a, acc, "v" + std::to_string(e.args[0]))
           << ";\n";
    }
    for (size_t o : stores) {
      const std::string n = std::to_string(o);
      const std::string value =
          cuda_ ? native16_->stored(o, elements)
                : storeConversion(k_.outputs[o].dtype, "v" + std::to_string(k_.outputs[o].value));
      if (tiled && (!cuda_ || isTiled(o))) {
        out_ << "        fx_tile" << n << "[" << tile_at << "] = " << value << ";\n";
      } else if (vector_stores) {
        out_ << "        fx_ws" << n << suffix << ".v[fx_j] = " << value << ";\n";
      } else if (side) {
        out_ << "        out" << n << "[fx_ooff" << n << "[0] + fx_oeo" << n << suffix
             << " + fx_j] = " << value << ";\n";
      } else {
        out_ << "        " << (cuda_ ? "if (fx_j < fx_nb) " : "") << "out" << n
             << "[fx_ooff" << n << "[fx_j] + fx_oeo" << n << suffix << "] = " << value << ";\n";
      }
    }
    out_ << "      }\n";
    for (size_t o : stores) {
      if (!vector_stores || (tiled && isTiled(o))) continue;
      const std::string n = std::to_string(o);
      out_ << "      *(" << vectorOf(o) << "*)(out" << n << " + fx_ooff" << n
           << "[0] + fx_oeo" << n << suffix << ") = fx_ws" << n << suffix << ";\n";
    }
  }

  // Whether the walk's `elements` or `operands` read held value `id`.
  bool readsHeld(const std::vector<ExprId>& elements, const std::vector<ExprId>& operands,
                 ExprId id) const {
    if (std::find(operands.begin(), operands.end(), id) != operands.end()) return true;
    for (ExprId e : elements) {
      const auto& args = k_.exprs[e].args;
      if (std::find(args.begin(), args.end(), id) != args.end()) return true;
    }
    return false;
  }

  const Kernel& k_;
  RowSchedule s_;
  const bool cuda_;
  const int block_;  // rows walked together: a CPU task's block, a CUDA thread's rows
  // CUDA: elements of each row a tile holds (0: no tiles), and the outputs tiled.
  int tile_ = 0;
  std::vector<size_t> tiled_;
  // CUDA: elements a warp walks per step (Kernel::column_blocks).
  int unroll_ = k_.column_blocks >= 4 ? kColumnUnrollAtFourBlocks : kColumnUnroll;
  std::vector<bool> constant_;
  // CPU: the element values held for later walks, their bytes per element in all, and
  // the walk being printed (walk_) and whether it reads and keeps them (hold_).
  std::vector<bool> holds_;
  std::vector<int> slot_;                // per held value, its buffer
  std::vector<std::string> slot_types_;  // per buffer, its values' type
  int64_t hold_bytes_ = 0;
  int walk_ = 0;
  bool hold_ = false;
  std::optional<WalkNative16> native16_;  // CUDA: 16-bit arithmetic in the walks
  std::string redo_;  // CUDA: the tests a step's quick quotients note (none: empty)
  std::ostringstream out_;
};

}  // namespace

int64_t cudaColumnBlocks(int64_t rows, int vector) {
  return cudaColumnThreads(rows, vector) / (32 * kColumnGroups);
}

int64_t cudaColumnThreads(int64_t rows, int vector) {
  const int64_t units = (rows + vector - 1) / vector;
  return (units + 31) / 32 * 32 * kColumnGroups;
}

bool cudaColumnCopiesInput(const TensorInput& input) { return !input.outer_zero_stride; }

int64_t cudaColumnSharedBytes(const std::vector<TensorInput>& inputs, int vector, int64_t n) {
  int64_t bytes = 0;
  for (const TensorInput& in : inputs) {
    if (!cudaColumnCopiesInput(in)) continue;
    bytes += (n * 32 * vector * static_cast<int64_t>(c10::elementSize(in.dtype)) + 15) / 16 * 16;
  }
  return bytes;
}

std::string printColumnKernel(const Kernel& kernel, bool cuda) {
  return ColumnPrinter(kernel, cuda).print();
}

}  // namespace fuser::codegen
