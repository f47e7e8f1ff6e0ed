// Kernel IR: the scalar computation one fusion group performs per output element,
// as a DAG of typed expressions over indexed loads of its inputs. It knows nothing of
// C++ or CUDA (the printers do) and nothing of TorchScript (lowering.cpp does).
//
// Typing rule: an expression's `type` is the type it is computed in. Float16 and
// BFloat16 never appear as expression types: loads of them produce Float, stores
// round back. Operands of binary ops have equal types (the op table inserts casts).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fuser::codegen {

enum class IrOp : uint8_t {
  // Leaves
  Load,      // element of tensor input `index`, converted to `type`
  Scalar,    // scalar kernel argument `index` (double, int64 or bool), converted to `type`
  Constant,  // literal: `fvalue` for floating types, `ivalue` otherwise
  // Unary (result type = operand type unless noted)
  Cast,  // to `type`
  Neg, Abs, Reciprocal, Sqrt, Rsqrt, Exp, Expm1, Log, Log1p, Log2, Log10,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Sigmoid, Erf, Erfc,
  SigmoidHalf,  // a sigmoid whose result is seen only rounded to float16
  Floor, Ceil, Round /* half to even */, Trunc,
  Sign,        // -1, 0 or 1 (bool: identity); NaN -> 0, as eager on CPU
  // Float -> Float: the nearest float16 / bfloat16 value (round to nearest even), as a
  // store and reload would give. Eager rounds a scalar or 0-dim operand to the common
  // dtype before a half-precision op; comparisons and fmod need that to match bitwise.
  RoundToHalf, RoundToBFloat16,
  IsNan,       // -> Bool
  LogicalNot,  // -> Bool, operand any type (x == 0)
  BitwiseNot,  // integers and bool
  // Binary (operands of equal type; comparisons and logical ops -> Bool)
  Add, Sub, Mul, Div /* true division for floats, C division for ints */, Pow, Atan2,
  Fmod,        // C fmod / C integer remainder (sign of dividend)
  Remainder,   // Python modulo (sign of divisor)
  FloorDiv,    // floor(a / b): Python // for ints and floats
  Min, Max,    // NaN-propagating, like torch.minimum/maximum
  Eq, Ne, Lt, Le, Gt, Ge,
  LogicalAnd, LogicalOr, LogicalXor,  // operands any equal type, -> Bool
  BitAnd, BitOr, BitXor,              // integers and bool
  // Ternary
  Select,  // args[0] (Bool) ? args[1] : args[2]
  // Row kernels (Kernel::rows) only
  Reduce,   // args[0] combined over the row's elements by ReduceKind `index`: one value per row
  RowSize,  // the number of elements a row reduces over, in `type`
  // Random numbers (codegen/philox.h)
  ElementIndex,   // Long: the element's position in the iteration space, row-major (a leaf)
  PhiloxUniform,  // Float in [0, 1) drawn for element args[2] from (seed args[0], offset args[1])
};

// How a Reduce expression combines a row's elements; Max and Min propagate NaN.
// SquaredDeviations: the sum of (x - mean(x))^2 over the row, in one pass (Welford's
// running count, mean and sum of squares, combined by Chan's formula), for rows walked
// from memory on CUDA (Kernel::one_pass_variance); elsewhere a variance takes two passes.
// WelfordMean: the row's mean from the same running triple (exact on a row of equal
// values, where a sum divided by n can be an ulp off), beside SquaredDeviations.
enum class ReduceKind : int32_t { Sum, Max, Min, SquaredDeviations, WelfordMean };

const char* irOpName(IrOp op);
bool isComparison(IrOp op);  // Eq..Ge and the logical binary ops

using ExprId = int32_t;

struct Expr {
  IrOp op;
  c10::ScalarType type;          // computation type (never Half/BFloat16)
  std::vector<ExprId> args;
  int32_t index = -1;            // Load: input slot; Scalar: scalar slot; Reduce: ReduceKind
  double fvalue = 0;             // Constant of floating type
  int64_t ivalue = 0;            // Constant of integral/bool type
  // Reduce of ReduceKind::Sum: accumulate in `type` on the CPU too, as eager's CPU
  // softmax sums its exponentials (other float sums go through double there).
  bool sum_in_type = false;
};

// How a tensor input is addressed by the kernel (part of the kernel's specialization).
enum class Access : uint8_t {
  Flat,        // same sizes and strides as the output's iteration order: element i at i
  Broadcast1,  // a single element (numel 1): loaded once
  Strided,     // general: offset from the multi-index and per-dimension strides
};

struct TensorInput {
  c10::ScalarType dtype;  // storage type
  Access access;
  bool inner_unit_stride = false;  // Strided: stride of the innermost dim is 1 (vectorizable)
  bool inner_zero_stride = false;  // Strided: the innermost dim is broadcast
  // Strided, CUDA: an earlier Strided input with exactly these strides (the chunks of
  // one tensor, say), whose offsets this one reuses; -1: none.
  int32_t same_strides_as = -1;
  // Strided, in a Kernel with a transpose_tile: steps by 1 along dim ndim-2 and not
  // along ndim-1, so it is read along ndim-2 (a transpose, say, or channels-last
  // activations beside row-major ones).
  bool transposed = false;
  // Row kernels: the row's last dim is broadcast (group_norm's weight, read per channel
  // across the dims after the channels).
  bool row_last_zero_stride = false;
  // Row kernels: the row's last dim has unit stride (a row of NCHW channels over N and
  // H * W), so the CPU's nested walk of a two-dim row reads it as a vector.
  bool row_last_unit_stride = false;
  // Column kernels: the innermost outer dim (the run a block of rows lies in) is
  // broadcast, so every row of a block reads the same element (layer_norm's
  // per-position mean beside its input, a per-channel weight over NCHW's channels).
  bool outer_zero_stride = false;
};

enum class ScalarArgKind : uint8_t { Double, Int64, Bool };

struct TensorOutput {
  c10::ScalarType dtype;  // storage type
  ExprId value;
  // Flat: element i at i (a fresh output, or a dense slice of a cat). Strided: a slice
  // of a cat's buffer, addressed through the strides of launch tensor `stride_slot`
  // (tensor inputs come first, then strided outputs). Never Broadcast1.
  Access access = Access::Flat;
  int32_t stride_slot = -1;
  bool inner_unit_stride = false;  // Strided: stride of the innermost dim is 1
  bool per_row = false;  // row kernels: one element per row, contiguous over the rows
  // A whole output laid out otherwise than the walk stores it. Column kernels: its rows
  // do not lie side by side (a normalization's contiguous result over a transposed
  // input): CUDA stores it through a tile. Row kernels: a row is not one run (eager's
  // layout of a permuted gradient beside its sum over N, H and W): each element goes
  // where the output's strides over the row's dims put it (outputElement).
  bool rows_apart = false;
  // CUDA row kernels with rows held (Kernel::row_chunks > 0): the value summed over the
  // rows each block walks, stored in its value's type (float) as one row of partial
  // sums per block (cudaColumnPartialBlocks of them); the runtime sums the partials into
  // the output, of `dtype`. A
  // leading-dims sum of what the row kernel computes, without writing or reading it
  // again (layer_norm's weight and bias gradients beside its input gradient).
  bool column_partial = false;
};

// CUDA strided kernels: the one shape a kernel is compiled for, printed as constants so
// the compiler folds the index math (a division by a known size becomes a multiply).
// Empty sizes: the kernel reads sizes and strides from its arguments, for any shape.
struct FixedShape {
  std::vector<int64_t> sizes;    // collapsed, outermost first (Kernel::ndim of them)
  std::vector<int64_t> strides;  // per launch tensor (inputs, then cat slices), ndim each
  int64_t numel = 0;
  int vectors = -1;  // the launch's vectors per thread (CudaLaunchShape); -1: read it
  // Per tensor input: the input whose pointer it is read through (itself, or an earlier
  // chunk of the same tensor), `pointer_delta` elements further on. Empty: each its own.
  std::vector<int32_t> pointer_base;
  std::vector<int64_t> pointer_delta;
  bool empty() const { return sizes.empty(); }
};

// CUDA column kernels' resident blocks per multiprocessor (Kernel::column_blocks), but
// where copied into shared memory with tiles.
constexpr int kColumnBlocks = 2;

struct Kernel {
  std::string name;  // C identifier, unique per source text
  std::vector<Expr> exprs;  // topologically ordered
  std::vector<TensorInput> inputs;
  std::vector<ScalarArgKind> scalars;
  std::vector<TensorOutput> outputs;
  int ndim = 1;        // iteration rank after collapsing dimensions
  bool flat = true;    // every input is Flat or Broadcast1, every output Flat: one flat loop
  bool index32 = true;     // CUDA: all offsets fit in 32 bits
  bool vectorize = false;  // CUDA flat kernels: every pointer allows 16-byte accesses
  FixedShape fixed;        // CUDA strided kernels: empty unless compiled for one shape
  // The two innermost dims are walked in square tiles of this side (0: not), so that the
  // `transposed` inputs are read along their own fastest dim while outputs are written
  // along theirs: CUDA stages those inputs through shared memory, the CPU walks bands of
  // rows (and ignores the side).
  int transpose_tile = 0;
  // CUDA: consecutive blocks take this many tiles along dim ndim-2 before moving along
  // the innermost (1: row-major order of tiles).
  int tile_group = 1;
  // CUDA: __launch_bounds__'s minimum of resident blocks per SM (0: none), which caps the
  // registers per thread (codegen::minBlocksPerSm).
  int min_blocks_per_sm = 0;
  // Where the kernel runs: the autocast casts' results depend on it.
  c10::DeviceType device = c10::DeviceType::CPU;
  // A row kernel (row_printer.h): the iteration space is rows (the outer `outer_ndim`
  // dims) times the elements of a row (the trailing `inner_ndim` dims), Reduce
  // expressions combine a row's elements, and outputs are whole (one element per
  // element) or per row (TensorOutput::per_row). Inputs are Strided, with
  // inner_unit_stride / inner_zero_stride describing the row's dims.
  bool rows = false;
  int outer_ndim = 1;
  int inner_ndim = 1;
  // CUDA row kernels: threads that share one row (a power of two: under 32, rows share
  // a warp; over, a block).
  int row_lanes = 32;
  // CUDA row kernels held in registers: each lane loads `row_chunks` runs of
  // `row_vector` consecutive elements of the row once, and every pass reads them there
  // (0: each pass loads again from memory, for rows too long to hold).
  int row_chunks = 0;
  int row_vector = 1;
  // The row's last dim holds whole vectors of row_vector elements: the elements of one
  // vector differ in their last-dim index only, so a strided load finds the vector's
  // first element once and steps along that dim for the rest.
  bool row_vector_in_last_dim = false;
  // Row kernels: outputs are stored through strides of their own over the outer dims
  // (launch strides after the inputs', per output), not contiguously: eager's layout of
  // a group whose inputs are permuted views (a transposed activation). A whole output's
  // row is still one contiguous run.
  bool strided_outputs = false;
  // Rows that are neighbours in memory, their elements strided (a sum over the leading
  // dims), printed by column_printer.cpp: blocks of neighbouring rows walked together
  // (CUDA: row_vector rows per thread, row_lanes 1), the units of rows cut in slices
  // numbered slice by slice, rows innermost.
  bool columns = false;
  // CUDA columns: each thread first copies its rows' elements of every input not shared
  // by all rows (cudaColumnCopiesInput) into shared memory (cp.async: all in flight at
  // once, no registers held), and every walk reads them there (cudaColumnSharedBytes
  // sizes the launch's dynamic shared memory). The register-bound walk from memory kept
  // a float16 LayerNorm over the 256 channels of [32, 256, 64, 64] at 28% of the H200's
  // DRAM bandwidth.
  bool columns_in_shared = false;
  // CUDA columns: blocks each multiprocessor must hold at once (the launch bounds); at 4
  // a warp walks 4 elements a step, not 8, so that its registers fit (48 a float thread
  // of a LayerNorm, against 71).
  int column_blocks = kColumnBlocks;
  // Rows cut in slices (split_rows.h): the stage this kernel computes; -1: whole rows.
  int row_stage = -1;
  // Variances (var, std, layer_norm, group_norm) as one SquaredDeviations reduction
  // rather than a mean and then the centred squares: the runtime asks for it where a
  // CUDA row is walked from memory in every pass (looped, cut in slices, columns), so
  // that the statistics read the input once, not twice.
  bool one_pass_variance = false;
};

// Builds expressions, folding nothing: printers and the C/CUDA compilers do that.
class IrBuilder {
 public:
  explicit IrBuilder(Kernel& kernel) : k_(kernel) {}
  ExprId load(int32_t input, c10::ScalarType type);
  ExprId scalar(int32_t slot, c10::ScalarType type);
  ExprId constant(double value, c10::ScalarType type);  // integral types take int64(value)
  ExprId intConstant(int64_t value, c10::ScalarType type);
  ExprId cast(ExprId x, c10::ScalarType type);  // no-op when the type already matches
  ExprId unary(IrOp op, ExprId x);
  ExprId binary(IrOp op, ExprId a, ExprId b);  // a and b must have equal types
  ExprId select(ExprId cond, ExprId a, ExprId b);
  // A row's elements of `x` combined by `kind`, in x's type; marks the kernel a row kernel.
  ExprId reduce(ReduceKind kind, ExprId x, bool sum_in_type = false);
  ExprId rowSize(c10::ScalarType type);
  ExprId elementIndex();
  // A uniform float in [0, 1) for this element from the Philox state (seed, offset),
  // both Long expressions.
  ExprId philoxUniform(ExprId seed, ExprId offset);
  c10::ScalarType typeOf(ExprId e) const { return k_.exprs.at(e).type; }
  c10::DeviceType device() const { return k_.device; }
  bool onePassVariance() const { return k_.one_pass_variance; }

 private:
  ExprId add(Expr e);
  Kernel& k_;
};

// Whether the kernel draws random numbers (its source then needs kPhiloxPrelude).
bool drawsRandomNumbers(const Kernel& k);
// Whether k computes sin, cos or tan (the C++ kernels' trigonometry prelude).
bool callsTrigonometry(const Kernel& k);

// The type an element of `storage` is computed in.
inline c10::ScalarType computeType(c10::ScalarType storage) {
  return (storage == c10::ScalarType::Half || storage == c10::ScalarType::BFloat16)
             ? c10::ScalarType::Float
             : storage;
}

}  // namespace fuser::codegen
