// C++ printer. Every used expression becomes one `const T vN = ...;` line; the ones
// that do not vary per element are printed before the loop, the ones that vary only
// from row to row before the row's loop.
#include "codegen/cpp_printer.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "codegen/common_prelude.h"
#include "codegen/cpp_prelude.h"
#include "codegen/cpp_trig_prelude.h"
#include "codegen/cpp_vector_math.h"
#include "codegen/expr_analysis.h"
#include "codegen/expr_printer.h"
#include "codegen/philox.h"

namespace fuser::codegen {
namespace {

// transpose_tile kernels walk bands of up to kBandRows rows (consecutive indices of dim
// ndim-2) kBandColumns columns at a time: a transposed input's cache line then serves
// every row of the band before it is evicted, and the band's outputs stay in L1.
constexpr int kBandRows = 32;
constexpr int kBandColumns = 64;

// Rows shorter than this many elements (a limit that shortRowLimit halves or doubles
// by the kernel's work) run kShortBandRows at a time as one flat loop, each strided
// tensor's offsets read from a table built once per call: a row's loop of fewer
// elements than two vectors runs almost all in its scalar tail. On one core, silu(x + w)
// of a [4, 1152, 7, 7] x and a [7] w took 3.7 ns an element row by row, 0.8 as bands
// (ATen's flat silu alone 0.4).
constexpr int kShortRow = 16;
constexpr int kShortBandRows = 32;
// Work (opCost units: a transcendental function) from which bands of short rows pay
// beyond the usual lengths (shortRowLimit).
constexpr int kExpensiveWork = 16;

// Kernels that draw random numbers walk their range in chunks of this many elements,
// each chunk's draws first, one Philox block per four elements into a buffer, then the
// element loop reading them (a draw per element recomputes each block four times): on
// 2 cores, 2^20 floats kept with p 0.1 took 7.4 ms drawn per element, 2.3 ms by chunks.
constexpr int kDrawChunk = 1024;
// Element loops reading or storing float16 runs convert them this many elements at a
// time (fx_h2f_run, fx_f2h_run: F16C) through buffers of floats (chooseHalfRuns).
constexpr int kHalfRun = 256;

class CppPrinter {
 public:
  explicit CppPrinter(const Kernel& k)
      : k_(k), facts_(analyzeExprs(k)), per_row_(perRowExprs(k, facts_)) {}

  std::string print() {
    out_ << kCppPrelude << kCppVectorMath << trigPreludeFor(k_) << kCommonPrelude
         << (drawsRandomNumbers(k_) ? kPhiloxPrelude : "")
         << "\nextern \"C\" void " << k_.name
         << "(void* const* fx_ptrs, const int64_t* fx_sizes, const int64_t* fx_strides,\n"
         << "    const double* fx_dargs, const int64_t* fx_iargs, int32_t* fx_error,\n"
         << "    int64_t fx_begin, int64_t fx_end) {\n";
    printPointers();
    if (chooseHalfRuns()) printHalfRunBuffers();
    printExprs(Vary::PerCall, "  ");
    const bool chunks = printDrawChunkStart();
    if (k_.flat) {
      printFlatLoop();
    } else {
      printStridedLoop();
    }
    if (chunks) out_ << "  }\n  }\n";
    out_ << "}\n";
    return out_.str();
  }

 private:
  // The random draws of the kernel (drawn ahead by chunks when their state is the same
  // for every element, as a kernel argument is).
  std::vector<ExprId> chunkDraws() const {
    std::vector<ExprId> draws;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op != IrOp::PhiloxUniform || !facts_.used[i]) continue;
      if (!facts_.invariant[e.args[0]] || !facts_.invariant[e.args[1]]) return {};
      draws.push_back(static_cast<ExprId>(i));
    }
    return draws;
  }

  // Opens the chunk loop and fills each draw's buffer fx_uN for elements [fx_c0, fx_c1);
  // the loops after it see fx_begin and fx_end as the chunk's. False when the kernel
  // draws nothing.
  bool printDrawChunkStart() {
    draws_ = chunkDraws();
    if (draws_.empty()) return false;
    const std::string chunk = std::to_string(kDrawChunk);
    out_ << "  for (int64_t fx_c0 = fx_begin; fx_c0 < fx_end; fx_c0 += " << chunk << ") {\n"
         << "  const int64_t fx_c1 = fx_c0 + " << chunk << " < fx_end ? fx_c0 + " << chunk
         << " : fx_end;\n"
         << "  const int64_t fx_q0 = fx_c0 >> 2, fx_q1 = (fx_c1 + 3) >> 2;\n"
         << "  const int64_t fx_ubase = fx_q0 << 2;\n";
    for (ExprId id : draws_) {
      const Expr& e = k_.exprs[id];
      const std::string buf = "fx_u" + std::to_string(id);
      out_ << "  float " << buf << "[" << kDrawChunk + 8 << "];\n"
           << "#pragma GCC ivdep\n"
           << "  for (int64_t fx_q = fx_q0; fx_q < fx_q1; ++fx_q) {\n"
           << "    uint32_t fx_w[4];\n"
           << "    fx_philox_block((uint64_t)v" << e.args[0] << ", (uint64_t)v" << e.args[1]
           << ", (uint64_t)fx_q, fx_w);\n"
           << "    float* fx_d = " << buf << " + ((fx_q - fx_q0) << 2);\n";
      for (int w = 0; w < 4; ++w) {
        out_ << "    fx_d[" << w << "] = fx_philox_to_uniform(fx_w[" << w << "]);\n";
      }
      out_ << "  }\n";
    }
    out_ << "  {\n  const int64_t fx_begin = fx_c0, fx_end = fx_c1;\n";
    return true;
  }

  void printPointers() {
    const int nin = static_cast<int>(k_.inputs.size());
    for (int i = 0; i < nin; ++i) {
      const char* t = storageTypeName(k_.inputs[i].dtype);
      out_ << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)fx_ptrs["
           << i << "];\n";
      if (!k_.flat && k_.inputs[i].access == Access::Strided) {
        out_ << "  const int64_t* st" << i << " = fx_strides + " << i * k_.ndim << ";\n";
      }
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const char* t = storageTypeName(k_.outputs[o].dtype);
      out_ << "  " << t << "* __restrict__ out" << o << " = (" << t << "*)fx_ptrs[" << nin + o
           << "];\n";
      if (k_.outputs[o].access == Access::Strided) {
        out_ << "  const int64_t* so" << o << " = fx_strides + "
             << k_.outputs[o].stride_slot * k_.ndim << ";\n";
      }
    }
    out_ << "  (void)fx_sizes; (void)fx_strides; (void)fx_dargs; (void)fx_iargs; "
            "(void)fx_error;\n";
  }

  void printFlatLoop() {
    if (any_half_) {
      printHalfRunsOpen("i", "fx_begin", "fx_end", "  ");
      out_ << "#pragma GCC ivdep\n  for (int64_t i = fx_h0; i < fx_h1; ++i) {\n";
    } else {
      out_ << "#pragma GCC ivdep\n  for (int64_t i = fx_begin; i < fx_end; ++i) {\n";
    }
    printExprs(Vary::PerRowOrElement, "    ");
    printStores("    ");
    out_ << "  }\n";
    if (any_half_) printHalfRunsClose("  ");
  }

  // ---- float16 runs ---------------------------------------------------------------------
  // The float16 inputs an element loop reads along its elements (flat, or of unit stride
  // in a row) and the float16 outputs it stores so: converted kHalfRun elements at a
  // time by F16C (fx_h2f_run, fx_f2h_run) into fx_hin<k> and from fx_hout<o>, where the
  // element-by-element conversions take about 8 and 15 vector operations. One core, the
  // benchmark's gelu_bias (medium, float16): 1524 -> 1278 us (TorchScript 1238).
  bool chooseHalfRuns() {
    half_in_.assign(k_.inputs.size(), false);
    half_out_.assign(k_.outputs.size(), false);
    if (k_.transpose_tile > 0) return false;
    auto alongRun = [&](Access access, bool unit) {
      return access == Access::Flat || (!k_.flat && access == Access::Strided && unit);
    };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      const Expr& e = k_.exprs[i];
      if (e.op != IrOp::Load || !facts_.used[i] || facts_.invariant[i] || per_row_[i]) continue;
      const TensorInput& in = k_.inputs[e.index];
      if (in.dtype != c10::ScalarType::Half || !alongRun(in.access, in.inner_unit_stride)) {
        continue;
      }
      half_in_[e.index] = any_half_ = true;
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      if (out.dtype == c10::ScalarType::Half && alongRun(out.access, out.inner_unit_stride)) {
        half_out_[o] = any_half_ = true;
      }
    }
    return any_half_;
  }

  void printHalfRunBuffers() {
    const std::string n = std::to_string(kHalfRun);
    for (size_t i = 0; i < half_in_.size(); ++i) {
      if (half_in_[i]) out_ << "  float fx_hin" << i << "[" << n << "];\n";
    }
    for (size_t o = 0; o < half_out_.size(); ++o) {
      if (half_out_[o]) out_ << "  float fx_hout" << o << "[" << n << "];\n";
    }
  }

  // Where element `index` of a run's tensor starts: the flat index i, or row offsets + j.
  std::string runStart(Access access, const std::string& offset) const {
    return access == Access::Flat ? (half_index_ == "i" ? "" : "fx_base + ") : offset + " + ";
  }

  // Opens the loop over runs [fx_h0, fx_h1) of the element loop's range [lo, hi) of
  // `index` and converts the run's float16 inputs.
  void printHalfRunsOpen(const std::string& index, const std::string& lo, const std::string& hi,
                         const std::string& ind) {
    half_index_ = index;
    const std::string n = std::to_string(kHalfRun);
    out_ << ind << "for (int64_t fx_h0 = " << lo << "; fx_h0 < " << hi << "; fx_h0 += " << n
         << ") {\n"
         << ind << "const int64_t fx_h1 = " << hi << " - fx_h0 < " << n << " ? " << hi
         << " : fx_h0 + " << n << ";\n";
    for (size_t i = 0; i < half_in_.size(); ++i) {
      if (!half_in_[i]) continue;
      const std::string k = std::to_string(i);
      out_ << ind << "fx_h2f_run(in" << k << " + " << runStart(k_.inputs[i].access, "off" + k)
           << "fx_h0, fx_hin" << k << ", fx_h1 - fx_h0);\n";
    }
    half_runs_ = true;
  }

  void printHalfRunsClose(const std::string& ind) {
    for (size_t o = 0; o < half_out_.size(); ++o) {
      if (!half_out_[o]) continue;
      const std::string k = std::to_string(o);
      out_ << ind << "fx_f2h_run(fx_hout" << k << ", out" << k << " + "
           << runStart(k_.outputs[o].access, "offo" + k) << "fx_h0, fx_h1 - fx_h0);\n";
    }
    out_ << ind << "}\n";
    half_runs_ = false;
  }

  // Rows of the innermost dimension: the row's loop has unit/zero strides baked in so
  // that it vectorizes. The offsets come from the row index by divisions at the start
  // of the range and after a band, and step by one stride of dim ndim-2 to the next row
  // of the same run: x * (s + b) over rows of 16 took 16.5 us with divisions per row,
  // 9.7 stepped (one core, [2, 1152, 4, 4]). Short rows go by bands (printShortBand).
  void printStridedLoop() {
    const int nd = k_.ndim;
    out_ << "  const int64_t fx_inner = fx_sizes[" << nd - 1 << "];\n"
         << "  int64_t fx_i = fx_begin;\n";
    const std::vector<std::pair<std::string, std::string>> offsets = stridedOffsets();
    const bool short_bands = k_.transpose_tile == 0 && !offsets.empty() && nd > 1;
    const bool steps = !offsets.empty() && nd > 1;
    if (short_bands) printShortBandTables(offsets);
    for (const auto& [off, st] : offsets) out_ << "  int64_t " << off << " = 0;\n";
    out_ << "  int64_t fx_row = 0, fx_col = 0;\n";
    if (steps) out_ << "  int64_t fx_run_left = 0;\n  bool fx_stepped = false;\n";
    out_ << "  while (fx_i < fx_end) {\n";
    if (steps) out_ << "    if (!fx_stepped) {\n";
    out_ << "    fx_row = fx_i / fx_inner;\n"
         << "    fx_col = fx_i - fx_row * fx_inner;\n";
    if (steps) {
      const std::string run = std::to_string(nd - 2);
      for (const auto& [off, st] : offsets) out_ << "    " << off << " = 0;\n";
      out_ << "    {\n      int64_t fx_r = fx_row;\n";
      for (int d = nd - 2; d >= 0; --d) {
        out_ << "      { const int64_t fx_idx = fx_r % fx_sizes[" << d << "]; fx_r /= fx_sizes["
             << d << "];";
        for (const auto& [off, st] : offsets) {
          out_ << " " << off << " += fx_idx * " << st << "[" << d << "];";
        }
        if (d == nd - 2) out_ << " fx_run_left = fx_sizes[" << run << "] - 1 - fx_idx;";
        out_ << " }\n";
      }
      out_ << "    }\n    }\n    fx_stepped = false;\n";
    }
    out_ << "    const int64_t fx_n = (fx_inner - fx_col) < (fx_end - fx_i) ? (fx_inner - fx_col) "
            ": (fx_end - fx_i);\n";
    if (k_.transpose_tile > 0) printBand(offsets);
    if (short_bands) printShortBand();
    printExprs(Vary::PerRow, "    ");
    out_ << "    const int64_t fx_base = fx_i - fx_col;\n";
    if (any_half_) {
      printHalfRunsOpen("j", "fx_col", "fx_col + fx_n", "    ");
      out_ << "#pragma GCC ivdep\n    for (int64_t j = fx_h0; j < fx_h1; ++j) {\n";
    } else {
      out_ << "#pragma GCC ivdep\n    for (int64_t j = fx_col; j < fx_col + fx_n; ++j) {\n";
    }
    out_ << "      const int64_t i = fx_base + j;\n";
    printExprs(Vary::PerElement, "      ");
    printStores("      ");
    out_ << "    }\n";
    if (any_half_) printHalfRunsClose("    ");
    out_ << "    fx_i += fx_n;\n";
    if (steps) {
      // The next row of the same run of dim ndim-2: its offsets are this row's plus one
      // stride of that dim, no divisions (the band paths above divide again).
      const std::string run = std::to_string(nd - 2);
      out_ << "    if (fx_run_left > 0) {\n      --fx_run_left;\n      ++fx_row;\n"
           << "      fx_col = 0;\n";
      for (const auto& [off, st] : offsets) {
        out_ << "      " << off << " += " << st << "[" << run << "];\n";
      }
      out_ << "      fx_stepped = true;\n    }\n";
    }
    out_ << "  }\n";
  }

  // {offset, strides} of strided inputs (offN, stN), then strided outputs (offoN, soN).
  std::vector<std::pair<std::string, std::string>> stridedOffsets() const {
    std::vector<std::pair<std::string, std::string>> offsets;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (k_.inputs[i].access != Access::Strided) continue;
      offsets.emplace_back("off" + std::to_string(i), "st" + std::to_string(i));
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (k_.outputs[o].access != Access::Strided) continue;
      offsets.emplace_back("offo" + std::to_string(o), "so" + std::to_string(o));
    }
    return offsets;
  }

  // Per strided tensor, the offset of each element of a band of kShortBandRows short
  // rows from the band's first element (fx_tbl_offN), where the rows are short and the
  // offsets fit an int32.
  void printShortBandTables(const std::vector<std::pair<std::string, std::string>>& offsets) {
    const std::string row = std::to_string(k_.ndim - 2);
    const std::string col = std::to_string(k_.ndim - 1);
    const int limit = shortRowLimit();
    out_ << "  bool fx_short = fx_inner < " << limit << " && (fx_inner < " << kShortRow
         << " || fx_inner % " << kShortRow << " != 0);\n";
    for (const auto& [off, st] : offsets) {
      out_ << "  fx_short = fx_short && " << kShortBandRows << " * (" << st << "[" << row
           << "] + " << st << "[" << col << "]) < 0x40000000;\n";
    }
    for (const auto& [off, st] : offsets) {
      out_ << "  int32_t fx_tbl_" << off << "[" << kShortBandRows * limit << "];\n";
    }
    const bool row_values = !bandRowValues().empty();
    if (row_values) out_ << "  int32_t fx_tbl_row[" << kShortBandRows * limit << "];\n";
    out_ << "  if (fx_short) {\n"
         << "    for (int64_t fx_b = 0; fx_b < " << kShortBandRows << "; ++fx_b)\n"
         << "      for (int64_t fx_j = 0; fx_j < fx_inner; ++fx_j) {\n";
    for (const auto& [off, st] : offsets) {
      out_ << "        fx_tbl_" << off << "[fx_b * fx_inner + fx_j] = (int32_t)(fx_b * " << st
           << "[" << row << "] + fx_j * " << st << "[" << col << "]);\n";
    }
    if (row_values) out_ << "        fx_tbl_row[fx_b * fx_inner + fx_j] = (int32_t)fx_b;\n";
    out_ << "      }\n  }\n";
  }

  // The per-row values a band's element loop reads (fx_rvN): per-row expressions read
  // by per-element ones or stored.
  std::vector<size_t> bandRowValues() const {
    std::vector<bool> read(k_.exprs.size(), false);
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!prints(i, Vary::PerElement)) continue;
      for (ExprId a : k_.exprs[i].args) read[a] = true;
    }
    for (const TensorOutput& o : k_.outputs) read[o.value] = true;
    std::vector<size_t> values;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (read[i] && prints(i, Vary::PerRow)) values.push_back(i);
    }
    return values;
  }

  // From the start of a row with a band of whole short rows left in the range and in
  // this run of dim ndim-2 (so that row b's offsets are row 0's plus b strides of that
  // dim): the band's per-row values first, a loop over its rows (a squeeze-excite gate's
  // sigmoid once per row: x * sigmoid(s + b) over rows of 4 took 31 us row by row,
  // 16.5 so, one core), then the band as one flat loop, strided tensors read and written
  // through the tables and per-row values read by row (fx_tbl_row).
  void printShortBand() {
    const std::string row = std::to_string(k_.ndim - 2);
    out_ << "    if (fx_short && fx_col == 0 && fx_end - fx_i >= " << kShortBandRows
         << " * fx_inner && fx_row % fx_sizes[" << row << "] + " << kShortBandRows
         << " <= fx_sizes[" << row << "]) {\n"
         << "      const int64_t fx_band_n = " << kShortBandRows << " * fx_inner;\n";
    const std::vector<size_t> row_values = bandRowValues();
    for (size_t v : row_values) {
      out_ << "      " << computeTypeName(k_.exprs[v].type) << " fx_rv" << v << "["
           << kShortBandRows << "];\n";
    }
    if (!row_values.empty()) {
      out_ << "#pragma GCC ivdep\n"
           << "      for (int64_t fx_b = 0; fx_b < " << kShortBandRows << "; ++fx_b) {\n";
      in_band_rows_ = true;
      printExprs(Vary::PerRow, "        ");
      in_band_rows_ = false;
      for (size_t v : row_values) out_ << "        fx_rv" << v << "[fx_b] = v" << v << ";\n";
      out_ << "      }\n";
    }
    out_ << "#pragma GCC ivdep\n"
         << "      for (int64_t fx_e = 0; fx_e < fx_band_n; ++fx_e) {\n"
         << "        const int64_t i = fx_i + fx_e;\n";
    for (size_t v : row_values) {
      out_ << "        const " << computeTypeName(k_.exprs[v].type) << " v" << v << " = fx_rv"
           << v << "[fx_tbl_row[fx_e]];\n";
    }
    in_short_band_ = true;
    printExprs(Vary::PerElement, "        ");
    printStores("        ");
    in_short_band_ = false;
    out_ << "      }\n      fx_i += fx_band_n;\n      continue;\n    }\n";
  }

  // From the start of a row with at least two whole rows left in the range: the rows
  // up to the end of this index of dim ndim-2's run (at most kBandRows), walked
  // kBandColumns columns at a time. Per block of columns, the transposed inputs are
  // first copied into a local buffer (2- and 4-byte elements in 8 x 8 squares
  // transposed in vector registers, the rest and the edges column by column), then the
  // rows read the buffer along with the other inputs. Read in place instead, row by
  // row, a transposed input keeps a cache line per column live, and columns a multiple
  // of 1 KB apart share cache sets and evict each other. On 2 cores, inputs beyond the
  // caches, float32, in place / buffer copied by column / in squares: a 2048 x 2048
  // transpose 4.7 / 2.0 / 1.55 ms, an NCHW tensor read as NHWC (128 channels) 1.1 /
  // 0.81 / 0.67 ms, channels-last beside NCHW 2.0 / 0.86 / 0.76 ms. Row b's offsets
  // are row 0's plus b strides of dim ndim-2 (the names shadow the row's own).
  void printBand(const std::vector<std::pair<std::string, std::string>>& offsets) {
    const int nd = k_.ndim;
    const std::string t = std::to_string(nd - 2);
    const std::string last = std::to_string(nd - 1);
    out_ << "    if (fx_col == 0 && fx_end - fx_i >= 2 * fx_inner) {\n"
         << "      int64_t fx_band = (fx_end - fx_i) / fx_inner;\n"
         << "      const int64_t fx_t_left = fx_sizes[" << t << "] - fx_row % fx_sizes[" << t
         << "];\n"
         << "      if (fx_band > fx_t_left) fx_band = fx_t_left;\n"
         << "      if (fx_band > " << kBandRows << ") fx_band = " << kBandRows << ";\n";
    for (const auto& [off, st] : offsets) {
      out_ << "      const int64_t fx_row_" << off << " = " << off << ";\n";
    }
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      out_ << "      " << storageTypeName(k_.inputs[i].dtype) << " fx_buf" << i << "["
           << kBandRows << "][" << kBandColumns << "];\n";
    }
    out_ << "      for (int64_t fx_jb = 0; fx_jb < fx_inner; fx_jb += " << kBandColumns << ") {\n"
         << "        const int64_t fx_je = fx_jb + " << kBandColumns
         << " < fx_inner ? fx_jb + " << kBandColumns << " : fx_inner;\n";
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      if (!k_.inputs[i].transposed) continue;
      const std::string n = std::to_string(i);
      const std::string column_stride = "st" + n + "[" + last + "]";
      const std::string column = "in" + n + " + fx_row_off" + n + " + fx_j * " + column_stride;
      std::string ind = "        ";
      const size_t element = c10::elementSize(k_.inputs[i].dtype);
      if (element == 2 || element == 4) {
        // A whole block moves in 8 x 8 squares transposed in vector registers; the
        // edges element by element.
        out_ << "        if (fx_band == " << kBandRows << " && fx_je - fx_jb == " << kBandColumns
             << ") {\n"
             << "          for (int64_t fx_j = fx_jb; fx_j < fx_je; fx_j += 8)\n"
             << "            for (int fx_b = 0; fx_b < " << kBandRows << "; fx_b += 8)\n"
             << "              fx_transpose8x8<" << (element == 2 ? "short" : "int") << ">("
             << column << " + fx_b, " << column_stride
             << ", &fx_buf" << n << "[fx_b][fx_j - fx_jb], " << kBandColumns << ");\n"
             << "        } else {\n";
        ind = "          ";
      }
      out_ << ind << "for (int64_t fx_j = fx_jb; fx_j < fx_je; ++fx_j) {\n"
           << ind << "  const " << storageTypeName(k_.inputs[i].dtype) << "* fx_column = " << column
           << ";\n"
           << ind << "  for (int64_t fx_b = 0; fx_b < fx_band; ++fx_b) fx_buf" << n
           << "[fx_b][fx_j - fx_jb] = fx_column[fx_b];\n"
           << ind << "}\n";
      if (ind.size() > 8) out_ << "        }\n";
    }
    out_ << "        for (int64_t fx_b = 0; fx_b < fx_band; ++fx_b) {\n"
         << "          const int64_t fx_base = fx_i + fx_b * fx_inner;\n";
    for (const auto& [off, st] : offsets) {
      out_ << "          const int64_t " << off << " = fx_row_" << off << " + fx_b * " << st
           << "[" << t << "];\n          (void)" << off << ";\n";
    }
    printExprs(Vary::PerRow, "          ");
    out_ << "#pragma GCC ivdep\n"
         << "          for (int64_t j = fx_jb; j < fx_je; ++j) {\n"
         << "            const int64_t i = fx_base + j;\n";
    in_buffer_ = true;
    printExprs(Vary::PerElement, "            ");
    in_buffer_ = false;
    printStores("            ");
    out_ << "          }\n        }\n      }\n"
         << "      fx_i += fx_band * fx_inner;\n      continue;\n    }\n";
  }

  void printStores(const std::string& indent) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const TensorOutput& out = k_.outputs[o];
      const std::string n = std::to_string(o);
      std::string elem = "[i]";
      if (half_runs_ && half_out_[o]) {
        out_ << indent << "fx_hout" << n << "[" << half_index_ << " - fx_h0] = "
             << storeConversion(c10::ScalarType::Float, "v" + std::to_string(out.value))
             << ";\n";
        continue;
      }
      if (out.access == Access::Strided && in_short_band_) {
        elem = "[offo" + n + " + fx_tbl_offo" + n + "[fx_e]]";
      } else if (out.access == Access::Strided) {
        elem = out.inner_unit_stride
                   ? "[offo" + n + " + j]"
                   : "[offo" + n + " + j * so" + n + "[" + std::to_string(k_.ndim - 1) + "]]";
      }
      out_ << indent << "out" << n << elem << " = "
           << storeConversion(out.dtype, "v" + std::to_string(out.value)) << ";\n";
    }
  }

  std::string loadExpr(const Expr& e) const {
    if (e.op == IrOp::ElementIndex) return "i";  // every loop names its element i
    const TensorInput& in = k_.inputs[e.index];
    if (half_runs_ && half_in_[e.index]) {
      return loadConversion(c10::ScalarType::Float, e.type,
                            "fx_hin" + std::to_string(e.index) + "[" + half_index_ + " - fx_h0]");
    }
    const std::string ref = "in" + std::to_string(e.index);
    const std::string off = "off" + std::to_string(e.index);
    std::string elem;
    switch (in.access) {
      case Access::Broadcast1: elem = ref + "[0]"; break;
      case Access::Flat: elem = ref + "[i]"; break;
      case Access::Strided:
        if (in_buffer_ && in.transposed) {
          elem = "fx_buf" + std::to_string(e.index) + "[fx_b][j - fx_jb]";
        } else if (in_band_rows_) {  // inner_zero_stride: one element per row
          elem = ref + "[" + off + " + fx_b * st" + std::to_string(e.index) + "[" +
                 std::to_string(k_.ndim - 2) + "]]";
        } else if (in_short_band_) {
          elem = ref + "[" + off + " + fx_tbl_" + off + "[fx_e]]";
        } else if (in.inner_zero_stride) {
          elem = ref + "[" + off + "]";
        } else if (in.inner_unit_stride) {
          elem = ref + "[" + off + " + j]";
        } else {
          elem = ref + "[" + off + " + j * st" + std::to_string(e.index) + "[" +
                 std::to_string(k_.ndim - 1) + "]]";
        }
        break;
    }
    return loadConversion(in.dtype, e.type, elem);
  }

  // How often an expression's value changes: once per call (printed before the loop),
  // per row of a strided loop (printed before the row's loop), per element.
  enum class Vary { PerCall, PerRow, PerElement, PerRowOrElement };

  // Rows shorter than this go by bands. A band computes its per-row values once per row
  // too, but reads them back per element: where they are cheap and the elements too,
  // rows of 8 and more run faster one by one. One core, rows of 9 / rows of 4, by bands
  // and row by row: x * (s + b) 11.4 / 11.5 and 8.4 / 16.6 us; x * sigmoid(s + b) 14.1 /
  // 16.8 and 16.0 / 31.0. Where the elements are expensive, rows up to 31 elements go by
  // bands too, but for rows of 16, whose loop has no scalar tail: silu(x + b) over rows
  // of 20 / 25 / 31 took 38.7 / 47.7 / 59.8 us by bands, 60.0 / 51.5 / 99.3 row by row,
  // rows of 16 31.4 and 27.2.
  int shortRowLimit() const {
    int row = 0, element = 0;
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!facts_.used[i] || facts_.invariant[i]) continue;
      (per_row_[i] ? row : element) += opCost(k_.exprs[i].op);
    }
    if (element >= kExpensiveWork && element > row) return 2 * kShortRow;
    return row >= kExpensiveWork || element > row ? kShortRow : kShortRow / 2;
  }

  bool prints(size_t i, Vary which) const {
    if (!facts_.used[i]) return false;
    if (facts_.invariant[i]) return which == Vary::PerCall;
    switch (which) {
      case Vary::PerCall: return false;
      case Vary::PerRow: return per_row_[i];
      case Vary::PerElement: return !per_row_[i];
      case Vary::PerRowOrElement: return true;
    }
    return false;
  }

  void printExprs(Vary which, const std::string& indent) {
    auto load = [this](const Expr& e) { return loadExpr(e); };
    for (size_t i = 0; i < k_.exprs.size(); ++i) {
      if (!prints(i, which)) continue;
      const Expr& e = k_.exprs[i];
      const bool drawn = std::find(draws_.begin(), draws_.end(), static_cast<ExprId>(i)) !=
                         draws_.end();
      out_ << indent << "const " << computeTypeName(e.type) << " v" << i << " = "
           << (drawn ? "fx_u" + std::to_string(i) + "[i - fx_ubase]" : formatExpr(k_, e, load))
           << ";\n";
    }
  }

  const Kernel& k_;
  ExprFacts facts_;
  // perRowExprs: printed once per row, not per element (on one core x * sigmoid(s) over
  // rows of 49 took 0.66 ns an element with the sigmoid per element, ATen 0.15).
  std::vector<bool> per_row_;
  std::vector<ExprId> draws_;  // drawn ahead by chunks (printDrawChunkStart)
  bool in_buffer_ = false;  // printing printBand's rows: transposed inputs are in fx_bufN
  bool in_short_band_ = false;  // printing printShortBand's loop: offsets from fx_tbl_*
  bool in_band_rows_ = false;  // printing printShortBand's per-row loop: row fx_b's offsets
  // float16 runs (chooseHalfRuns): the inputs and outputs converted as runs, whether the
  // kernel has any, whether the loop being printed reads them so, and its index (i, j).
  std::vector<bool> half_in_, half_out_;
  bool any_half_ = false;
  bool half_runs_ = false;
  std::string half_index_;
  std::ostringstream out_;
};

}  // namespace

std::string printCppKernel(const Kernel& kernel) { return CppPrinter(kernel).print(); }

}  // namespace fuser::codegen
