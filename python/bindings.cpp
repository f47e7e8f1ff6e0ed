// pybind11 bindings of the C++ API: no logic lives here.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include <map>
#include <string>
#include <utility>

#include "api.h"
#include "codegen/kernel_source.h"
#include "config.h"
#include "ops/op_table.h"
#include "passes/param_space.h"
#include "passes/pipeline.h"
#include "passes/report_capture.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cuda/library_search.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/nvrtc_library.h"
#include "runtime/row_executor.h"
#include "runtime/variant_timing.h"
#include "stats.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "fuser's C++ core";
  m.def("enable", &fuser::enable);
  m.def("disable", &fuser::disable);
  m.def("is_enabled", &fuser::isEnabled);
  m.def("set_arg_limit", [](int n) {
    try {
      fuser::setArgLimit(n);
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
  });
  m.def("get_arg_limit", &fuser::getArgLimit);
  m.def("stats", &fuser::statsSnapshot);
  m.def("reset_stats", &fuser::resetStats);
  m.def("kernel_sources", &fuser::kernelSources);
  m.def("config_warnings", &fuser::configWarnings);
  // Tests: the host compiler and flags CPU kernels are built with.
  m.def("_host_compile_command", &fuser::runtime::hostCompileCommand);
  m.def("killed", [] { return fuser::config().killed; });
  // Tests: FUSER_CROSS_COMPILE's depth (front end only, or through ptxas) for the tests
  // that follow; returns the depth it replaces.
  m.def("_set_cross_compile_front_only", [](bool front_only) {
    return std::exchange(fuser::config().cross_compile_front_only, front_only);
  });
  // Tests keep single-node groups to exercise one operator at a time.
  m.def("_set_keep_singletons", [](bool keep) { fuser::config().keep_singletons = keep; });
  // Tests: FUSER_AUTOTUNE and FUSER_FORCE_VARIANT for this process, and a fresh
  // process's memory of variant choices (the disk cache stays).
  m.def("_set_variant_choice", [](bool autotune, int force_variant) {
    fuser::config().autotune = autotune;
    fuser::config().force_variant = force_variant;
  });
  m.def("_forget_variant_choices", &fuser::runtime::forgetVariantChoices);
  // Tests: FUSER_ROW_SPLITS for this process (groups planned later follow it).
  m.def("_set_row_splits", [](int splits) { fuser::config().row_splits = splits; });
  // Tests: FUSER_CHANNELS_LAST for this process (graphs optimized later follow it).
  m.def("_set_channels_last", [](bool cuda, bool cpu) {
    fuser::config().channels_last_cuda = cuda;
    fuser::config().channels_last_cpu = cpu;
  });
  // Tests: FUSER_COLUMN_SUMS for this process (graphs optimized later follow it).
  m.def("_set_column_sums", [](bool cuda, bool cpu) {
    fuser::config().column_sums_cuda = cuda;
    fuser::config().column_sums_cpu = cpu;
  });
  // FUSER_SIBLING_GROUPS for this process; returns the previous setting.
  m.def("_set_elementwise_siblings", [](bool merge) {
    return std::exchange(fuser::config().elementwise_siblings, merge);
  });
  m.def("cache_dir", [] { return fuser::config().cache_dir; });
  // Tests: the resident blocks of a CUDA column kernel in shared memory with `bytes` of
  // copies a block on a device (0: not offered there).
  m.def("_columns_in_shared_blocks", &fuser::runtime::cudaColumnsInSharedBlocks);
  // Every kernel variant choice this process made: timed, or read from the disk cache.
  m.def("variant_log", [] {
    py::list out;
    for (const auto& r : fuser::runtime::variantLog()) {
      py::dict d;
      d["key"] = r.key;
      d["names"] = r.names;
      d["us"] = r.us;
      d["chosen"] = r.chosen;
      d["timing_ms"] = r.timing_ms;
      d["from_disk"] = r.from_disk;
      d["rounds"] = r.rounds;
      d["wins"] = r.wins;
      out.append(d);
    }
    return out;
  });
  // Settings fuser.report shows and may change for its run.
  m.def("get_min_group_size", [] { return fuser::config().min_group_size.load(); });
  m.def("set_min_group_size", [](int n) {
    if (n < 1) throw py::value_error("minimum group size must be at least 1");
    fuser::config().min_group_size = n;
  });
  m.def("get_max_groups", [] { return fuser::config().max_groups.load(); });
  m.def("set_max_groups", [](int n) {
    if (n < 0) throw py::value_error("maximum number of groups must be >= 0 (0: no limit)");
    fuser::config().max_groups = n;
  });
  m.def("keep_singletons", [] { return fuser::config().keep_singletons; });
  m.def("fused_devices", [] {
    std::vector<std::string> devices;
    if (fuser::config().fuse_cpu) devices.push_back("cpu");
    if (fuser::config().fuse_cuda) devices.push_back("cuda");
    return devices;
  });
  // fuser.report: typed copies of the graphs the pipeline fuses (report_capture.h).
  m.def("_set_report_capture", &fuser::setReportCapture);
  m.def("_take_captured_graphs", &fuser::takeCapturedGraphs);
  m.def("enable_at_import", [] { return fuser::config().enable_at_import; });
  m.def("supported_schemas", &fuser::ops::supportedSchemas);
  // Kernel source for a subgraph: inputs are torch.dtype (tensor), float, int or bool
  // (the Python type of a scalar argument); zero_dim marks 0-dim tensors; layout is one
  // of "flat", "strided", "rows", "broadcast_rows", "flat_broadcast_rows", "shared_rows",
  // "fixed_rows", "tiles", "tiles64" (see kernel_source.h).
  m.def("kernel_source", [](std::shared_ptr<torch::jit::Graph>& graph, py::list inputs,
                            std::vector<bool> zero_dim, const std::string& dialect,
                            const std::string& layout_name) {
    using fuser::codegen::SourceLayout;
    static const std::map<std::string, SourceLayout> kLayouts = {
        {"flat", SourceLayout::Flat},
        {"strided", SourceLayout::Strided},
        {"rows", SourceLayout::Rows},
        {"broadcast_rows", SourceLayout::BroadcastRows},
        {"flat_broadcast_rows", SourceLayout::FlatBroadcastRows},
        {"shared_rows", SourceLayout::SharedRows},
        {"fixed_rows", SourceLayout::FixedRows},
        {"tiles", SourceLayout::Tiles},
        {"tiles64", SourceLayout::Tiles64}};
    const auto found = kLayouts.find(layout_name);
    if (found == kLayouts.end()) throw py::value_error("unknown layout '" + layout_name + "'");
    const SourceLayout layout = found->second;
    std::vector<fuser::codegen::InputDesc> descs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      fuser::codegen::InputDesc d;
      py::handle item = inputs[i];
      if (THPDtype_Check(item.ptr())) {
        d.dtype = reinterpret_cast<THPDtype*>(item.ptr())->scalar_type;
        d.zero_dim = i < zero_dim.size() && zero_dim[i];
      } else {
        d.is_tensor = false;
        const auto* type = item.ptr();
        d.scalar_kind = type == reinterpret_cast<PyObject*>(&PyFloat_Type)
                            ? fuser::codegen::ScalarArgKind::Double
                        : type == reinterpret_cast<PyObject*>(&PyBool_Type)
                            ? fuser::codegen::ScalarArgKind::Bool
                            : fuser::codegen::ScalarArgKind::Int64;
      }
      descs.push_back(d);
    }
    auto d = dialect == "cuda" ? fuser::codegen::Dialect::Cuda : fuser::codegen::Dialect::Cpp;
    return fuser::codegen::printKernelSource(*graph, descs, d, layout);
  });
  m.def("add_library_search_dir", &fuser::cuda::addLibrarySearchDir);
  m.def("nvrtc_available", [] {
    std::string why;
    bool ok = fuser::cuda::nvrtcAvailable(&why);
    return py::make_tuple(ok, why);
  });
  // NVRTC's image (cubin or PTX) for `source` on sm_<major><minor>.
  m.def("nvrtc_compile", [](const std::string& source, int major, int minor) {
    try {
      return py::bytes(fuser::cuda::compileToCubin(source, fuser::cuda::Arch{major, minor}));
    } catch (const std::runtime_error& e) {
      throw py::value_error(e.what());
    }
  });
  // NVRTC's front end only on `source` for sm_<major><minor> (FUSER_CROSS_COMPILE=...:front).
  m.def("nvrtc_check_syntax", [](const std::string& source, int major, int minor) {
    try {
      fuser::cuda::checkSyntax(source, fuser::cuda::Arch{major, minor});
    } catch (const std::runtime_error& e) {
      throw py::value_error(e.what());
    }
  });
  // Bytes of CUDA kernel parameters a fusion group's kernel takes at most (tests).
  m.def("group_param_bytes", [](torch::jit::Node* group) { return fuser::groupParamBytes(group); });
  m.def("cuda_param_bytes_limit", [] { return fuser::kCudaParamBytes; });
  // Runs the whole pipeline on a graph (tests and the report tool).
  m.def("fuse_graph", [](std::shared_ptr<torch::jit::Graph>& graph) { fuser::fuseGraph(graph); });
}
