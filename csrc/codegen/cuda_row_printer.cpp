// CUDA row kernels: Kernel::row_lanes threads per row (a warp, or several warps of one
// block), each taking every row_lanes-th element of the row in each pass; a pass's
// partial results meet by warp shuffles, then through shared memory when the row has
// more than one warp. Threads past the last row compute the last row again and store
// nothing, so every thread reaches the block's barriers.
#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cuda_prelude.h"
#include "codegen/expr_printer.h"
#include "codegen/philox.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"
#include "codegen/split_rows.h"
#include "codegen/walk_native16.h"

namespace fuser::codegen {
namespace {

// Threads a block of a row kernel takes at least. Rows held or walked by each block on
// its own take the fewest that still fill a multiprocessor (32 resident blocks of 64 are
// its 2048 threads): a block's registers come free when its own rows are done, not when
// the slowest of eight warps is. H200, float32 layer_norm of 32768 x 1024: 70.0 us in
// blocks of 256, 69.0 in 64 (the kernel 67.8 -> 65.9, torch.compile's 65.7); float16
// softmax of 65536 x 256 22.0 -> 21.5; blocks of 32 (half the threads resident) took
// 25.0 there. Column kernels, slices of rows and column partials keep blocks of 256.
constexpr int kMinRowBlock = 64;
constexpr int kMinBlock = 256;
constexpr int kMinLanes = 8;
// Elements a lane takes per pass when its row is held in registers, at most; and the
// registers (4-byte words) the held values may take, beyond which the kernel walks the
// row in every pass instead.
constexpr int kMaxHeldElements = 32;
constexpr int kMaxHeldWords = 96;
// ... and with column partials, the held values and the running sums together (the
// float32 layer_norm backward's 32 lanes per row of 1024, 160 words, took 237 registers).
constexpr int kMaxHeldAndSummedWords = 128;

const char* kCudaRowHelpers = R"FUSER(
// `v` combined over the L lanes of this thread's row; `part` holds one value per warp
// of the block (L > 32 only).
template <int L, typename T, typename F>
FX_INLINE T fx_row_reduce(T v, F combine, T* part) {
  // Rows of fewer than 32 lanes share a warp: the shuffles stay within each row's lanes.
  for (int o = (L < 32 ? L : 32) / 2; o > 0; o >>= 1) {
    v = combine(v, fx_shfl_xor(v, o));
  }
  if constexpr (L > 32) {
    const int first = (threadIdx.x / L) * (L / 32);
    __syncthreads();
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[first];
    for (int w = 1; w < L / 32; ++w) v = combine(v, part[first + w]);
  }
  return v;
}
)FUSER";

int nonEmpty(int64_t n) { return static_cast<int>(std::max<int64_t>(n, 1)); }

// Registers the values a lane holds take, in 4-byte words (RowSchedule::held).
int heldWordsOf(const Kernel& k, const std::vector<bool>& held) {
  int words = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i]) words += static_cast<int>(c10::elementSize(k.exprs[i].type) + 3) / 4;
  }
  return words * k.row_chunks * k.row_vector;
}

// Inputs, outputs, and a stage kernel's workspace buffers.
int64_t rowPointers(const Kernel& k) {
  int64_t n = static_cast<int64_t>(k.inputs.size() + k.outputs.size());
  if (k.row_stage >= 0) n += static_cast<int64_t>(splitBuffers(k, scheduleRows(k)).size());
  return n;
}

// Tensors whose strides the launch passes: the inputs, and the outputs where they are
// strided (Kernel::strided_outputs).
int64_t stridedTensors(const Kernel& k) {
  return static_cast<int64_t>(k.inputs.size() + (k.strided_outputs ? k.outputs.size() : 0));
}

int countScalars(const Kernel& k, bool doubles) {
  int n = 0;
  for (ScalarArgKind s : k.scalars) n += (s == ScalarArgKind::Double) == doubles;
  return n;
}

}  // namespace

// Column kernels (blocks of 256) ask for 2 resident blocks, which allows a thread 128
// registers: given no minimum, the compiler held a float16 column sum's walk to 80, too
// few for a step's 16 vector loads in flight beside the accumulators (H100, 32768 x
// 1024: 66.7 us; with the minimum 53.7, the copy of its inputs taking 49.2).
void printCudaRowKernelHead(std::ostream& out, const Kernel& k) {
  const int nd = k.outer_ndim + k.inner_ndim;
  out << kCudaPrelude << kCommonPrelude << (drawsRandomNumbers(k) ? kPhiloxPrelude : "")
      << kRowHelpers << kCudaWelfordHelpers << kCudaRowHelpers << "\nstruct FxRowArgs {\n"
      << "  void* ptrs[" << rowPointers(k) << "];\n"
      << "  int64_t sizes[" << nd << "];\n"
      << "  int64_t strides[" << nonEmpty(stridedTensors(k) * nd) << "];\n"
      << "  double dargs[" << nonEmpty(countScalars(k, true)) << "];\n"
      << "  int64_t iargs[" << nonEmpty(rowIntArgs(k)) << "];\n"
      << "  int64_t rows;\n};\n\n"
      << "extern \"C\" __global__ void __launch_bounds__(" << cudaRowBlock(k)
      << (k.columns ? ", " + std::to_string(k.column_blocks) : std::string()) << ") " << k.name
      << "(const FxRowArgs a) {\n"
      << "  const int64_t* fx_sizes = a.sizes;\n"
      << "  const double* fx_dargs = a.dargs;\n  const int64_t* fx_iargs = a.iargs;\n"
      << "  (void)fx_dargs; (void)fx_iargs;\n";
}

namespace {

class CudaRowPrinter {
 public:
  explicit CudaRowPrinter(const Kernel& k) : k_(k), s_(scheduleRows(k)), native16_(k) {
    TORCH_CHECK(k.row_lanes >= 1 && k.row_lanes <= 1024 && (k.row_lanes & (k.row_lanes - 1)) == 0,
                "fuser: row lanes must be a power of two up to 1024");
  }

  std::string print() {
    const int block = cudaRowBlock(k_);
    printCudaRowKernelHead(out_, k_);
    if (k_.row_lanes > 32) {
      // fx_partd also holds Welford triples (laneCombine).
      out_ << "  __shared__ float fx_partf[" << block / 32 << "];\n"
           << "  __shared__ double fx_partd[" << 3 * block / 32 << "];\n";
    }
    printRowPointers(out_, k_, "a.ptrs", "a.strides");
    printExprs(s_.constants, "  ", "0");
    if (k_.row_stage >= 0) {
      printStage();
      out_ << "}\n";
      return out_.str();
    }
    const int lanes = k_.row_lanes;
    if (hasColumnPartials(k_)) {
      printColumnPartialRows();
      out_ << "}\n";
      return out_.str();
    }
    out_ << "  const int fx_lane = threadIdx.x % " << lanes << ";\n"
         << "  int64_t fx_r = (int64_t)blockIdx.x * " << block / lanes << " + threadIdx.x / "
         << lanes << ";\n"
         << "  const bool fx_live = fx_r < a.rows;\n"
         << "  if (!fx_live) fx_r = a.rows - 1;\n";
    printRowOffsets(out_, k_, "  ");
    printExprs(s_.row_start, "  ", "0");
    if (k_.row_chunks > 0 && heldWords(s_.held) <= kMaxHeldWords) {
      printHeldRow();
      out_ << "}\n";
      return out_.str();
    }
    // Rows too long to hold: every pass walks the whole row, as a stage walks its slice.
    out_ << "  const int64_t fx_lo = 0, fx_hi = fx_n;\n";
    for (const RowSchedule::Pass& pass : s_.passes) printPass(pass);
    out_ << "  if (!fx_live) return;\n";
    printRowStores();
    printRowWalk(s_.final_element, {}, /*store=*/true);
    out_ << "}\n";
    return out_.str();
  }

 private:
  // Column partials (TensorOutput::column_partial): the block walks rows blockIdx.x,
  // blockIdx.x + gridDim.x, ... (each a block's worth of rows), every lane keeping, per
  // element it holds, running sums of the partial outputs' values over its rows (the
  // same columns in every row). The rows of a block then combine their sums through
  // shared memory, and the block stores one row of partials per output.
  void printColumnPartialRows() {
    TORCH_CHECK(k_.row_chunks > 0 && heldWords(s_.held) <= kMaxHeldWords,
                "fuser: column partials need rows held in registers");
    for (const TensorOutput& o : k_.outputs) {
      TORCH_CHECK(!o.column_partial || (!o.per_row && k_.exprs[o.value].type == c10::ScalarType::Float),
                  "fuser: column partials sum float values of every element");
    }
    const int lanes = k_.row_lanes, block = cudaRowBlock(k_);
    const int held = k_.row_chunks * k_.row_vector;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].column_partial) continue;
      out_ << "  float fx_cp" << o << "[" << held << "] = {};\n";
    }
    out_ << "  const int fx_lane = threadIdx.x % " << lanes << ";\n"
         << "  for (int64_t fx_first = (int64_t)blockIdx.x * " << block / lanes
         << "; fx_first < a.rows; fx_first += (int64_t)gridDim.x * " << block / lanes << ") {\n"
         << "  int64_t fx_r = fx_first + threadIdx.x / " << lanes << ";\n"
         << "  const bool fx_live = fx_r < a.rows;\n"
         << "  if (!fx_live) fx_r = a.rows - 1;\n";
    printRowOffsets(out_, k_, "  ");
    printExprs(s_.row_start, "  ", "0");
    printHeldRow();
    out_ << "  }\n";
    // The rows of the block (block / lanes of them) add up their lanes' sums column by
    // column in shared memory, one output after another.
    const int rows = block / lanes;
    if (rows > 1) out_ << "  __shared__ float fx_colsum[" << block * held << "];\n";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!k_.outputs[o].column_partial) continue;
      const std::string n = std::to_string(o);
      const std::string into = "out" + n + "[(int64_t)blockIdx.x * fx_n + fx_b + fx_u]";
      if (rows == 1) {
        out_ << "  #pragma unroll\n  for (int fx_c = 0; fx_c < " << k_.row_chunks << "; ++fx_c) {\n"
             << "    const int64_t fx_b = " << chunkStart() << ";\n"
             << "    if (fx_b < fx_n) {\n"
             << "      #pragma unroll\n      for (int fx_u = 0; fx_u < " << k_.row_vector
             << "; ++fx_u) " << into << " = fx_cp" << n << "[fx_c * " << k_.row_vector
             << " + fx_u];\n    }\n  }\n";
        continue;
      }
      // Slot (row of the block, element held) of this thread's sums; then thread t of
      // the block adds up, over the block's rows, the held elements t, t + block, ...
      // of the first row's lanes, which are those of every row.
      out_ << "  __syncthreads();\n"
           << "  #pragma unroll\n  for (int fx_h = 0; fx_h < " << held << "; ++fx_h) {\n"
           << "    fx_colsum[(threadIdx.x / " << lanes << ") * " << lanes * held << " + fx_lane * "
           << held << " + fx_h] = fx_cp" << n << "[fx_h];\n  }\n"
           << "  __syncthreads();\n"
           << "  for (int fx_i = threadIdx.x; fx_i < " << lanes * held << "; fx_i += " << block
           << ") {\n"
           << "    float fx_t = 0.f;\n"
           << "    #pragma unroll\n    for (int fx_g = 0; fx_g < " << rows
           << "; ++fx_g) fx_t += fx_colsum[fx_g * " << lanes * held << " + fx_i];\n"
           << "    const int fx_l = fx_i / " << held << ", fx_h = fx_i % " << held << ";\n"
           << "    const int fx_c = fx_h / " << k_.row_vector << ", fx_u = fx_h % " << k_.row_vector
           << ";\n"
           << "    const int64_t fx_b = ((int64_t)fx_c * " << lanes << " + fx_l) * " << k_.row_vector
           << ";\n"
           << "    if (fx_b < fx_n) " << into << " = fx_t;\n  }\n";
    }
  }

  // A stage of rows cut in slices (split_rows.h): unit fx_u is one slice of one row,
  // row_lanes threads per unit; threads past the last unit compute the last one again
  // and store nothing.
  void printStage() {
    const int lanes = k_.row_lanes;
    const int passes = static_cast<int>(s_.passes.size());
    printSplitBufferPointers(out_, k_, s_, "a.ptrs");
    out_ << "  const int fx_lane = threadIdx.x % " << lanes << ";\n"
         << "  int64_t fx_u = (int64_t)blockIdx.x * " << cudaRowBlock(k_) / lanes
         << " + threadIdx.x / " << lanes << ";\n"
         << "  const bool fx_live = fx_u < a.rows;\n"
         << "  if (!fx_live) fx_u = a.rows - 1;\n";
    printSplitUnit(out_, k_, s_, "  ");
    printRowOffsets(out_, k_, "  ");
    printExprs(s_.row_start, "  ", "0");
    // The lanes share the walk over the partials (a whole-tensor mean's last stage
    // reads 528 of them on the H100).
    const LaneSpread spread{"fx_lane", lanes, [&](const Expr& e, const std::string& acc,
                                                   const std::string& value) {
                              return laneCombine(e, acc, value);
                            }};
    printFinishedPasses(out_, k_, s_, "  ", "fx_live && fx_s == 0 && fx_lane == 0", &spread);
    if (k_.row_stage < passes) {
      printPass(s_.passes[k_.row_stage]);
      // The lanes' combined accumulators, as the next stage combines them.
      printPartialStores(out_, k_, s_, "  ", "fx_live && fx_lane == 0",
                         [](ExprId r) { return "fx_tot" + std::to_string(r); });
      return;
    }
    out_ << "  if (!fx_live) return;\n";
    if (std::any_of(k_.outputs.begin(), k_.outputs.end(),
                    [](const TensorOutput& o) { return o.per_row; })) {
      out_ << "  if (fx_s == 0 && fx_lane == 0) {\n";
      printPerRowStores(out_, k_, "    ");
      out_ << "  }\n";
    }
    printRowWalk(s_.final_element, {}, /*store=*/true);
  }

  // A loop over elements [fx_lo, fx_hi) of the row (a stage's slice, or a whole row
  // too long to hold): `ids` per element, the `reduces` accumulated, the whole outputs
  // stored. Rows of vectors (Kernel::row_vector > 1: every contiguous input aligned,
  // slices of whole vectors) load each contiguous input as one vector per lane and
  // step, and store outputs as vectors: a walk of one element per lane and step kept
  // too few bytes in flight.
  void printRowWalk(const std::vector<ExprId>& ids, const std::vector<ExprId>& reduces,
                      bool store) {
    const int v = k_.row_vector, lanes = k_.row_lanes;
    auto accumulate = [&](const std::string& indent) {
      for (ExprId r : reduces) {
        const Expr& e = k_.exprs[r];
        const std::string a = accumulatorType(e, /*walked=*/true);
        out_ << indent << "fx_acc" << r << " = "
             << reduceStep(e, a, "fx_acc" + std::to_string(r), "v" + std::to_string(e.args[0]))
             << ";\n";
      }
    };
    if (v == 1) {
      out_ << "  for (int64_t fx_e = fx_lo + fx_lane; fx_e < fx_hi; fx_e += " << lanes << ") {\n";
      native16_.print(
          out_, ids, "    ", [&](const Expr& e) { return rowLoadElement(k_, e, "fx_e"); },
          [&](const Expr& e) { return rowLoad(k_, e, "fx_e"); });
      accumulate("    ");
      for (size_t o = 0; store && o < k_.outputs.size(); ++o) {
        if (k_.outputs[o].per_row) continue;
        out_ << "    " << outputElement(k_, o, "fx_e") << " = " << native16_.stored(o, ids)
             << ";\n";
      }
      out_ << "  }\n";
      return;
    }
    // Two vectors a lane: the second's loads go out before the first's arithmetic. A
    // walk has one load in flight per lane otherwise, too few where rows are cut in
    // slices (H100, GroupNorm + SiLU at batch 1, [1, 256, 128, 128] float32: 23.7 us of
    // device time, 19.8 unrolled by 2, 20.7 by 4; softmax over long float16 rows 22.0 ->
    // 13.9, GroupNorm + SiLU at batch 32 in float16 96.6 -> 92.3, a whole-tensor mean
    // unchanged).
    out_ << "  #pragma unroll 2\n";
    out_ << "  for (int64_t fx_b = fx_lo + (int64_t)fx_lane * " << v << "; fx_b < fx_hi; fx_b += "
         << lanes * v << ") {\n";
    std::vector<bool> vector_input(k_.inputs.size(), false);
    for (ExprId id : ids) {
      const Expr& e = k_.exprs[id];
      if (e.op != IrOp::Load || !k_.inputs[e.index].inner_unit_stride) continue;
      if (vector_input[e.index]) continue;
      vector_input[e.index] = true;
      const std::string n = std::to_string(e.index);
      const std::string vec = "FxVec<" + std::string(storageTypeName(k_.inputs[e.index].dtype)) +
                              ", " + std::to_string(v) + ">";
      out_ << "    const " << vec << " fx_w" << n << " = *(const " << vec << "*)(in" << n
           << " + off" << n << " + fx_b);\n";
    }
    // (A row stored apart, TensorOutput::rows_apart, takes its elements one by one.)
    for (size_t o = 0; store && o < k_.outputs.size(); ++o) {
      if (k_.outputs[o].per_row || k_.outputs[o].rows_apart) continue;
      out_ << "    FxVec<" << storageTypeName(k_.outputs[o].dtype) << ", " << v << "> fx_o" << o
           << ";\n";
    }
    std::vector<bool> loaded(k_.inputs.size(), false);
    for (ExprId id : ids) {
      if (k_.exprs[id].op == IrOp::Load) loaded[k_.exprs[id].index] = true;
    }
    const std::vector<bool> based = printVectorBases(loaded, vector_input, "    ");
    out_ << "    #pragma unroll\n    for (int fx_u = 0; fx_u < " << v << "; ++fx_u) {\n";
    native16_.print(
        out_, ids, "      ", [&](const Expr& e) { return vectorRaw(e, vector_input, based); },
        [&](const Expr& e) { return vectorElement(e, vector_input, based); });
    accumulate("      ");
    for (size_t o = 0; store && o < k_.outputs.size(); ++o) {
      const TensorOutput& output = k_.outputs[o];
      if (output.per_row) continue;
      const std::string value = native16_.stored(o, ids);
      if (output.rows_apart) {
        out_ << "      " << outputElement(k_, o, "fx_b + fx_u") << " = " << value << ";\n";
      } else {
        out_ << "      fx_o" << o << ".v[fx_u] = " << value << ";\n";
      }
    }
    out_ << "    }\n";
    for (size_t o = 0; store && o < k_.outputs.size(); ++o) {
      if (k_.outputs[o].per_row || k_.outputs[o].rows_apart) continue;
      const std::string vec = "FxVec<" + std::string(storageTypeName(k_.outputs[o].dtype)) +
                              ", " + std::to_string(v) + ">";
      out_ << "    *(" << vec << "*)(out" << o << " + " << outputRowStart(k_, o) << " + fx_b) = fx_o"
           << o << ";\n";
    }
    out_ << "  }\n";
  }

  // What a lane accumulates reduction `e` in. A float sum walked along a row (or a
  // slice) in double: a lane may add tens of thousands of elements (in float, a whole-row
  // mean of 2^26 floats came 7e-6 away from eager's). Softmax's sum of exponentials and
  // the values a lane holds in registers, a few dozen, in their own type.
  static std::string accumulatorType(const Expr& e, bool walked) {
    if (isWelford(e)) return welfordTypeName(e);
    return walked && sumsInDouble(e) ? "double" : computeTypeName(e.type);
  }

  // One pass over the row (a stage: over its slice), its reductions combined over the
  // lanes; whole rows then compute what the reductions let them.
  void printPass(const RowSchedule::Pass& pass) {
    const bool stage = k_.row_stage >= 0;
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "  " << accumulatorType(e, /*walked=*/true) << " fx_acc" << r << " = "
           << reduceIdentity(e) << ";\n";
    }
    printRowWalk(pass.element, pass.reduces, /*store=*/false);
    printRowReduces(pass, !stage, /*walked=*/true);
  }

  // `value` (of accumulator type `acc`) combined over the row's lanes.
  std::string laneCombine(const Expr& e, const std::string& acc, const std::string& value) const {
    // The block's per-warp partials: 4-byte types in fx_partf, 8-byte ones (double,
    // an int64 sum) and Welford triples in fx_partd.
    const bool four_bytes = !isWelford(e) && acc != "double" && c10::elementSize(e.type) == 4;
    const std::string part = four_bytes ? "fx_partf" : "fx_partd";
    return "fx_row_reduce<" + std::to_string(k_.row_lanes) + ">(" + value + ", [](" + acc +
           " x, " + acc + " y) { return " + reduceCombiner(e) + "<" + acc + ">(x, y); }, (" + acc +
           "*)" + (k_.row_lanes > 32 ? part : "nullptr") + ")";
  }

  // The lanes' partial results of the pass's reductions combined; then what they let the
  // row compute.
  void printRowReduces(const RowSchedule::Pass& pass, bool then_after = true,
                       bool walked = false) {
    for (ExprId r : pass.reduces) {
      const Expr& e = k_.exprs[r];
      const char* t = computeTypeName(e.type);
      const std::string a = accumulatorType(e, walked);
      out_ << "  const " << a << " fx_tot" << r << " = "
           << laneCombine(e, a, "fx_acc" + std::to_string(r)) << ";\n"
           << "  const " << t << " v" << r << " = (" << t << ")fx_tot" << r << ";\n";
    }
    if (then_after) printExprs(pass.after, "  ", "0");
  }

  void printRowStores() {
    if (std::none_of(k_.outputs.begin(), k_.outputs.end(),
                     [](const TensorOutput& o) { return o.per_row; })) {
      return;
    }
    out_ << "  if (fx_lane == 0) {\n";
    printPerRowStores(out_, k_, "    ");
    out_ << "  }\n";
  }

  // ---- Rows held in registers (Kernel::row_chunks > 0) ------------------------------
  // Each loop of the schedule computes its element values once (RowSchedule::held); a
  // value a later loop reads stays in registers, fx_held<id>[c * vector + u] for element
  // fx_b + u of the lane's chunk c, fx_b = (c * lanes + lane) * vector. Loads happen in
  // in the first loop that reads them, as vectors.

  // Registers the held values take per lane, in 4-byte words.
  int heldWords(const std::vector<bool>& held) const { return heldWordsOf(k_, held); }

  std::string chunkStart() const {
    return "((int64_t)fx_c * " + std::to_string(k_.row_lanes) + " + fx_lane) * " +
           std::to_string(k_.row_vector);
  }

  std::string heldSlot(ExprId id) const {
    return "fx_held" + std::to_string(id) + "[fx_c * " + std::to_string(k_.row_vector) +
           " + fx_u]";
  }

  void printHeldRow() {
    const std::vector<bool>& held = s_.held;
    for (size_t i = 0; i < held.size(); ++i) {
      if (!held[i]) continue;
      out_ << "  " << computeTypeName(k_.exprs[i].type) << " fx_held" << i << "["
           << k_.row_chunks * k_.row_vector << "];\n";
    }
    const int passes = static_cast<int>(s_.passes.size());
    // With column partials the rows are a loop's iterations (printColumnPartialRows).
    const char* leave = hasColumnPartials(k_) ? "continue" : "return";
    for (int l = 0; l <= passes; ++l) {
      if (l == passes) out_ << "  if (!fx_live) " << leave << ";\n";
      if (l == passes) printRowStores();
      printHeldLoop(l, held);
      if (l < passes) printRowReduces(s_.passes[l]);
    }
  }

  void printHeldLoop(int l, const std::vector<bool>& held) {
    const int passes = static_cast<int>(s_.passes.size());
    const int v = k_.row_vector;
    const std::vector<ExprId> none;
    const std::vector<ExprId>& reduces = l < passes ? s_.passes[l].reduces : none;
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "  " << accumulatorType(e, /*walked=*/false) << " fx_acc" << r << " = "
           << reduceIdentity(e) << ";\n";
    }
    out_ << "  #pragma unroll\n"
         << "  for (int fx_c = 0; fx_c < " << k_.row_chunks << "; ++fx_c) {\n"
         << "    const int64_t fx_b = " << chunkStart() << ";\n"
         << "    if (fx_b < fx_n) {\n";
    // The loads of this loop, each input as one vector per chunk where it is contiguous.
    std::vector<bool> vector_input(k_.inputs.size(), false);
    if (v > 1) {
      for (size_t i = 0; i < k_.exprs.size(); ++i) {
        const Expr& e = k_.exprs[i];
        if (e.op != IrOp::Load || !s_.used[i] || !s_.element[i] || s_.loop[i] != l) continue;
        const TensorInput& in = k_.inputs[e.index];
        if (!in.inner_unit_stride || vector_input[e.index]) continue;
        vector_input[e.index] = true;
        const std::string n = std::to_string(e.index);
        const std::string vec = "FxVec<" + std::string(storageTypeName(in.dtype)) + ", " +
                                std::to_string(v) + ">";
        out_ << "    const " << vec << " fx_w" << n << " = *(const " << vec << "*)(in" << n
             << " + off" << n << " + fx_b);\n";
      }
    }
    std::vector<bool> loaded(k_.inputs.size(), false);
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op == IrOp::Load && s_.used[i] && s_.element[i] && s_.loop[i] == l) loaded[e.index] = true;
    }
    const std::vector<bool> based = printVectorBases(loaded, vector_input, "    ");
    std::vector<bool> outputs_here(k_.outputs.size(), false);
    std::vector<bool> partials_here(k_.outputs.size(), false);
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (k_.outputs[o].per_row || s_.storeLoop(k_, o) != l) continue;
      if (k_.outputs[o].column_partial) {
        partials_here[o] = true;
        continue;
      }
      outputs_here[o] = true;
      if (k_.outputs[o].rows_apart) continue;  // stored element by element
      out_ << "    FxVec<" << storageTypeName(k_.outputs[o].dtype) << ", " << v << "> fx_o" << o
           << ";\n";
    }
    // The random draws of this loop: the chunk's Philox blocks once (codegen/philox.h),
    // the chunk starting at a multiple of v in the iteration space.
    std::vector<bool> blocked(k_.exprs.size(), false);
    const int blocks = std::max(1, v / 4);
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op != IrOp::PhiloxUniform || !s_.used[i] || !s_.element[i] || s_.loop[i] != l) continue;
      blocked[i] = true;
      const std::string words = "fx_rw" + std::to_string(i);
      out_ << "    uint32_t " << words << "[" << blocks << "][4];\n"
           << "    #pragma unroll\n    for (int fx_q = 0; fx_q < " << blocks
           << "; ++fx_q) fx_philox_block((uint64_t)v" << e.args[0] << ", (uint64_t)v" << e.args[1]
           << ", ((uint64_t)(fx_r * fx_n + fx_b) >> 2) + fx_q, " << words << "[fx_q]);\n";
    }
    auto draw = [&](ExprId id) {
      const std::string words = "fx_rw" + std::to_string(id);
      if (v >= 4) return "fx_philox_to_uniform(" + words + "[fx_u >> 2][fx_u & 3])";
      return "fx_philox_to_uniform(fx_philox_pick(" + words +
             "[0], ((uint32_t)(fx_r * fx_n + fx_b) & 3) + (uint32_t)fx_u))";
    };
    out_ << "    #pragma unroll\n    for (int fx_u = 0; fx_u < " << v << "; ++fx_u) {\n";
    const std::vector<bool> read = s_.readsIn(k_, l);
    for (size_t i = 0; i < read.size(); ++i) {
      if (!read[i]) continue;
      out_ << "      const " << computeTypeName(k_.exprs[i].type) << " v" << i << " = "
           << heldSlot(static_cast<ExprId>(i)) << ";\n";
    }
    auto load = [&](const Expr& e) { return vectorElement(e, vector_input, based); };
    std::vector<ExprId> ids;  // this loop's, in order
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (s_.used[i] && s_.element[i] && s_.loop[i] == l) ids.push_back(static_cast<ExprId>(i));
    }
    // Random draws print in float (a dropout's mask is no 16-bit op).
    const bool native = std::find(blocked.begin(), blocked.end(), true) == blocked.end();
    if (native) {
      native16_.print(
          out_, ids, "      ", [&](const Expr& e) { return vectorRaw(e, vector_input, based); },
          load);
    } else {
      for (ExprId id : ids) {
        const Expr& e = k_.exprs[id];
        out_ << "      const " << computeTypeName(e.type) << " v" << id << " = "
             << (blocked[id] ? draw(id) : formatExpr(k_, e, load)) << ";\n";
      }
    }
    for (ExprId id : ids) {
      if (held[id]) out_ << "      " << heldSlot(id) << " = v" << id << ";\n";
    }
    for (ExprId r : reduces) {
      const Expr& e = k_.exprs[r];
      out_ << "      fx_acc" << r << " = "
           << reduceStep(e, accumulatorType(e, /*walked=*/false), "fx_acc" + std::to_string(r),
                         "v" + std::to_string(e.args[0]))
           << ";\n";
    }
    // Before the last loop, threads past the last row compute but do not store.
    const std::string guard = l < passes ? "if (fx_live) " : "";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!outputs_here[o]) continue;
      const std::string value =
          native ? native16_.stored(o, ids)
                 : storeConversion(k_.outputs[o].dtype, "v" + std::to_string(k_.outputs[o].value));
      if (k_.outputs[o].rows_apart) {
        out_ << "      " << guard << outputElement(k_, o, "fx_b + fx_u") << " = " << value << ";\n";
      } else {
        out_ << "      fx_o" << o << ".v[fx_u] = " << value << ";\n";
      }
    }
    // Rows past the last (computed again) add nothing. A 16-bit value adds as stored
    // (rounded), as eager's sum reads it.
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!partials_here[o]) continue;
      const c10::ScalarType t = k_.outputs[o].dtype;
      const std::string value = "v" + std::to_string(k_.outputs[o].value);
      out_ << "      if (fx_live) fx_cp" << o << "[fx_c * " << v << " + fx_u] += "
           << loadConversion(t, c10::ScalarType::Float, storeConversion(t, value)) << ";\n";
    }
    out_ << "    }\n";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!outputs_here[o] || k_.outputs[o].rows_apart) continue;
      out_ << "    " << guard << "*(FxVec<" << storageTypeName(k_.outputs[o].dtype) << ", " << v << ">*)(out"
           << o << " + " << outputRowStart(k_, o) << " + fx_b) = fx_o" << o << ";\n";
    }
    out_ << "    }\n  }\n";
  }

  // The first element's offset of the vector at fx_b, per strided input `loaded` in
  // this loop (not read as a vector), where the vector's elements share all but their
  // last-dim index (Kernel::row_vector_in_last_dim): one fx_row_offset per vector, not
  // per element (group_norm's per-channel weight and bias, whose divisions made a
  // batch-32 GroupNorm issue-bound). Returns which inputs have one.
  std::vector<bool> printVectorBases(const std::vector<bool>& loaded,
                                     const std::vector<bool>& vector_input,
                                     const std::string& indent) {
    std::vector<bool> based(k_.inputs.size(), false);
    if (!k_.row_vector_in_last_dim || k_.row_vector == 1 || k_.inner_ndim < 2) return based;
    const std::string outer = std::to_string(k_.outer_ndim);
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!loaded[i] || vector_input[i] || in.inner_unit_stride || in.inner_zero_stride) continue;
      based[i] = true;
      const std::string n = std::to_string(i);
      out_ << indent << "const int64_t fx_vb" << n << " = off" << n << " + fx_row_offset(fx_b, fx_sizes + "
           << outer << ", st" << n << " + " << outer << ", " << k_.inner_ndim << ");\n";
    }
    return based;
  }

  // Load `e` at element fx_u of the vector at fx_b: from the input's vector fx_wN where
  // it was read as one, from its base (printVectorBases), else at its own offset.
  std::string vectorElement(const Expr& e, const std::vector<bool>& vector_input,
                            const std::vector<bool>& based) const {
    if (e.op != IrOp::Load) return rowLoad(k_, e, "(fx_b + fx_u)");
    return loadConversion(k_.inputs[e.index].dtype, e.type, vectorRaw(e, vector_input, based));
  }

  // The element vectorElement reads, in its storage type (a load of a tensor).
  std::string vectorRaw(const Expr& e, const std::vector<bool>& vector_input,
                        const std::vector<bool>& based) const {
    const TensorInput& in = k_.inputs[e.index];
    const std::string n = std::to_string(e.index);
    if (vector_input[e.index]) return "fx_w" + n + ".v[fx_u]";
    if (!based[e.index]) return rowLoadElement(k_, e, "(fx_b + fx_u)");
    std::string at = "fx_vb" + n;
    if (!in.row_last_zero_stride) {
      at += " + fx_u * st" + n + "[" + std::to_string(k_.outer_ndim + k_.inner_ndim - 1) + "]";
    }
    return "in" + n + "[" + at + "]";
  }

  void printExprs(const std::vector<ExprId>& ids, const std::string& indent,
                  const std::string& element) {
    printRowExprs(out_, k_, ids, indent, element);
  }

  const Kernel& k_;
  RowSchedule s_;
  WalkNative16 native16_;  // 16-bit arithmetic in the walks
  std::ostringstream out_;
};

}  // namespace

int cudaRowBlock(const Kernel& kernel) {
  const bool own_rows = !kernel.columns && kernel.row_stage < 0 && !hasColumnPartials(kernel);
  return std::max(own_rows ? kMinRowBlock : kMinBlock, kernel.row_lanes);
}

bool cudaColumnPartialsFit(const Kernel& kernel, int sums) {
  return heldWordsOf(kernel, scheduleRows(kernel).held) +
             sums * kernel.row_chunks * kernel.row_vector <=
         kMaxHeldAndSummedWords;
}

bool cudaRowsHeld(const Kernel& kernel) {
  if (kernel.row_chunks == 0 || kernel.row_stage >= 0 || kernel.columns) return false;
  return heldWordsOf(kernel, scheduleRows(kernel).held) <= kMaxHeldWords;
}

bool hasColumnPartials(const Kernel& kernel) {
  return std::any_of(kernel.outputs.begin(), kernel.outputs.end(),
                     [](const TensorOutput& o) { return o.column_partial; });
}

int64_t cudaColumnPartialBlocks(int64_t rows_per_block, int64_t rows, int64_t resident) {
  const int64_t blocks = (std::max<int64_t>(rows, 1) + rows_per_block - 1) / rows_per_block;
  return std::min<int64_t>(blocks, std::max<int64_t>(resident, 1));
}

int64_t cudaRowArgWords(const Kernel& k) {
  const int64_t nd = k.outer_ndim + k.inner_ndim;
  return rowPointers(k) + nd + nonEmpty(stridedTensors(k) * nd) +
         nonEmpty(countScalars(k, true)) + nonEmpty(rowIntArgs(k)) + 1;
}

CudaRowShape cudaRowShape(int64_t n, int widest_element_bytes, bool aligned) {
  return cudaRowShapeWithLanes(n, widest_element_bytes, aligned, 0);
}

std::vector<CudaRowShape> cudaRowShapeCandidates(int64_t n, int widest_element_bytes,
                                                 bool aligned) {
  const CudaRowShape chosen = cudaRowShape(n, widest_element_bytes, aligned);
  std::vector<CudaRowShape> out = {chosen};
  for (int lanes : {chosen.lanes / 2, chosen.lanes * 2, chosen.lanes * 4}) {
    // More lanes than the row has vectors would leave lanes idle in every pass.
    if (lanes < kMinLanes || lanes > 1024 || int64_t{lanes} * chosen.vector > std::max<int64_t>(n, 1)) {
      continue;
    }
    out.push_back(cudaRowShapeWithLanes(n, widest_element_bytes, aligned, lanes));
  }
  return out;
}

CudaRowShape cudaRowShapeWithLanes(int64_t n, int widest_element_bytes, bool aligned,
                                   int lanes) {
  CudaRowShape shape;
  // Some 64 bytes of the widest input per lane (16 floats, 32 halves): enough bytes in
  // flight per thread, few enough registers, and rows of up to 1024 halves in one warp,
  // whose reductions need no barrier (an H100 float16 layer_norm of 1024 took 62 us with
  // two warps per row, 51 with one). Rows of under 256 elements share a warp, at least
  // 8 elements a lane (float16 softmax rows of 256 took 35 us at 32 lanes, 40 at 8).
  const int per_lane = std::max(8, 64 / std::max(widest_element_bytes, 1));
  shape.lanes = kMinLanes;
  while (shape.lanes < 32 && n > 8 * shape.lanes) shape.lanes *= 2;
  while (shape.lanes < 1024 && n > per_lane * shape.lanes) shape.lanes *= 2;
  if (lanes > 0) shape.lanes = lanes;
  if (aligned) {
    const int widest = std::max(widest_element_bytes, 2);
    shape.vector = std::min(8, 16 / widest);
    while (shape.vector > 1 && n % shape.vector != 0) shape.vector /= 2;
  }
  const int64_t chunks = (n + int64_t{shape.lanes} * shape.vector - 1) / (shape.lanes * shape.vector);
  if (chunks * shape.vector <= kMaxHeldElements) shape.chunks = static_cast<int>(chunks);
  return shape;
}

CudaRowShape cudaColumnShape(int widest_element_bytes) {
  CudaRowShape shape;
  shape.lanes = 1;
  shape.vector = std::max(1, std::min(8, 16 / std::max(widest_element_bytes, 1)));
  shape.columns = true;
  return shape;
}

std::vector<CudaRowShape> cudaColumnShapeCandidates(int widest_element_bytes) {
  std::vector<CudaRowShape> shapes = {cudaColumnShape(widest_element_bytes)};
  while (shapes.size() < 3 && shapes.back().vector > 1) {
    shapes.push_back(shapes.back());
    shapes.back().vector /= 2;
  }
  return shapes;
}

CudaRowShape cudaColumnInSharedShape(int widest_element_bytes, int blocks) {
  CudaRowShape shape = cudaColumnShape(widest_element_bytes);
  shape.vector = std::max(1, 4 / std::max(widest_element_bytes, 1));
  shape.in_shared = true;
  shape.column_blocks = blocks;
  return shape;
}

std::string printCudaRowKernel(const Kernel& kernel) {
  return kernel.columns ? printColumnKernel(kernel, /*cuda=*/true) : CudaRowPrinter(kernel).print();
}

}  // namespace fuser::codegen
