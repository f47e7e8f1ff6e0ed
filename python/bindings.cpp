// pybind11 bindings of the C++ API: no logic lives here.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include "api.h"
#include "config.h"
#include "ops/op_table.h"
#include "passes/pipeline.h"
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
  m.def("killed", [] { return fuser::config().killed; });
  m.def("enable_at_import", [] { return fuser::config().enable_at_import; });
  m.def("supported_schemas", &fuser::ops::supportedSchemas);
  // Runs the whole pipeline on a graph (tests and the report tool).
  m.def("fuse_graph", [](std::shared_ptr<torch::jit::Graph>& graph) { fuser::fuseGraph(graph); });
}
