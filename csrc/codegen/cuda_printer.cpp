// CUDA printer. Flat kernels move `cudaVectorWidth` elements per thread and iteration
// with one aligned access per tensor, then finish the tail element by element;
// strided kernels walk rows of the innermost dimension when it is long, a block per
// tile of a row and rows blockIdx.y, + gridDim.y, ... (up to four vector accesses per
// tensor and thread when the rows are dense and aligned, else one element), or as flat
// vectors that may cross from row to row when the outputs are dense
// (printStraddlingVectors), else recover each element's multi-index with div/mod; in
// 32 bits when every offset fits.
// Inputs with equal strides share their offsets. The launch's `vectors` argument
// (cudaLaunchShape) picks vectors or elements at run time. A kernel compiled for one
// shape (Kernel::fixed) has its sizes and strides written in as constants. Kernels with
// a transpose_tile walk the two innermost dims in square tiles of that side, staging
// their transposed inputs through shared memory.
#include "codegen/cuda_printer.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "codegen/common_prelude.h"
#include "codegen/cuda_prelude.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"
#include "codegen/native16.h"
#include "codegen/philox.h"

namespace fuser::codegen {
namespace {

// Shortest innermost dimension walked row by row; below it most threads would idle.
constexpr int kRowPathMinInner = 128;

// Most vectors a thread moves per tensor and row tile, all loaded before any math: rows
// that stream a single tensor (x + bias) need several in flight to reach the copy
// bandwidth. gelu(x + bias) over 8192 x 8192 floats on the H100, in a harness timing
// the kernel alone: 189.9 us with one, 183.4 with two, 180.8 with four; in the
// benchmark, two measured 182.9 us and four 182.8. Half precision rows were measured
// with two only. Rows of 4-byte elements take kFloatRowVectors instead (the H200's
// measure, with blocks of their own size) where floatRowKernel says; 8-byte ones and
// the other float rows keep four.
constexpr int kRowUnrollWide = 4;
constexpr int kRowUnrollHalf = 2;

// A thread holds each vector it loads or stores in 4 registers until the tile's math is
// done. Row kernels that would hold more than kMaxVectorsPerStep with one vector per
// tensor go element-wise (flat ones keep their vectors, in blocks of 256): an LSTM
// cell's kernel (17 tensors read, 2 written) held 80 registers with one vector each;
// element-wise it holds 32, and with four times the warps per SM it ran faster on the
// H100 (with two vectors each it took 218 registers and ran 35% slower). Rows unroll
// only while the thread holds at most kMaxVectorsHeld.
constexpr int kMaxVectorsPerStep = 8;
constexpr int kMaxVectorsHeld = 12;

// Most blocks per SM a row-walking kernel is launched with, each then walking several
// rows; vector rows of 4-byte or wider elements get one block per tile instead.
constexpr int kRowBlocksPerSm = 64;

// Row kernels take vectors only when that leaves this many threads per SM; below it
// one element per thread finishes sooner (more warps to hide each load's latency).
constexpr int kMinVectorThreadsPerSm = 128;

int storageBytes(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }


// Elements of padding per tile row, so that a row is an odd number of 4-byte words and
// the column-wise reads (one row per lane) fall into distinct shared-memory banks.
int tilePadding(c10::ScalarType t) {
  const int bytes = storageBytes(t);
  return bytes >= 4 ? 1 : 4 / bytes;
}

// Threads per block of flat kernels that move 16 bytes per tensor and thread. On the
// H100, (x*y+1).relu().sigmoid() over 2^26 halves took 134.3 us in blocks of 1024,
// 135.0 in 512 and 135.3 in 256 (bfloat16 134.5 / 134.8 / 135.2; floats read as
// 16-byte vectors 265.3 / 266.3 / 266.7; as 8-byte pairs, 263.0 in blocks of 256,
// 265.1 in 512, 271.6 in 1024). The H200 takes floats as 16-byte vectors in blocks of
// 1024 too (cudaVectorWidth).
constexpr int kWideVectorBlockSize = 1024;

// Rows of 4-byte elements moved as 16-byte vectors (floatRowKernel): blocks of
// kFloatRowBlockSize threads, each taking kFloatRowVectors vectors per tensor and tile,
// as torch.compile's kernels do (128 threads of 8 elements), where the math is heavy
// (kFloatRowHeavyCostPerByte) or a thread could not hold four vectors per input anyway.
// On the H200, kernel us, blocks of 256 with up to four vectors before -> after
// (torch.compile): over 8192 x 8192, gelu(x + bias) 136.7 -> 127.3 (126.9),
// (x - mean) * rstd * w + b (two vectors before too) 130.2 -> 128.9 (127.3); over
// 32x256x64x64, batch_norm + relu 66.7 -> 65.0 (64.5). Light rows that hold four keep
// them in blocks of 256: (x.expand(N, H) * y + 1).relu() took 127.3 us there and 127.9
// in this shape. Dropout's kernels keep the others' shape too: bias + gelu + dropout
// went 174.5 -> 189.7 under this one.
constexpr int kFloatRowBlockSize = 128;
constexpr int kFloatRowVectors = 2;

// Work per byte (elementCost units per byte of the Flat inputs and the outputs) from
// which a float row's math is heavy: it then takes the float rows' shape, and asks for
// kFloatRowMinBlocksPerSm resident blocks per SM, so that ptxas keeps it within 32
// registers and a full SM of warps hides its loads. gelu(x + bias) (2.75 a byte) took
// 136.7 us in blocks of 256 with four vectors, 134.7 in this shape unbounded, 135.0 at
// 12 blocks (42 registers) and 127.3 at 16; the norm tail (0.6 a byte) lost under the
// cap (127.8 -> 132.0). Strided inputs are not counted: most are broadcast over the rows
// (a bias, a norm's weight) and read from cache. Only threads holding at most
// kFloatRowCappedMostVectors take the cap, as gelu(x + bias) does (x, bias and the
// output, and a second vector of each input): ptxas spills none of the erf of a sum of
// three rows under it (7 vectors held), 44 bytes for four (9), and a sigmoid's spills
// start at three.
constexpr int kFloatRowHeavyCostPerByte = 2;
constexpr int kFloatRowMinBlocksPerSm = 16;
constexpr int kFloatRowCappedMostVectors = 5;

// The input whose offsets input `i` uses: itself, or an earlier one with equal strides.
int offsetsOf(const Kernel& k, int i) {
  return k.inputs[i].same_strides_as >= 0 ? k.inputs[i].same_strides_as : i;
}

// Strided inputs that compute their own offsets (and get strides in FxArgs).
std::vector<int> walkedInputs(const Kernel& k) {
  std::vector<int> out;
  if (k.flat) return out;
  for (int i = 0; i < static_cast<int>(k.inputs.size()); ++i) {
    if (k.inputs[i].access == Access::Strided && offsetsOf(k, i) == i) out.push_back(i);
  }
  return out;
}

std::vector<int> stridedOutputs(const Kernel& k) {
  std::vector<int> out;
  for (int o = 0; o < static_cast<int>(k.outputs.size()); ++o) {
    if (k.outputs[o].access == Access::Strided) out.push_back(o);
  }
  return out;
}

bool readAlongRows(const TensorInput& in) {
  return in.access != Access::Broadcast1 && !in.inner_zero_stride;
}

// Vectors one step of a thread holds: one per tensor read as vectors, one per output.
int vectorsPerStep(const Kernel& k) {
  int n = static_cast<int>(k.outputs.size());
  for (const TensorInput& in : k.inputs) {
    n += k.flat ? in.access == Access::Flat : readAlongRows(in);
  }
  return n;
}

// Elements per access on the row path: every tensor read along the row must be dense
// in it (broadcast along it is fine), and every output too. 1 when some is not, or
// when one vector per tensor is more than a thread should hold.
int rowVectorWidth(const Kernel& k) {
  if (k.flat || vectorsPerStep(k) > kMaxVectorsPerStep) return 1;
  int widest = 1;
  for (const TensorInput& in : k.inputs) {
    if (!readAlongRows(in)) continue;
    if (in.access == Access::Strided && !in.inner_unit_stride) return 1;
    widest = std::max(widest, storageBytes(in.dtype));
  }
  for (const TensorOutput& out : k.outputs) {
    if (out.access == Access::Strided && !out.inner_unit_stride) return 1;
    widest = std::max(widest, storageBytes(out.dtype));
  }
  return 16 / widest;
}

// Strided elementwise kernels: not flat, not a reduction's rows or columns, no transpose
// tiles.
bool elementwiseRows(const Kernel& k) {
  return !k.flat && !k.rows && !k.columns && k.transpose_tile == 0;
}

// Whether some input read along the rows is not Flat (loaded lane by lane on the walk of
// printStraddlingVectors).
bool readsRowsInLanes(const Kernel& k) {
  return std::any_of(k.inputs.begin(), k.inputs.end(), [](const TensorInput& in) {
    return readAlongRows(in) && in.access == Access::Strided;
  });
}

// Strided kernels whose rows may also be walked as flat vectors that cross from one row
// into the next (printStraddlingVectors): every output is dense over the whole iteration
// space (Flat), and so are the inputs moved as vectors; the other inputs are broadcast
// along the rows, or read along them element by element (rowVectorWidth: with unit
// stride; a spatial gate [N, 1, H, W] beside [N, C, H, W]). A squeeze-excite gate over
// rows of 7 x 7 = 49 elements then moves vectors, where rows that are not whole vectors
// went one element per thread.
bool straddlingRowVectors(const Kernel& k) {
  if (!elementwiseRows(k) || rowVectorWidth(k) == 1) return false;
  for (const TensorOutput& out : k.outputs) {
    if (out.access != Access::Flat) return false;
  }
  return true;
}

// Vectors a row tile's thread holds with `unroll` vectors per input: one per tensor of a
// step, and each input's further ones.
int vectorsHeld(const Kernel& k, int unroll) {
  const int inputs = vectorsPerStep(k) - static_cast<int>(k.outputs.size());
  return vectorsPerStep(k) + inputs * (unroll - 1);
}

// Vectors per thread and tensor that a row tile is printed for: the most (a power of
// two up to kFloatRowVectors, kRowUnrollWide or kRowUnrollHalf) whose extra input
// vectors keep the thread within kMaxVectorsHeld.
int rowUnroll(const Kernel& k) {
  const int width = rowVectorWidth(k);
  if (width == 1) return 1;
  int unroll = floatRowKernel(k) ? kFloatRowVectors
               : width <= 4       ? kRowUnrollWide
                                  : kRowUnrollHalf;  // 16-byte vectors
  while (unroll > 1 && vectorsHeld(k, unroll) > kMaxVectorsHeld) unroll /= 2;
  return unroll;
}

// An offset a strided kernel computes per element, and the FxArgs strides it follows.
struct WalkedTensor {
  std::string offset;   // offN for input N, offoN for output N
  std::string strides;  // stN, soN
  bool inner_unit_stride;
  int slot;  // launch tensor whose strides these are (FixedShape::strides)
};

// How printExprs reads inputs: per element (index i, offsets offN), lane u of the
// vectors (lN) that a flat loop or a row tile loaded, or (transposed inputs) the
// shared-memory tile of a transpose_tile kernel.
enum class Lanes { None, Flat, Row, Tile, VectorTile };

std::string vectorType(c10::ScalarType storage, int width) {
  return "FxVec<" + std::string(storageTypeName(storage)) + ", " + std::to_string(width) + ">";
}

// Whether every input of a tile kernel can be read in vectors along its unit-stride dim:
// transposed ones of 2 or 4 bytes, the others along the rows or broadcast.
bool vectorizableInputs(c10::ArrayRef<TensorInput> inputs) {
  for (const TensorInput& in : inputs) {
    if (in.transposed) {
      if (storageBytes(in.dtype) != 2 && storageBytes(in.dtype) != 4) return false;
    } else if (in.access == Access::Strided && !in.inner_unit_stride && !in.inner_zero_stride) {
      return false;
    }
  }
  return true;
}

// Tile kernels that take several elements per lane and access (printVectorTiles):
// 64-wide tiles (transposeTileSide) whose inputs are all vectorizable and whose outputs are
// written along j with unit stride.
bool vectorTiles(const Kernel& k) {
  if (k.transpose_tile != 64 || !vectorizableInputs(k.inputs)) return false;
  for (const TensorOutput& out : k.outputs) {
    if (out.access == Access::Strided && !out.inner_unit_stride) return false;
  }
  return true;
}

// Elements per lane and access of a vector tile kernel: 16 bytes of transposed inputs of
// 2-byte elements (eight), else 8 bytes of the widest (two 4-byte elements), at most 16
// bytes of any other tensor. On the H100 (float16 / bfloat16 rows, 4 blocks per SM),
// eights took the 8192 x 8192 transpose 141.7 -> 141.3 us and the 32x256x64x64 permute
// and channels-last 71.9 -> 71.0 against fours; float32 moves 8 bytes (tileMinBlocksPerSm).
int tileVectorWidth(const Kernel& k) {
  int transposed = 1, other = 1;
  for (const TensorInput& in : k.inputs) {
    int& widest = in.transposed ? transposed : other;
    widest = std::max(widest, storageBytes(in.dtype));
  }
  for (const TensorOutput& out : k.outputs) other = std::max(other, storageBytes(out.dtype));
  const int transposed_bytes = transposed == 2 ? 16 : 8;
  return std::max(2, std::min(transposed_bytes / transposed, 16 / other));
}

class CudaPrinter {
 public:
  explicit CudaPrinter(const Kernel& k)
      : k_(k),
        facts_(analyzeExprs(k)),
        vec_(cudaVectorWidth(k)),
        row_vec_(rowVectorWidth(k)),
        row_unroll_(rowUnroll(k)),
        straddling_(straddlingRowVectors(k)),
        per_row_(perRowExprs(k, facts_)),
        native16_(planNative16(k, facts_)) {
    for (int i : walkedInputs(k)) {
      walked_.push_back({"off" + std::to_string(i), "st" + std::to_string(i),
                         k.inputs[i].inner_unit_stride, i});
    }
    for (int o : stridedOutputs(k)) {
      walked_.push_back({"offo" + std::to_string(o), "so" + std::to_string(o),
                         k.outputs[o].inner_unit_stride, k.outputs[o].stride_slot});
    }
  }

  std::string print() {
    out_ << kCudaPrelude << kCommonPrelude << (drawsRandomNumbers(k_) ? kPhiloxPrelude : "")
         << "\n";
    printArgStruct();
    out_ << "extern \"C\" __global__ void __launch_bounds__(" << cudaBlockSize(k_)
         << (k_.min_blocks_per_sm > 0 ? ", " + std::to_string(k_.min_blocks_per_sm) : "") << ") "
         << k_.name
         << "(const FxArgs a) {\n"
         << "  typedef " << (k_.index32 ? "int32_t" : "int64_t") << " idx_t;\n"
         << "  int32_t fx_error_sink = 0;\n  int32_t* fx_error = &fx_error_sink;\n"
         << "  (void)fx_error;\n"
         << "  const double* fx_dargs = " << (numDoubles() ? "a.dargs" : "nullptr") << ";\n"
         << "  const int64_t* fx_iargs = " << (numInts() ? "a.iargs" : "nullptr") << ";\n"
         << "  (void)fx_dargs; (void)fx_iargs;\n"
         << "  const idx_t fx_numel = " << (fixed() ? literal(k_.fixed.numel) : "(idx_t)a.numel")
         << ";\n"
         << "  const idx_t fx_vectors = "
         << (fixed() && k_.fixed.vectors >= 0 ? literal(k_.fixed.vectors) : "(idx_t)a.vectors")
         << ";\n  (void)fx_vectors;\n"
         << "  const idx_t fx_stride = (idx_t)gridDim.x * blockDim.x;\n"
         << "  const idx_t fx_tid = (idx_t)blockIdx.x * blockDim.x + threadIdx.x;\n";
    printExprs(/*invariant=*/true, "  ");
    if (k_.flat) {
      printFlat();
    } else if (k_.transpose_tile > 0) {
      printTransposeTiles();
    } else {
      printStrided();
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  int numDoubles() const {
    return static_cast<int>(std::count(k_.scalars.begin(), k_.scalars.end(), ScalarArgKind::Double));
  }
  int numInts() const { return static_cast<int>(k_.scalars.size()) - numDoubles(); }

  bool fixed() const { return !k_.fixed.empty(); }
  static std::string literal(int64_t v) { return "(idx_t)" + std::to_string(v); }

  // Size d of the iteration space, and stride d of a walked tensor: read from FxArgs,
  // or written in as constants when the kernel was compiled for one shape.
  std::string sizeOf(int d) const {
    return fixed() ? literal(k_.fixed.sizes[d]) : "(idx_t)a.sizes[" + std::to_string(d) + "]";
  }
  // Input i's data pointer: a.inI, or in a kernel for one shape an earlier chunk's plus
  // a constant, which the compiler folds into the load's address.
  std::string inPtr(size_t i) const {
    const std::vector<int32_t>& base = k_.fixed.pointer_base;
    if (!fixed() || base.empty() || base[i] == static_cast<int32_t>(i)) {
      return "a.in" + std::to_string(i);
    }
    return "(a.in" + std::to_string(base[i]) + " + " + std::to_string(k_.fixed.pointer_delta[i]) +
           ")";
  }
  std::string strideOf(const std::string& strides, int slot, int d) const {
    return fixed() ? literal(k_.fixed.strides[slot * k_.ndim + d])
                   : "(idx_t)a." + strides + "[" + std::to_string(d) + "]";
  }

  void printArgStruct() {
    out_ << "struct FxArgs {\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      out_ << "  const " << storageTypeName(k_.inputs[i].dtype) << "* in" << i << ";\n";
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << "  " << storageTypeName(k_.outputs[o].dtype) << "* out" << o << ";\n";
    }
    if (!walked_.empty()) {
      out_ << "  int64_t sizes[" << k_.ndim << "];\n";
      for (const WalkedTensor& w : walked_) {
        out_ << "  int64_t " << w.strides << "[" << k_.ndim << "];\n";
      }
    }
    if (numDoubles()) out_ << "  double dargs[" << numDoubles() << "];\n";
    if (numInts()) out_ << "  int64_t iargs[" << numInts() << "];\n";
    out_ << "  int64_t numel;\n"
         << "  int64_t vectors;  // per thread and tile (or iteration); 0: elements\n};\n\n";
  }

  void printFlat() {
    std::string start = "fx_tid";
    if (vec_ > 1) {
      const std::string v = std::to_string(vec_);
      // One vector per thread and iteration: more in flight measured no faster here.
      out_ << "  const idx_t fx_nvec = fx_vectors > 0 ? fx_numel / " << v << " : 0;\n"
           << "  for (idx_t fx_v = fx_tid; fx_v < fx_nvec; fx_v += fx_stride) {\n"
           << "    const bool fx_in[1] = {true};\n";
      printVectorLoads(1, vec_, [&](size_t) { return "fx_v * " + v; }, "    ");
      printVectorBody(Lanes::Flat, 1, vec_, "fx_v * " + v, "    ");
      out_ << "  }\n";
      start = "fx_nvec * " + v + " + fx_tid";
    }
    out_ << "  for (idx_t i = " << start << "; i < fx_numel; i += fx_stride) {\n";
    printExprs(/*invariant=*/false, "    ");
    printStores("    ");
    out_ << "  }\n";
  }

  // Loads vector k < `unroll` of every input read as vectors into lN[k], when fx_in[k]
  // says it is in range. All loads come before any math: they are in flight together.
  template <typename At>
  void printVectorLoads(int unroll, int width, At at, const std::string& ind) {
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!readAsVectors(k_.inputs[i])) continue;
      const std::string t = vectorType(k_.inputs[i].dtype, width);
      out_ << ind << t << " l" << i << "[" << unroll << "];\n";
    }
    out_ << "#pragma unroll\n" << ind << "for (int fx_k = 0; fx_k < " << unroll
         << "; ++fx_k) {\n" << ind << "  if (!fx_in[fx_k]) continue;\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!readAsVectors(k_.inputs[i])) continue;
      const std::string t = vectorType(k_.inputs[i].dtype, width);
      out_ << ind << "  l" << i << "[fx_k] = fx_ld_vec<" << t << ">(" << inPtr(i) << " + " << at(i)
           << ");\n";
    }
    out_ << ind << "}\n";
  }

  bool readAsVectors(const TensorInput& in) const {
    if (k_.flat || lane_loads_) return in.access == Access::Flat;
    return readAlongRows(in);
  }

  // The lanes of vectors k < `unroll` (inputs already loaded as lN[k]), each stored as
  // one vector per output; `at` is vector k's first element in Flat outputs.
  void printVectorBody(Lanes lanes, int unroll, int width, const std::string& at,
                       const std::string& ind) {
    out_ << "#pragma unroll\n" << ind << "for (int fx_k = 0; fx_k < " << unroll
         << "; ++fx_k) {\n" << ind << "  if (!fx_in[fx_k]) continue;\n";
    const std::string in = ind + "  ";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << in << vectorType(k_.outputs[o].dtype, width) << " s" << o << ";\n";
    }
    printPhiloxBlocks(width, at, in);
    out_ << "#pragma unroll\n" << in << "for (int u = 0; u < " << width << "; ++u) {\n";
    if (!lane_prologue_.empty()) out_ << in << "  " << lane_prologue_ << "\n";
    lanes_ = lanes;
    vector_at_ = at;
    printExprs(/*invariant=*/false, in + "  ");
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << in << "  s" << o << ".v[u] = " << store(o) << ";\n";
    }
    lanes_ = Lanes::None;
    out_ << in << "}\n";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const std::string n = std::to_string(o);
      const std::string where =
          k_.outputs[o].access == Access::Flat ? at : "base_offo" + n + " + fx_jk[fx_k]";
      out_ << in << "*(" << vectorType(k_.outputs[o].dtype, width) << "*)(a.out" << n << " + "
           << where << ") = s" << n << ";\n";
    }
    out_ << ind << "}\n";
  }

  void printStrided() {
    if (k_.ndim >= 1) printStridedRows();
    if (k_.ndim >= 1 && row_vec_ > 1) printShortRowVectors();
    if (k_.ndim >= 1 && straddling_) printStraddlingVectors();
    out_ << "  for (idx_t i = fx_tid; i < fx_numel; i += fx_stride) {\n";
    printOffsets("i", k_.ndim - 1, "", "    ");
    printExprs(/*invariant=*/false, "    ");
    printStores("    ");
    out_ << "  }\n";
  }

  // When the innermost dimension is long, the kernel walks rows of it: block
  // (x, y) covers tile x of rows y, y + gridDim.y, ... (the launch gives each tile of a
  // row its own x), so no division finds a tile's row. A thread does `fx_vectors`
  // vectors (or one element) per tile, and a row's offsets are computed once per row.
  void printStridedRows() {
    const int last = k_.ndim - 1;
    // Rows the launch sends to the flat walks (printShortRowVectors,
    // printStraddlingVectors: cudaLaunchShape) come with vectors in a one-dimensional
    // grid; a grid of rows in y always walks them here.
    const std::string straddle =
        straddling_ ? " && !(fx_vectors > 0 && gridDim.y == 1)" : "";
    out_ << "  const idx_t fx_inner = " << sizeOf(last) << ";\n"
         << "  if (fx_inner >= " << kRowPathMinInner << straddle << ") {\n"
         << "    const idx_t fx_span = (idx_t)blockDim.x * (fx_vectors > 0 ? " << row_vec_
         << " * fx_vectors : 1);\n"
         << "    const idx_t fx_start = (idx_t)blockIdx.x * fx_span;\n"
         << "    const idx_t fx_rows = fx_numel / fx_inner;\n";
    if (row_vec_ > 1) printRowVectors();
    // One element per thread and tile when launched element-wise; the whole span when
    // vectors were asked for but the rows are not aligned for them.
    out_ << "    const idx_t fx_end = fx_start + fx_span < fx_inner ? fx_start + fx_span : "
            "fx_inner;\n"
         << "    if (fx_start + threadIdx.x >= fx_end) return;\n";
    printRowLoopStart("    ");
    out_ << "      for (idx_t fx_j = fx_start + threadIdx.x; fx_j < fx_end; fx_j += blockDim.x) {\n"
         << "        const idx_t i = fx_row * fx_inner + fx_j;\n";
    for (const WalkedTensor& w : walked_) {
      out_ << "        const idx_t " << w.offset << " = base_" << w.offset << " + "
           << (w.inner_unit_stride ? "fx_j" : "fx_j * " + strideOf(w.strides, w.slot, last))
           << ";\n";
    }
    printExprs(/*invariant=*/false, "        ");
    printStores("        ");
    out_ << "      }\n";
    printRowLoopEnd("    ");
    out_ << "  }\n";
  }

  // Block x takes one tile of the two innermost dims (j: the innermost, t: the one
  // before), block y the outer indices y, y + gridDim.y, ... A warp covers a tile's row
  // (or half of one), so a thread handles side * side / kCudaBlockSize elements per
  // phase, each phase loading everything before using any of it: first the transposed
  // inputs' elements with consecutive lanes on consecutive t (their unit stride), then
  // the other inputs' elements of this thread's outputs (consecutive lanes on
  // consecutive j), both in flight together; the former go to shared memory, and after
  // the barrier every lane reads them back transposed, computes, and writes the outputs
  // along j. Vector tiles (vectorTiles) first try printVectorTiles' path.
  void printTransposeTiles() {
    const int n = k_.ndim;
    const int side = k_.transpose_tile;
    const int rows_per_pass = kCudaBlockSize / side;
    const std::string tile = std::to_string(side);
    const std::string per = std::to_string(side / rows_per_pass);
    const std::string step = std::to_string(rows_per_pass);
    out_ << "  const idx_t fx_inner = " << sizeOf(n - 1) << ";\n"
         << "  const idx_t fx_tn = " << sizeOf(n - 2) << ";\n"
         << "  const idx_t fx_tiles_j = (fx_inner + " << side - 1 << ") / " << tile
         << ";\n";
    printTileOrder(tile);
    out_ << "  const int fx_lx = threadIdx.x % " << tile << ";\n"
         << "  const int fx_ly = threadIdx.x / " << tile << ";\n"
         << "  const idx_t fx_outers = fx_numel / (fx_inner * fx_tn);\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!in.transposed) continue;
      out_ << "  __shared__ __align__(16) " << storageTypeName(in.dtype) << " fx_tile" << i << "["
           << tile << "][" << side + tilePadding(in.dtype) << "];\n";
    }
    if (vectorTiles(k_)) printVectorTiles();
    out_ << "  for (idx_t fx_outer = blockIdx.y; fx_outer < fx_outers; fx_outer += gridDim.y) {\n";
    printOffsets("fx_outer", n - 3, "base_", "    ");
    // Phase 1: the transposed inputs' elements, and which of them are in range.
    out_ << "    bool fx_tin[" << per << "];\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      out_ << "    " << storageTypeName(k_.inputs[i].dtype) << " fx_x" << i << "[" << per
           << "];\n";
    }
    out_ << "#pragma unroll\n    for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "      const int fx_r = fx_ly + fx_q * " << step << ";\n"
         << "      const idx_t fx_t = fx_t0 + fx_lx, fx_j = fx_j0 + fx_r;\n"
         << "      fx_tin[fx_q] = fx_t < fx_tn && fx_j < fx_inner;\n"
         << "      if (fx_tin[fx_q]) {\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      const int o = offsetsOf(k_, static_cast<int>(i));
      out_ << "        fx_x" << i << "[fx_q] = fx_ld(" << inPtr(i) << " + base_off" << o
           << " + fx_t + fx_j * " << strideOf("st" + std::to_string(o), o, n - 1) << ");\n";
    }
    out_ << "      }\n    }\n";
    // Phase 2: the other inputs' elements of this thread's outputs.
    out_ << "    bool fx_in[" << per << "];\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!loadedAhead(k_.inputs[i])) continue;
      out_ << "    " << storageTypeName(k_.inputs[i].dtype) << " l" << i << "[" << per << "];\n";
    }
    out_ << "#pragma unroll\n    for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "      const idx_t fx_t = fx_t0 + fx_ly + fx_q * " << step
         << ", fx_j = fx_j0 + fx_lx;\n"
         << "      fx_in[fx_q] = fx_t < fx_tn && fx_j < fx_inner;\n"
         << "      if (!fx_in[fx_q]) continue;\n";
    printTileElementIndex("      ");
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!loadedAhead(k_.inputs[i])) continue;
      const std::string at = k_.inputs[i].access == Access::Flat
                                 ? "i"
                                 : "off" + std::to_string(offsetsOf(k_, static_cast<int>(i)));
      out_ << "      l" << i << "[fx_q] = fx_ld(" << inPtr(i) << " + " << at << ");\n";
    }
    out_ << "    }\n";
    // The transposed elements into the tiles; then every lane reads them back.
    out_ << "#pragma unroll\n    for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "      if (!fx_tin[fx_q]) continue;\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      out_ << "      fx_tile" << i << "[fx_ly + fx_q * " << step << "][fx_lx] = fx_x" << i
           << "[fx_q];\n";
    }
    out_ << "    }\n    __syncthreads();\n"
         << "#pragma unroll\n    for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "      if (!fx_in[fx_q]) continue;\n"
         << "      const int fx_r = fx_ly + fx_q * " << step << ";\n"
         << "      const idx_t fx_t = fx_t0 + fx_r, fx_j = fx_j0 + fx_lx;\n";
    printTileElementIndex("      ");
    lanes_ = Lanes::Tile;
    printExprs(/*invariant=*/false, "      ");
    lanes_ = Lanes::None;
    printStores("      ");
    out_ << "    }\n"
         << "    __syncthreads();  // the next outer index refills the tiles\n  }\n";
  }

  // The tiles again with V = tileVectorWidth elements per lane and access, when every
  // tensor allows it (checked at run time: pointers aligned to V elements, strides other
  // than the unit one multiples of V). Thread x takes slot x % L (L = side / V slots per
  // tile row) of row x / L, then of the rows 8 R further on (a warp covers R = 32 / L
  // rows): rows j of the transposed inputs (slots along t), rows t of the others and of
  // the outputs (slots along j). With one element per lane a warp moved 64 bytes of
  // 2-byte elements per access, and 16-bit transposes stayed at three quarters of the
  // copy bandwidth. Slot s of tile row r sits at s xor (r / V) % L, so that the stores
  // (whole rows) and the reads (rows V m + u of thread m's slot along j) fall into
  // distinct banks (4-byte elements: two lanes per bank on reads).
  void printVectorTiles() {
    const int n = k_.ndim;
    const int side = k_.transpose_tile;
    const int v = tileVectorWidth(k_);
    const int lanes_per_row = side / v;
    const int rows_per_warp = 32 / lanes_per_row;
    const int rows_per_pass = rows_per_warp * (kCudaBlockSize / 32);
    const std::string V = std::to_string(v);
    const std::string L = std::to_string(lanes_per_row);
    const std::string per = std::to_string(side / rows_per_pass);
    const std::string step = std::to_string(rows_per_pass);
    auto vec = [&](c10::ScalarType t) { return vectorType(t, v); };
    std::string cond = "true";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!in.transposed && !loadedAhead(in)) continue;
      cond += pointerAligned(inPtr(i), v * storageBytes(in.dtype));
      const int o = offsetsOf(k_, static_cast<int>(i));
      if (in.access == Access::Flat) {
        cond += " && (fx_inner % " + V + " == 0)";
      } else if (o == static_cast<int>(i)) {
        cond += stridesDivisible("st" + std::to_string(o), o, v, in.transposed ? n - 2 : n - 1);
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      cond += pointerAligned("a.out" + std::to_string(o), v * storageBytes(out.dtype));
      cond += out.access == Access::Flat
                  ? " && (fx_inner % " + V + " == 0)"
                  : stridesDivisible("so" + std::to_string(o), out.stride_slot, v, n - 1);
    }
    out_ << "  if (" << cond << ") {\n"
         << "    const int fx_vl = threadIdx.x % " << L << ";\n"
         << "    const int fx_vr = threadIdx.x / " << L << ";\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      const std::string t = tileSlotType(k_.inputs[i].dtype);
      out_ << "    " << t << "* fx_vt" << i << " = (" << t << "*)&fx_tile" << i << "[0][0];\n";
    }
    out_ << "    for (idx_t fx_outer = blockIdx.y; fx_outer < fx_outers; fx_outer += gridDim.y) "
            "{\n";
    printOffsets("fx_outer", n - 3, "base_", "      ");
    // Phase 1: slots of the transposed inputs; the other inputs' slots.
    out_ << "      bool fx_tin[" << per << "], fx_in[" << per << "];\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (in.transposed || loadedAhead(in)) {
        out_ << "      " << vec(in.dtype) << " " << (in.transposed ? "fx_x" : "l") << i << "["
             << per << "];\n";
      }
    }
    out_ << "#pragma unroll\n      for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "        {\n"
         << "          const idx_t fx_t = fx_t0 + " << V
         << " * fx_vl, fx_j = fx_j0 + fx_vr + fx_q * " << step << ";\n"
         << "          const int fx_n = fx_tn - fx_t < " << V << " ? (int)(fx_tn - fx_t) : " << V
         << ";\n"
         << "          fx_tin[fx_q] = fx_t < fx_tn && fx_j < fx_inner;\n"
         << "          if (fx_tin[fx_q]) {\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!in.transposed) continue;
      const int o = offsetsOf(k_, static_cast<int>(i));
      const std::string at = inPtr(i) + " + base_off" + std::to_string(o) + " + fx_t + fx_j * " +
                             strideOf("st" + std::to_string(o), o, n - 1);
      printVectorLoad("fx_x" + std::to_string(i), in.dtype, at, v, "            ");
    }
    out_ << "          }\n        }\n"
         << "        const idx_t fx_t = fx_t0 + fx_vr + fx_q * " << step << ", fx_j = fx_j0 + " << V
         << " * fx_vl;\n"
         << "        const int fx_n = fx_inner - fx_j < " << V << " ? (int)(fx_inner - fx_j) : "
         << V << ";\n"
         << "        fx_in[fx_q] = fx_t < fx_tn && fx_j < fx_inner;\n"
         << "        if (!fx_in[fx_q]) continue;\n";
    printTileElementIndex("        ");
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!loadedAhead(in)) continue;
      const std::string at = in.access == Access::Flat
                                 ? "i"
                                 : "off" + std::to_string(offsetsOf(k_, static_cast<int>(i)));
      printVectorLoad("l" + std::to_string(i), in.dtype, inPtr(i) + " + " + at, v, "        ");
    }
    out_ << "      }\n";
    // The slots into the tiles; then each lane reads rows V m + u of its slot along j.
    out_ << "#pragma unroll\n      for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "        if (!fx_tin[fx_q]) continue;\n"
         << "        const int fx_r = fx_vr + fx_q * " << step << ";\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      const std::string t = tileSlotType(k_.inputs[i].dtype);
      out_ << "        fx_vt" << i << "[fx_r * " << L << " + (fx_vl ^ ((fx_r / " << V << ") % " << L
           << "))] = *(" << t << "*)&fx_x" << i << "[fx_q];\n";
    }
    out_ << "      }\n      __syncthreads();\n"
         << "#pragma unroll\n      for (int fx_q = 0; fx_q < " << per << "; ++fx_q) {\n"
         << "        if (!fx_in[fx_q]) continue;\n"
         << "        const int fx_c = fx_vr + fx_q * " << step << ";\n"
         << "        const idx_t fx_t = fx_t0 + fx_c, fx_j = fx_j0 + " << V << " * fx_vl;\n"
         << "        const int fx_n = fx_inner - fx_j < " << V << " ? (int)(fx_inner - fx_j) : "
         << V << ";\n";
    printTileElementIndex("        ");
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << "        " << vec(k_.outputs[o].dtype) << " s" << o << ";\n";
    }
    out_ << "#pragma unroll\n        for (int u = 0; u < " << V << "; ++u) {\n"
         << "          if (u >= fx_n) break;\n";
    lanes_ = Lanes::VectorTile;
    printExprs(/*invariant=*/false, "          ");
    lanes_ = Lanes::None;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      out_ << "          s" << o << ".v[u] = " << store(o) << ";\n";
    }
    out_ << "        }\n";
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const std::string name = std::to_string(o);
      const std::string at =
          "a.out" + name + " + " + (k_.outputs[o].access == Access::Flat ? "i" : "offo" + name);
      out_ << "        if (fx_n == " << V << ") *(" << vec(k_.outputs[o].dtype) << "*)(" << at
           << ") = s" << name << ";\n"
           << "        else " << partialLanes(v) << "(" << at << ")[u] = s" << name << ".v[u];\n";
    }
    out_ << "      }\n"
         << "      __syncthreads();  // the next outer index refills the tiles\n    }\n"
         << "    return;\n  }\n";
  }

  // A transposed input's element at (t, j) of a vector tile: element (t - t0) % V of
  // slot (t - t0) / V xor m of row j - j0 = V m + u (printVectorTiles). 2-byte elements
  // are read from the slot's 4-byte words by shifts: as a 2-byte read of FxVec<uint16_t,
  // 2>, the float16 transpose took 254 us on the H100 instead of 146.
  std::string vectorTileElement(int i) const {
    const TensorInput& in = k_.inputs[i];
    const int v = tileVectorWidth(k_);
    const int lanes_per_row = k_.transpose_tile / v;
    const std::string V = std::to_string(v);
    const std::string slot = "((fx_c / " + V + ") ^ fx_vl)";
    const std::string row = "(" + V + " * fx_vl + u)";
    const std::string index = row + " * " + std::to_string(lanes_per_row) + " + " + slot;
    const std::string name = "fx_vt" + std::to_string(i);
    if (storageBytes(in.dtype) != 2) return name + "[" + index + "].v[fx_c % " + V + "]";
    const std::string word = "((uint32_t*)" + name + ")[(" + index + ") * " +
                             std::to_string(v / 2) + " + (fx_c % " + V + ") / 2]";
    return "(" + std::string(storageTypeName(in.dtype)) + ")(" + word + " >> (16 * (fx_c & 1)))";
  }

  // How a vector tile holds a slot of V elements: 4- or 8-byte words for 2-byte elements
  // (read back by vectorTileElement's shifts), FxVec otherwise.
  std::string tileSlotType(c10::ScalarType t) const {
    const int bytes = tileVectorWidth(k_) * storageBytes(t);
    if (storageBytes(t) == 2) return bytes == 4 ? "uint32_t" : bytes == 8 ? "uint2" : "uint4";
    return vectorType(t, tileVectorWidth(k_));
  }

  // Run-time conditions of the vector paths, each starting " && ": `ptr` is aligned to
  // `bytes`; every stride of a tensor except dim `skip`'s is a multiple of `divisor`.
  static std::string pointerAligned(const std::string& ptr, int bytes) {
    return " && ((uint64_t)" + ptr + " % " + std::to_string(bytes) + " == 0)";
  }
  std::string stridesDivisible(const std::string& strides, int slot, int divisor,
                               int skip) const {
    std::string c;
    for (int d = 0; d < k_.ndim; ++d) {
      if (d == skip) continue;
      c += " && (" + strideOf(strides, slot, d) + " % " + std::to_string(divisor) + " == 0)";
    }
    return c;
  }

  // `dst`[fx_q] = the `v` elements at `at`, as one access when all fx_n are in range, else
  // the first fx_n one by one.
  void printVectorLoad(const std::string& dst, c10::ScalarType t, const std::string& at, int v,
                       const std::string& ind) {
    out_ << ind << "if (fx_n == " << v << ") " << dst << "[fx_q] = fx_ld_vec<" << vectorType(t, v)
         << ">(" << at << ");\n"
         << ind << "else " << partialLanes(v) << dst << "[fx_q].v[u] = fx_ld(" << at
         << " + u);\n";
  }

  // The head of a loop over the first fx_n < v lanes of a vector, unrolled with a test
  // per lane: a loop bounded by fx_n indexes the vector at run time, which puts it in
  // local memory.
  static std::string partialLanes(int v) {
    return "_Pragma(\"unroll\") for (int u = 0; u < " + std::to_string(v) + "; ++u) if (u < fx_n) ";
  }

  // Which tile block x takes: by default tiles in row-major order, so the blocks in flight
  // share rows of t. With a tile_group of G, consecutive blocks take G tiles down t
  // before the next j, so those in flight cover a squarer patch and a transposed input
  // is read in longer runs of its rows.
  void printTileOrder(const std::string& tile) {
    const int group = k_.tile_group;
    if (group <= 1) {
      out_ << "  const idx_t fx_j0 = (idx_t)(blockIdx.x % fx_tiles_j) * " << tile << ";\n"
           << "  const idx_t fx_t0 = (idx_t)(blockIdx.x / fx_tiles_j) * " << tile << ";\n";
      return;
    }
    const std::string g = std::to_string(group);
    out_ << "  const idx_t fx_tiles_t = (fx_tn + " << tile << " - 1) / " << tile << ";\n"
         << "  const idx_t fx_group = (idx_t)blockIdx.x / (" << g << " * fx_tiles_j);\n"
         << "  const idx_t fx_in_group = (idx_t)blockIdx.x % (" << g << " * fx_tiles_j);\n"
         << "  const idx_t fx_group_rows = min((idx_t)" << g << ", fx_tiles_t - fx_group * " << g
         << ");\n"
         << "  const idx_t fx_t0 = (fx_group * " << g << " + fx_in_group % fx_group_rows) * "
         << tile << ";\n"
         << "  const idx_t fx_j0 = (fx_in_group / fx_group_rows) * " << tile << ";\n";
  }

  // Inputs a tile kernel loads in its first phase, into lN[fx_q]: all but the
  // transposed ones (in the tiles), single elements and those broadcast along j.
  static bool loadedAhead(const TensorInput& in) {
    return !in.transposed && readAlongRows(in);
  }

  // i (the element's index in iteration order, for Flat tensors) and the offsets of
  // the walked tensors, from fx_outer's base offsets, fx_t and fx_j.
  void printTileElementIndex(const std::string& ind) {
    const int n = k_.ndim;
    out_ << ind << "const idx_t i = (fx_outer * fx_tn + fx_t) * fx_inner + fx_j;\n"
         << ind << "(void)i;\n";
    for (const WalkedTensor& w : walked_) {
      out_ << ind << "const idx_t " << w.offset << " = base_" << w.offset << " + fx_t * "
           << strideOf(w.strides, w.slot, n - 2) << " + "
           << (w.inner_unit_stride ? "fx_j" : "fx_j * " + strideOf(w.strides, w.slot, n - 1))
           << ";\n" << ind << "(void)" << w.offset << ";\n";
    }
  }

  // Opens the loop over this block's rows and declares base_offN, the offset of the
  // row's first element in every walked tensor. The launch never gives a block no row,
  // so the first pass needs no test (and the division in fx_rows is off its path).
  void printRowLoopStart(const std::string& ind) {
    out_ << ind << "for (idx_t fx_row = blockIdx.y;;) {\n";
    printOffsets("fx_row", k_.ndim - 2, "base_", ind + "  ");
  }

  void printRowLoopEnd(const std::string& ind) {
    out_ << ind << "  fx_row += gridDim.y;\n"
         << ind << "  if (fx_row >= fx_rows) break;\n"
         << ind << "}\n" << ind << "return;\n";
  }

  // Declares `prefix`offN for every walked tensor: the offset of linear index `index`
  // over dimensions 0..`innermost` (div/mod per dimension, innermost first; the
  // outermost takes what is left, as the index is in range).
  void printOffsets(const std::string& index, int innermost, const std::string& prefix,
                    const std::string& ind, const std::string& rest = "fx_r") {
    for (const WalkedTensor& w : walked_) {
      out_ << ind << "idx_t " << prefix << w.offset << " = 0;\n";
    }
    if (innermost < 0) return;
    out_ << ind << "idx_t " << rest << " = " << index << ";\n";
    for (int d = innermost; d >= 0; --d) {
      const std::string size = sizeOf(d);
      out_ << ind << "{ const idx_t fx_c = "
           << (d > 0 ? rest + " % " + size + "; " + rest + " /= " + size + ";" : rest + ";");
      for (const WalkedTensor& w : walked_) {
        out_ << " " << prefix << w.offset << " += fx_c * " << strideOf(w.strides, w.slot, d) << ";";
      }
      out_ << " }\n";
    }
  }

  // Whether this launch moves row vectors: asked for (fx_vectors), rows of whole vectors,
  // and every tensor read or written along the rows aligned to them (rowVectorsAligned).
  std::string rowVectorCondition() const {
    return "fx_vectors > 0 && fx_inner % " + std::to_string(row_vec_) + " == 0" +
           rowVectorsAligned();
  }

  // " && ..." checks that every tensor read or written along the rows has its pointer,
  // and its outer strides where it has its own, aligned to row vectors; with
  // `moved_only`, only the tensors printStraddlingVectors moves as vectors (Flat ones).
  std::string rowVectorsAligned(bool moved_only = false) const {
    const int last = k_.ndim - 1;
    auto aligned = [&](const std::string& ptr, c10::ScalarType t) {
      return pointerAligned(ptr, row_vec_ * storageBytes(t));
    };
    auto outerStridesAligned = [&](const std::string& strides, int slot) {
      return stridesDivisible(strides, slot, row_vec_, last);
    };
    std::string cond;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const TensorInput& in = k_.inputs[i];
      if (!readAlongRows(in) || (moved_only && in.access != Access::Flat)) continue;
      cond += aligned(inPtr(i), in.dtype);
      if (in.access == Access::Strided && offsetsOf(k_, static_cast<int>(i)) == static_cast<int>(i)) {
        cond += outerStridesAligned("st" + std::to_string(i), static_cast<int>(i));
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      cond += aligned("a.out" + std::to_string(o), k_.outputs[o].dtype);
      if (k_.outputs[o].access == Access::Strided) {
        cond += outerStridesAligned("so" + std::to_string(o), k_.outputs[o].stride_slot);
      }
    }
    return cond;
  }

  // Where input i's row vector k starts.
  std::string rowVectorAt(size_t i) const {
    const std::string base = k_.inputs[i].access == Access::Flat
                                 ? "fx_row0"
                                 : "base_off" + std::to_string(offsetsOf(k_, static_cast<int>(i)));
    return base + " + fx_jk[fx_k]";
  }

  // Rows shorter than kRowPathMinInner (a head's 64 elements in attention's permuted
  // q, k, v), when the launch asked for vectors: a thread takes one row vector per step
  // of a grid-stride loop and finds its row's offsets once per vector, not once per
  // element (the element loop's 64-bit div/mods per element held a float16 head
  // permute to about a third of the copy bandwidth on the H100).
  void printShortRowVectors() {
    const std::string v = std::to_string(row_vec_);
    out_ << "  if (" << rowVectorCondition() << ") {\n"
         << "    const idx_t fx_row_vectors = fx_inner / " << v << ";\n"
         << "    const idx_t fx_nvec = fx_numel / " << v << ";\n"
         << "    for (idx_t fx_v = fx_tid; fx_v < fx_nvec; fx_v += fx_stride) {\n"
         << "      const idx_t fx_row = fx_v / fx_row_vectors;\n"
         << "      const bool fx_in[1] = {true};\n"
         << "      const idx_t fx_jk[1] = {(fx_v - fx_row * fx_row_vectors) * " << v << "};\n";
    printOffsets("fx_row", k_.ndim - 2, "base_", "      ");
    out_ << "      const idx_t fx_row0 = fx_row * fx_inner;\n";
    // The vectors' loads go first, in flight while the per-row values load and compute.
    printVectorLoads(1, row_vec_, [&](size_t i) { return rowVectorAt(i); }, "      ");
    printPerRowExprs("      ");
    printVectorBody(Lanes::Row, 1, row_vec_, "fx_row0 + fx_jk[fx_k]", "      ");
    per_row_printed_ = false;
    out_ << "    }\n    return;\n  }\n";
  }

  // Rows that are not whole vectors (straddlingRowVectors): a thread takes flat vector
  // fx_v per step of a grid-stride loop; Flat tensors move it as one access, the other
  // inputs read along the rows load lane by lane (column fx_lj of the lane's row). A
  // vector inside one row finds that row's offsets and per-row values once; one that
  // crosses into the next row (rows are at least a vector long) finds both rows' offsets
  // and computes per lane, each lane reading its own row's values. The last, partial
  // vector goes element by element. Crossing vectors went element by element at first:
  // a third of the vectors over rows of 3 x 3 floats cross, and a gate there took
  // 68.4 us against 51.4 with one element per thread (H200).
  void printStraddlingVectors() {
    const std::string v = std::to_string(row_vec_);
    const std::string ind = "        ";
    const bool lane_columns = readsRowsInLanes(k_);
    lane_loads_ = true;
    out_ << "  if (fx_vectors > 0 && fx_inner >= " << v << rowVectorsAligned(/*moved_only=*/true)
         << ") {\n"
         << "    const idx_t fx_nvec = (fx_numel + " << row_vec_ - 1 << ") / " << v << ";\n"
         << "    for (idx_t fx_v = fx_tid; fx_v < fx_nvec; fx_v += fx_stride) {\n"
         << "      const idx_t fx_e = fx_v * " << v << ";\n"
         << "      if (fx_e <= fx_numel - " << v << ") {  // (no sum that could overflow)\n"
         << ind << "const idx_t fx_row = fx_e / fx_inner;\n"
         << ind << "const idx_t fx_j = fx_e - fx_row * fx_inner;\n"
         << ind << "const idx_t fx_row0 = fx_e - fx_j;\n"
         << ind << "const bool fx_in[1] = {true};\n"
         << ind << "const idx_t fx_jk[1] = {fx_j};\n";
    // The vectors' loads go first, in flight while the per-row values load and compute.
    printVectorLoads(1, row_vec_, [&](size_t i) { return rowVectorAt(i); }, ind);
    out_ << ind << "if (fx_j <= fx_inner - " << v << ") {\n";
    printOffsets("fx_row", k_.ndim - 2, "base_", ind + "  ");
    printPerRowExprs(ind + "  ");
    if (lane_columns) lane_prologue_ = "const idx_t fx_lj = fx_j + u;";
    printVectorBody(Lanes::Row, 1, row_vec_, "fx_e", ind + "  ");
    per_row_printed_ = false;
    out_ << ind << "} else {\n"
         << ind << "  const idx_t fx_split = fx_inner - fx_j;  // lanes in row fx_row\n";
    printOffsets("fx_row", k_.ndim - 2, "row_", ind + "  ");
    printOffsets("fx_row + 1", k_.ndim - 2, "next_", ind + "  ", "fx_r1");
    lane_prologue_ = lane_columns
                         ? "const idx_t fx_lj = u < fx_split ? fx_j + u : fx_j + u - fx_inner;"
                         : "";
    for (const WalkedTensor& w : walked_) {
      lane_prologue_ += (lane_prologue_.empty() ? "" : " ") + std::string("const idx_t base_") +
                        w.offset + " = u < fx_split ? row_" + w.offset + " : next_" + w.offset +
                        ";";
    }
    printVectorBody(Lanes::Row, 1, row_vec_, "fx_e", ind + "  ");
    lane_prologue_.clear();
    lane_loads_ = false;
    out_ << ind << "}\n" << ind << "continue;\n      }\n"
         << "      for (idx_t i = fx_e; i < fx_numel; ++i) {\n";
    printOffsets("i", k_.ndim - 1, "", ind);
    printExprs(/*invariant=*/false, ind);
    printStores(ind);
    out_ << "      }\n    }\n    return;\n  }\n";
  }

  // The row's per-row expressions (per_row_), once, where base_offN hold the row's
  // offsets; the vector bodies after it read them instead of computing them per element.
  void printPerRowExprs(const std::string& ind) {
    lanes_ = Lanes::Row;
    auto load = [this](const Expr& e) { return loadExpr(e); };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (per_row_[i]) printExpr(i, ind, load, "");
    }
    lanes_ = Lanes::None;
    per_row_printed_ = true;
  }

  void printRowVectors() {
    const std::string v = std::to_string(row_vec_);
    const std::string u = std::to_string(row_unroll_);
    out_ << "    if (" << rowVectorCondition() << ") {\n";
    // Vector k of a thread lies a block's width of vectors after vector k - 1.
    out_ << "      idx_t fx_jk[" << u << "];\n      bool fx_in[" << u << "];\n"
         << "#pragma unroll\n      for (int fx_k = 0; fx_k < " << u << "; ++fx_k) {\n"
         << "        fx_jk[fx_k] = fx_start + (fx_k * (idx_t)blockDim.x + threadIdx.x) * " << v
         << ";\n        fx_in[fx_k] = fx_k < fx_vectors && fx_jk[fx_k] < fx_inner;\n      }\n"
         << "      if (!fx_in[0]) return;\n";
    printRowLoopStart("      ");
    out_ << "        const idx_t fx_row0 = fx_row * fx_inner;\n";
    printPerRowExprs("        ");
    printVectorLoads(row_unroll_, row_vec_, [&](size_t i) { return rowVectorAt(i); }, "        ");
    printVectorBody(Lanes::Row, row_unroll_, row_vec_, "fx_row0 + fx_jk[fx_k]", "        ");
    per_row_printed_ = false;
    printRowLoopEnd("      ");
    out_ << "    }\n";
  }

  std::string store(size_t o) const {
    const TensorOutput& out = k_.outputs[o];
    const std::string v = "v" + std::to_string(out.value);
    // A load's bits are not stored as they are: the conversions quiet a NaN, as eager's do.
    const bool bits =
        native16_.bits[out.value] == out.dtype && k_.exprs[out.value].op != IrOp::Load;
    return bits ? v + "_b" : storeConversion(out.dtype, v);
  }

  void printStores(const std::string& indent) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const bool strided = k_.outputs[o].access == Access::Strided;
      out_ << indent << "a.out" << o << "[" << (strided ? "offo" + std::to_string(o) : "i")
           << "] = " << store(o) << ";\n";
    }
  }

  std::string loadExpr(const Expr& e) const {
    if (e.op == IrOp::ElementIndex) return elementIndex();
    return loadConversion(k_.inputs[e.index].dtype, e.type, loadElement(e));
  }

  // The element a load reads, in its storage type.
  std::string loadElement(const Expr& e) const {
    const TensorInput& in = k_.inputs[e.index];
    const std::string ref = inPtr(e.index);
    std::string elem;
    switch (in.access) {
      case Access::Broadcast1: elem = "fx_ld(" + ref + ")"; break;
      case Access::Flat:
        if (lanes_ == Lanes::Tile) {
          elem = "l" + std::to_string(e.index) + "[fx_q]";  // loadedAhead
        } else if (lanes_ == Lanes::VectorTile) {
          elem = "l" + std::to_string(e.index) + "[fx_q].v[u]";
        } else if (lanes_ == Lanes::Flat || lanes_ == Lanes::Row) {
          elem = "l" + std::to_string(e.index) + "[fx_k].v[u]";
        } else {
          elem = "fx_ld(" + ref + " + i)";
        }
        break;
      case Access::Strided: {
        const std::string offsets = std::to_string(offsetsOf(k_, e.index));
        if (lanes_ == Lanes::Tile && in.transposed) {
          elem = "fx_tile" + std::to_string(e.index) + "[fx_lx][fx_r]";
        } else if (lanes_ == Lanes::VectorTile && in.transposed) {
          elem = vectorTileElement(e.index);
        } else if (lanes_ == Lanes::VectorTile && loadedAhead(in)) {
          elem = "l" + std::to_string(e.index) + "[fx_q].v[u]";
        } else if (lanes_ == Lanes::Tile && loadedAhead(in)) {
          elem = "l" + std::to_string(e.index) + "[fx_q]";
        } else if (lanes_ == Lanes::Row && in.inner_zero_stride) {
          elem = "fx_ld(" + ref + " + base_off" + offsets + ")";
        } else if (lanes_ == Lanes::Row && lane_loads_) {
          elem = "fx_ld(" + ref + " + base_off" + offsets + " + fx_lj)";  // lane's own row
        } else if (lanes_ == Lanes::Row) {
          elem = "l" + std::to_string(e.index) + "[fx_k].v[u]";
        } else {
          elem = "fx_ld(" + ref + " + off" + offsets + ")";
        }
        break;
      }
    }
    return elem;
  }

  // A vector's lanes are consecutive elements from `at`, a multiple of `width`: each
  // random draw of the kernel takes the Philox blocks of the vector once (one per four
  // lanes, or one for the two lanes of 4-byte vectors), and lane u picks its word from
  // them, instead of a block per lane (philox.h: the words are the same).
  void printPhiloxBlocks(int width, const std::string& at, const std::string& ind) {
    blocked_draws_.clear();
    const int blocks = std::max(1, width / 4);
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op != IrOp::PhiloxUniform || !facts_.used[i] || facts_.invariant[i]) continue;
      if (!facts_.invariant[e.args[0]] || !facts_.invariant[e.args[1]]) continue;
      const std::string words = "fx_rw" + std::to_string(i);
      out_ << ind << "uint32_t " << words << "[" << blocks << "][4];\n"
           << "#pragma unroll\n"
           << ind << "for (int fx_q = 0; fx_q < " << blocks
           << "; ++fx_q) fx_philox_block((uint64_t)v" << e.args[0] << ", (uint64_t)v" << e.args[1]
           << ", ((uint64_t)(" << at
           << ") >> 2) + fx_q, " << words << "[fx_q]);\n";
      blocked_draws_.push_back(static_cast<ExprId>(i));
    }
    block_width_ = width;
  }

  // Lane u's draw from the blocks printPhiloxBlocks printed, or "" when it printed none.
  std::string blockedDraw(const Expr& e) const {
    if (lanes_ != Lanes::Flat && lanes_ != Lanes::Row) return "";
    const auto id = static_cast<ExprId>(&e - k_.exprs.data());
    if (std::find(blocked_draws_.begin(), blocked_draws_.end(), id) == blocked_draws_.end()) {
      return "";
    }
    const std::string words = "fx_rw" + std::to_string(id);
    if (block_width_ >= 4) return "fx_philox_to_uniform(" + words + "[u >> 2][u & 3])";
    return "fx_philox_to_uniform(fx_philox_pick(" + words + "[0], ((uint32_t)(" + vector_at_ +
           ") & 3) + (uint32_t)u))";
  }

  // The element's position in the iteration space: `i` in the element loops, lane u of
  // the vector at vector_at_ in vector bodies. Tile kernels are not printed for kernels
  // that draw random numbers (the executor plans none for them).
  std::string elementIndex() const {
    TORCH_CHECK(lanes_ != Lanes::Tile && lanes_ != Lanes::VectorTile,
                "fuser: a transpose-tile kernel has no element index");
    if (lanes_ == Lanes::Flat || lanes_ == Lanes::Row) return "(int64_t)(" + vector_at_ + " + u)";
    return "(int64_t)i";
  }

  void printExprs(bool invariant, const std::string& indent) {
    auto load = [this](const Expr& e) { return loadExpr(e); };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!facts_.used[i] || facts_.invariant[i] != invariant) continue;
      if (!invariant && per_row_printed_ && per_row_[i]) continue;
      const Expr& e = k_.exprs[i];
      printExpr(i, indent, load, e.op == IrOp::PhiloxUniform ? blockedDraw(e) : "");
    }
  }

  // `const T vN = ...;`, or for values holding 16-bit bits (native16.h) their bits
  // `vN_b` and the float they stand for; ops folded into a native rounding print nothing.
  void printExpr(size_t i, const std::string& indent,
                 const std::function<std::string(const Expr&)>& load, const std::string& blocked) {
    const Expr& e = k_.exprs[i];
    if (native16_.folded[i]) return;
    const std::string v = "v" + std::to_string(i);
    const c10::ScalarType format = native16_.bits[i];
    if (format == c10::ScalarType::Undefined) {
      out_ << indent << "const " << computeTypeName(e.type) << " " << v << " = "
           << (blocked.empty() ? formatExpr(k_, e, load) : blocked) << ";\n";
      return;
    }
    const auto id = static_cast<ExprId>(i);
    printNative16Value(out_, indent, id, format,
                       native16Bits(k_, native16_, id, e.op == IrOp::Load ? loadElement(e) : ""));
  }

  const Kernel& k_;
  ExprFacts facts_;
  int vec_;
  int row_vec_;  // elements per thread and access on rows; 1: rows go element-wise
  int row_unroll_;  // most vectors per thread and tile of the row loop
  bool straddling_;  // straddlingRowVectors
  // Per expression: the same along a row (it reads only inputs broadcast along the
  // rows, as batch_norm's per-channel statistics, and invariants): the row loops compute
  // it once per row, not per element.
  std::vector<bool> per_row_;
  Native16 native16_;  // 16-bit adds, subtracts and multiplies computed natively
  bool per_row_printed_ = false;  // inside a row loop that printed them
  std::vector<WalkedTensor> walked_;  // strided inputs, then strided outputs
  Lanes lanes_ = Lanes::None;
  std::string vector_at_;  // printVectorBody: where vector fx_k starts in the iteration space
  // printVectorBody: declarations printed at the start of each lane (a crossing vector's
  // lanes choose their row's offsets: printStraddlingVectors).
  std::string lane_prologue_;
  // printStraddlingVectors: inputs read along the rows that are not Flat load per lane.
  bool lane_loads_ = false;
  std::vector<ExprId> blocked_draws_;  // printPhiloxBlocks: draws read from vector blocks
  int block_width_ = 1;  // and the width of those vectors
  std::ostringstream out_;
};

}  // namespace

namespace {

// Bytes per element of the widest tensor a flat kernel reads or writes as vectors.
int flatWidestBytes(const Kernel& k) {
  int widest = 1;
  for (const TensorInput& in : k.inputs) {
    if (in.access == Access::Flat) widest = std::max(widest, storageBytes(in.dtype));
  }
  for (const TensorOutput& out : k.outputs) widest = std::max(widest, storageBytes(out.dtype));
  return widest;
}

}  // namespace

int cudaVectorWidth(const Kernel& k) {
  if (!k.flat || !k.vectorize) return 1;
  // 16 bytes per access in every dtype. On the H100, 4-byte elements had run faster in
  // pairs ((x*y+1).relu().sigmoid() over 2^26 floats: 261.7 us in 8-byte accesses, 265.7
  // in 16-byte ones); on the H200, fours in blocks of 1024 took that row from 196.7 to
  // 183.2 us (torch.compile 185.3) and (x + y).relu() over 2^25 floats from 95.4 to 92.6
  // (torch.compile 93.5).
  return 16 / flatWidestBytes(k);
}

// Work per byte moved (elementCost units per byte of the tensors a flat kernel reads and
// writes per element) from which a kernel is bound by its instructions, not by memory.
// There a block of 1024 threads idles SMs at the grid's tail (a block retires only when
// all its 32 warps have), and blocks of 256 finish sooner: on the H100, GPT-2's float16
// tanh-GELU (about 8 units a byte) took 39.9 us in blocks of 1024 and 38.3 in 256;
// (x*y+1).relu().sigmoid() (4 a byte) keeps 1024, where it runs at copy speed.
constexpr int kMathBoundCostPerByte = 6;

// Whether an element's work (elementCost) is at least `units` per byte of the Flat
// inputs and the outputs it moves.
bool costPerByteAtLeast(const Kernel& k, int units) {
  int bytes = 0;
  for (const TensorInput& in : k.inputs) {
    if (in.access == Access::Flat) bytes += storageBytes(in.dtype);
  }
  for (const TensorOutput& out : k.outputs) bytes += storageBytes(out.dtype);
  return bytes > 0 && elementCost(k) >= units * bytes;
}

bool mathBound(const Kernel& k) { return costPerByteAtLeast(k, kMathBoundCostPerByte); }

bool floatRowKernel(const Kernel& k) {
  if (!elementwiseRows(k) || rowVectorWidth(k) != 4 || drawsRandomNumbers(k)) return false;
  return costPerByteAtLeast(k, kFloatRowHeavyCostPerByte) ||
         vectorsHeld(k, kRowUnrollWide) > kMaxVectorsHeld;
}

int minBlocksPerSm(const Kernel& k) {
  if (k.transpose_tile > 0) return tileMinBlocksPerSm(k);
  const bool capped = floatRowKernel(k) && costPerByteAtLeast(k, kFloatRowHeavyCostPerByte) &&
                      vectorsHeld(k, kFloatRowVectors) <= kFloatRowCappedMostVectors;
  return capped ? kFloatRowMinBlocksPerSm : 0;
}

int cudaBlockSize(const Kernel& k) {
  if (floatRowKernel(k)) return kFloatRowBlockSize;
  const bool vectors = cudaVectorWidth(k) > 1;  // 16 bytes of the widest tensor a thread
  return vectors && vectorsPerStep(k) <= kMaxVectorsPerStep && !mathBound(k)
             ? kWideVectorBlockSize
             : kCudaBlockSize;
}

CudaVectorShape cudaVectorShape(const Kernel& k) {
  return {cudaVectorWidth(k), rowVectorWidth(k),       rowUnroll(k),
          cudaBlockSize(k),   straddlingRowVectors(k), readsRowsInLanes(k)};
}

CudaLaunchShape cudaLaunchShape(const Kernel& k, const CudaVectorShape& v,
                                const int64_t* sizes, int64_t numel, int sm_count) {
  constexpr int64_t kMaxGridX = 2147483647;
  constexpr int64_t kMaxGridY = 65535;
  if (k.transpose_tile > 0) {
    const int64_t inner = sizes[k.ndim - 1], tn = sizes[k.ndim - 2];
    const int64_t side = k.transpose_tile;
    const int64_t tiles = ((inner + side - 1) / side) * ((tn + side - 1) / side);
    TORCH_CHECK(tiles <= kMaxGridX, "fuser: too many tiles for one launch: ", tiles);
    return {tiles, std::clamp<int64_t>(numel / (inner * tn), 1, kMaxGridY), kCudaBlockSize, 0};
  }
  const int64_t last = k.ndim >= 1 ? sizes[k.ndim - 1] : 0;
  const bool enough_vectors =
      v.row_width > 1 && numel / v.row_width >= int64_t{kMinVectorThreadsPerSm} * sm_count;
  // Rows that are not whole vectors, or fewer vectors than kCudaBlockSize, walked as
  // flat vectors (printStraddlingVectors). On the H200, x * sigmoid(s) over [256, C, H, W]
  // of 14.4M floats (s per row), % of the copy bandwidth, flat vectors / before: rows of
  // 7 x 7 88 / 61 (one element per thread), 14 x 14 97 / 68 (the row path: blocks of 64
  // threads for a row's 49 vectors), 28 x 28 99 / 96; in float16 82 / 36, 90 / 44, 98 / 94.
  // Whole vectors of inputs that would load lane by lane keep the row path (not measured
  // there: an LSTM cell's chunks).
  const bool short_whole = last < int64_t{kCudaBlockSize} * v.row_width && !v.lane_loads;
  const bool straddling = v.straddling && k.ndim >= 1 && enough_vectors && last >= v.row_width &&
                          (last % v.row_width != 0 || short_whole);
  const bool rows = !k.flat && k.ndim >= 1 && last >= kRowPathMinInner && !straddling;
  const int64_t inner = rows ? last : 0;
  // Short rows of whole vectors take one row vector per thread and step
  // (printShortRowVectors), straddling ones one flat vector; the grid is sized as for
  // flat vectors.
  const bool short_rows = !k.flat && k.ndim >= 1 && !rows && v.row_width > 1 &&
                          (last % v.row_width == 0 || straddling);
  const int width = rows || short_rows ? v.row_width : v.flat_width;
  int vectors = width > 1 ? 1 : 0;
  if (short_rows && !enough_vectors) vectors = 0;
  if (rows && width > 1) {
    if (numel / width < int64_t{kMinVectorThreadsPerSm} * sm_count) {
      vectors = 0;
    } else {
      // The most the kernel was printed for that the row still fills.
      for (int u = v.row_unroll; u > 1 && vectors == 1; u /= 2) {
        if (inner >= int64_t{v.block} * width * u) vectors = u;
      }
    }
  }
  const int64_t per_thread = vectors > 0 ? int64_t{width} * vectors : 1;
  auto tilesPerRow = [&](int64_t block) {
    const int64_t span = block * per_thread;
    return (inner + span - 1) / span;
  };
  auto blocksFor = [&](int64_t block) {
    if (rows) return numel / inner * tilesPerRow(block);
    return (numel + block * per_thread - 1) / (block * per_thread);
  };
  int64_t block = v.block;
  // A row shorter than a block's span would leave the rest of the block idle (the
  // channels-last [N*H*W, C] rows of a convnet's epilogue: C = 256 floats kept a
  // quarter of each block busy): blocks as wide as the row, in whole warps, two at least.
  if (rows) {
    const int64_t row_threads = (inner + per_thread - 1) / per_thread;
    block = std::clamp<int64_t>((row_threads + 31) / 32 * 32, 64, v.block);
  }
  // Too little work to give every SM a full block: smaller blocks (whole warps, at
  // least two) spread it over more SMs.
  if (blocksFor(block) < sm_count) {
    for (int64_t b = block / 2; b >= 64 && blocksFor(block) < sm_count; b /= 2) block = b;
  }
  if (!rows) {
    return {std::clamp<int64_t>(blocksFor(block), 1, kMaxGridX), 1, static_cast<int>(block),
            vectors};
  }
  // Measured on the H100 (8192 x 8192 rows): half precision rows run 5-15% faster when
  // blocks walk several rows; float rows 2-3% faster with a block per tile.
  const bool capped = !(vectors > 0 && width <= 4);
  const int64_t x = tilesPerRow(block);
  int64_t y = std::min(numel / inner, kMaxGridY);
  if (capped) y = std::clamp<int64_t>(int64_t{kRowBlocksPerSm} * sm_count / x, 1, y);
  return {x, y, static_cast<int>(block), vectors};
}

std::string printCudaKernel(const Kernel& kernel) { return CudaPrinter(kernel).print(); }

int transposeTileSide(c10::ArrayRef<TensorInput> inputs) {
  const bool any = std::any_of(inputs.begin(), inputs.end(),
                               [](const TensorInput& in) { return in.transposed; });
  return any && vectorizableInputs(inputs) ? 64 : 32;
}

int transposeTileGroup(int side) {
  // On the H100, float32 tiles of 32 in groups of 8 took (large bench rows) transpose
  // 275.3 us, permute 136.9, channels-last 136.6; in row-major order 277.7, 143.3 and
  // 145.8; in groups of 32, 280.7, 136.9, 136.7. Pair tiles of 64 in groups of 8 fell
  // from 92% of the copy bandwidth to 35%: they keep row-major order.
  return side == 32 ? 8 : 1;
}

int tileMinBlocksPerSm(const Kernel& kernel) {
  // Measured with one transposed input; with more, the cap would spill far more of the
  // one-element path (two float16 ones: 176 registers unbounded). Eights (16-bit tensors
  // alone) at 4 blocks; fours (a 4-byte neighbour) at 5. Pairs of 4-byte elements at 4
  // in 2-D kernels. On the H200, float32 transposes (x.t() * y + 1).relu() unbounded /
  // at 4 blocks, us: 8192 x 8192 203.5 / 190.6 (the copy bandwidth's time: 189.7), its
  // input one element off (the one-element path) 241.9 / 206.9, 8191 x 8191 325.7 /
  // 225.8. Kernels with outer dims lost under the same cap (a channels-last residual
  // add, N x C x HW, 96.2 -> 126.5), though ptxas spills as much in both; 8-byte
  // tensors keep none.
  if (!vectorTiles(kernel)) return 0;
  int transposed = 0, widest = 1;
  for (const TensorInput& in : kernel.inputs) {
    transposed += in.transposed ? 1 : 0;
    widest = std::max(widest, storageBytes(in.dtype));
  }
  for (const TensorOutput& out : kernel.outputs) widest = std::max(widest, storageBytes(out.dtype));
  if (transposed != 1) return 0;
  switch (tileVectorWidth(kernel)) {
    case 8: return 4;
    case 4: return 5;
    default: return widest <= 4 && kernel.ndim == 2 ? 4 : 0;
  }
}

int64_t transposeTileBytes(c10::ScalarType dtype, int side) {
  return int64_t{side} * (side + tilePadding(dtype)) * storageBytes(dtype);
}

CudaArgLayout::CudaArgLayout(const Kernel& k)
    : num_pointers_(k.inputs.size() + k.outputs.size()), ndim_(k.ndim) {
  // Stride rows in FxArgs order: walked inputs, then strided outputs.
  for (int i : walkedInputs(k)) stride_rows_.push_back(i);
  for (int o : stridedOutputs(k)) stride_rows_.push_back(k.outputs[o].stride_slot);
  for (ScalarArgKind kind : k.scalars) (kind == ScalarArgKind::Double ? num_doubles_ : num_ints_)++;
}

CudaArgSlots CudaArgLayout::pack(void* const* ptrs, const int64_t* sizes, const int64_t* strides,
                                 const double* dargs, const int64_t* iargs, int64_t numel,
                                 int vectors) const {
  CudaArgSlots slots;
  for (size_t i = 0; i < num_pointers_; ++i) slots.push_back(reinterpret_cast<uint64_t>(ptrs[i]));
  if (!stride_rows_.empty()) {
    for (int d = 0; d < ndim_; ++d) slots.push_back(static_cast<uint64_t>(sizes[d]));
    for (int row : stride_rows_) {
      for (int d = 0; d < ndim_; ++d) slots.push_back(static_cast<uint64_t>(strides[row * ndim_ + d]));
    }
  }
  for (int i = 0; i < num_doubles_; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &dargs[i], sizeof(bits));
    slots.push_back(bits);
  }
  for (int i = 0; i < num_ints_; ++i) slots.push_back(static_cast<uint64_t>(iargs[i]));
  slots.push_back(static_cast<uint64_t>(numel));
  slots.push_back(static_cast<uint64_t>(vectors));
  return slots;
}

}  // namespace fuser::codegen
