// Printers of row kernels (Kernel::rows; the order of work is row_schedule.h's).
//
// C++: the common CPU kernel signature (cpp_printer.h), its range [fx_begin, fx_end)
// counting rows. CUDA: `extern "C" __global__ void <name>(const FxRowArgs a)`, the
// arguments in one struct of 8-byte words (cudaRowArgWords), Kernel::row_lanes threads
// per row, cudaRowBlock threads per block.
//
// Both take fx_sizes as the outer dims then the row's dims (Kernel::outer_ndim,
// inner_ndim) and, per tensor input, its strides over the same dims. Outputs are
// contiguous: whole ones row-major over the iteration space, per-row ones over the rows.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <functional>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/row_schedule.h"

namespace fuser::codegen {

std::string printCppRowKernel(const Kernel& kernel);
// Kernel::columns (column_printer.cpp), which both printers hand such kernels to: on
// CPU, blocks of up to kCpuColumnBlock neighbouring rows walked together; on CUDA,
// Kernel::row_vector rows per thread.
inline constexpr int kCpuColumnBlock = 1024;
std::string printColumnKernel(const Kernel& kernel, bool cuda);
// The threads a CUDA column kernel runs per slice of `rows` rows, `vector` per thread:
// whole blocks (cudaRowBlock) of warps that share their rows.
int64_t cudaColumnThreads(int64_t rows, int vector);
// The blocks of those threads (32 units of `vector` rows each).
int64_t cudaColumnBlocks(int64_t rows, int vector);
// A CUDA row kernel's prelude, argument struct and signature, up to its pointers.
void printCudaRowKernelHead(std::ostream& out, const Kernel& kernel);
std::string printCudaRowKernel(const Kernel& kernel);

// Threads per block of a CUDA row kernel: rows of fewer lanes share a block.
int cudaRowBlock(const Kernel& kernel);
// Whether a CUDA row kernel holds its rows in registers (else every pass walks them).
bool cudaRowsHeld(const Kernel& kernel);
// Whether running sums of `sums` column partials fit in registers beside its held rows.
bool cudaColumnPartialsFit(const Kernel& kernel, int sums);
// The elements a lane holds, at most, in the row shape the runtime picks first for a
// kernel with column partials.
inline constexpr int kColumnPartialHeld = 16;
// Whether a row kernel sums some output over its rows (TensorOutput::column_partial).
bool hasColumnPartials(const Kernel& kernel);
// A row kernel with column partials walks its rows in a grid of at most `resident`
// blocks (those the device holds at once), each block's rows one after another; it
// stores one row of partial sums per block: this many for `rows` rows.
int64_t cudaColumnPartialBlocks(int64_t rows_per_block, int64_t rows, int64_t resident);
// Words of FxRowArgs: pointers (inputs, outputs), sizes, strides, doubles, integers
// (each array at least one word) and the row count.
int64_t cudaRowArgWords(const Kernel& kernel);
// How a CUDA row kernel spreads rows of `n` elements over its lanes: `lanes` threads per
// row, each holding `chunks` runs of `vector` elements in registers (chunks 0: rows too
// long to hold, walked by every pass). `vector` is the widest of 16 bytes (at most 8
// elements) of the widest streamed element that `n` divides, 1 when `aligned` is false.
struct CudaRowShape {
  int lanes = 32;  // a power of two; rows of fewer than 32 lanes share a warp
  int chunks = 0;
  int vector = 1;
  bool vector_in_last_dim = false;  // Kernel::row_vector_in_last_dim (set by the runtime)
  bool columns = false;             // Kernel::columns: one lane per row
  bool in_shared = false;           // Kernel::columns_in_shared
  int column_blocks = kColumnBlocks;  // Kernel::column_blocks
};
CudaRowShape cudaRowShape(int64_t n, int widest_element_bytes, bool aligned);
// The same with `lanes` (a power of two from 8 to 1024) instead of the chosen count;
// 0: chosen.
CudaRowShape cudaRowShapeWithLanes(int64_t n, int widest_element_bytes, bool aligned, int lanes);
// Rows that are neighbours in memory, their elements strided (Kernel::columns): each
// thread takes `vector` neighbouring rows (16 bytes of the widest element, at most 8),
// walking them in every pass, so a warp reads 32 vectors of neighbouring rows at once.
CudaRowShape cudaColumnShape(int widest_element_bytes);
// The variants a column kernel is timed in: cudaColumnShape's first, then vectors of 8
// and 4 bytes of the widest element (fewer rows per thread: fewer registers for each
// row's offsets and values, and more threads).
std::vector<CudaRowShape> cudaColumnShapeCandidates(int widest_element_bytes);
// Columns copied into shared memory (Kernel::columns_in_shared): 4 bytes of the widest
// element a thread (a warp's 128 bytes of each element: the block's 32 KiB of a float
// LayerNorm over 256 channels), `blocks` resident blocks (Kernel::column_blocks).
CudaRowShape cudaColumnInSharedShape(int widest_element_bytes, int blocks);
// The inputs such a kernel copies: all but those shared by all rows (one element for
// every row of a block, read from memory as before).
bool cudaColumnCopiesInput(const TensorInput& input);
// The dynamic shared memory such a kernel takes for rows of `n` elements, `vector` rows
// a thread; at most kCudaColumnSharedBytes where it is a candidate (where a block may
// take that beside the kernel's static arrays: 8.0 and 9.0 GPUs).
int64_t cudaColumnSharedBytes(const std::vector<TensorInput>& inputs, int vector, int64_t n);
constexpr int64_t kCudaColumnSharedBytes = 96 * 1024;
// The most a CUDA column kernel's static shared memory holds (the tiles or the
// reductions' arrays, whichever is larger, and the tiled outputs' row offsets).
constexpr int64_t kCudaColumnStaticBytes = 48 * 1024;
// The variants a row kernel is timed in (runtime/variant_timing.h): cudaRowShape's
// first, then half, twice and four times its lanes where the row gives each lane work
// (four times: a float row of 1024 in a block of 256, a vector a lane; H200, residual +
// layer_norm of 32768 x 1024 in float32 took 130.7 us there, 136.2 at the heuristic's 64).
std::vector<CudaRowShape> cudaRowShapeCandidates(int64_t n, int widest_element_bytes,
                                                 bool aligned);

// ---- Shared by the two row printers --------------------------------------------------

// Helpers (fx_row_offset, fx_combine_*) printed after a prelude, for either compiler.
extern const char* const kRowHelpers;
// The fx_combine_* function and the identity of a Reduce expression. The combiner is a
// template on the accumulator type: `combiner<A>(a, b)` for accumulators a and b.
std::string reduceCombiner(const Expr& reduce);
std::string reduceIdentity(const Expr& reduce);
// `acc` (of accumulator type `acc_type`) with one element's value `value` folded in.
std::string reduceStep(const Expr& reduce, const std::string& acc_type, const std::string& acc,
                       const std::string& value);
// Whether `reduce` is a one-pass variance's SquaredDeviations or WelfordMean (CUDA
// only): its accumulator is a Welford triple of kCudaWelfordHelpers, fx_welford<T> or
// fx_welford_mean<T>, which reads as its sum of squared deviations or its mean where
// cast to T.
bool isWelford(const Expr& reduce);
// Whether `reduce` is a float sum that walks accumulate in double (sum_in_type aside).
bool sumsInDouble(const Expr& reduce);
bool hasWelford(const Kernel& kernel);  // any of its expressions
std::string welfordTypeName(const Expr& reduce);
// fx_welford<T> and fx_welford_mean<T>, their element step and Chan's combination of
// two, and warp shuffles that also move one (fx_shfl_xor).
extern const char* const kCudaWelfordHelpers;
// A load of a row kernel at element `e` of the row (row-level inputs ignore it); the
// printer names the row's input offsets offN and strides stN.
std::string rowLoad(const Kernel& kernel, const Expr& load, const std::string& e);
// The element rowLoad reads, in its storage type (a load of a tensor, not an index).
std::string rowLoadElement(const Kernel& kernel, const Expr& load, const std::string& e);
// inN, stN and outN from the pointer array `ptrs` and the stride array `strides`;
// fx_n, the elements of a row, from fx_sizes.
void printRowPointers(std::ostream& out, const Kernel& kernel, const std::string& ptrs,
                      const std::string& strides);
// offN: where row fx_r of input N starts.
void printRowOffsets(std::ostream& out, const Kernel& kernel, const std::string& indent);
// `const T vI = ...;` for each of `ids`, loads at element `element` of the row.
void printRowExprs(std::ostream& out, const Kernel& kernel, const std::vector<ExprId>& ids,
                   const std::string& indent, const std::string& element);
// The same with loads printed by `load`.
void printRowExprs(std::ostream& out, const Kernel& kernel, const std::vector<ExprId>& ids,
                   const std::string& indent,
                   const std::function<std::string(const Expr&)>& load);
// A load in a CPU row of two inner dims walked as nested loops: fx_i0 over the first,
// fx_i1 over the second, fx_e = fx_i0 * size1 + fx_i1 (no division per element).
// Strided inputs read from fx_pN, their run of fx_i0 (printNestedRowBases): an offset
// computed whole per element kept GCC from vectorizing the loop (gathers, 5.5x slower).
std::string rowLoadNested(const Kernel& kernel, const Expr& load);
void printNestedRowBases(std::ostream& out, const Kernel& kernel, const std::string& indent);
// Where row fx_r of output `o` starts (a whole output) or is stored (a per-row one):
// fx_r * fx_n or fx_r, or its offset through the output's strides, ooffO
// (Kernel::strided_outputs; printRowOffsets computes it).
std::string outputRowStart(const Kernel& kernel, size_t o);
// Whole output `o`'s element `e` of the row, as an lvalue: after the row's start, or,
// where the row is not one run (TensorOutput::rows_apart in a row kernel), at the offset
// the output's strides over the row's dims give it. `nested`: e is fx_e of the CPU's two
// nested loops over a row of two dims (fx_i0, fx_i1), which need no division.
std::string outputElement(const Kernel& kernel, size_t o, const std::string& e,
                          bool nested = false);
// outN[fx_r * fx_n + fx_e] = vI for the outputs of one element per row element
// (`nested`: as outputElement's).
void printElementStores(std::ostream& out, const Kernel& kernel, const std::string& indent,
                        bool nested = false);
// outN[fx_r] = vI for the per-row outputs.
void printPerRowStores(std::ostream& out, const Kernel& kernel, const std::string& indent);

// ---- Stages of rows cut in slices (split_rows.h) -------------------------------------

// fx_bufB, buffer B's pointer, from the pointer array `ptrs` (after the outputs').
void printSplitBufferPointers(std::ostream& out, const Kernel& kernel, const RowSchedule& schedule,
                              const std::string& ptrs);
// From unit fx_u: its row fx_r, slice fx_s of fx_splits (read from the integer
// arguments) and the slice's elements [fx_lo, fx_hi), slices of whole vectors of
// Kernel::row_vector elements.
void printSplitUnit(std::ostream& out, const Kernel& kernel, const RowSchedule& schedule,
                    const std::string& indent);
// How a unit's lanes share the walk over a row's partials (CUDA): lane `lane` of
// `lanes` takes every lanes-th partial, and `combine(reduce, type, value)` is the
// expression combining the lanes' values (every lane gets the result).
struct LaneSpread {
  std::string lane;
  int lanes = 1;
  std::function<std::string(const Expr&, const std::string&, const std::string&)> combine;
};
// The reductions of the passes before this stage, each combined from the previous
// stage's partials (by one thread, or spread over the unit's lanes) or read from its
// row values, and what they let the row compute; the combined values a later stage
// reads are stored where `store_guard` holds.
void printFinishedPasses(std::ostream& out, const Kernel& kernel, const RowSchedule& schedule,
                         const std::string& indent, const std::string& store_guard,
                         const LaneSpread* spread = nullptr);
// bufB[fx_u] = `value(reduce)` for the partials this stage writes, where `guard` holds.
void printPartialStores(std::ostream& out, const Kernel& kernel, const RowSchedule& schedule,
                        const std::string& indent, const std::string& guard,
                        const std::function<std::string(ExprId)>& value);
// The index of the slice count among a stage kernel's integer arguments, and the
// count of those arguments.
int splitCountArg(const Kernel& kernel);
int rowIntArgs(const Kernel& kernel);

}  // namespace fuser::codegen
