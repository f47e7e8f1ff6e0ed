// One NVRTC program per call: create, compile, read the log and the image, destroy.
// Afterwards: the returned image is independent of NVRTC (it can be cached on disk and
// loaded in another process with the same driver).
#include "runtime/cuda/nvrtc_compiler.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace fuser::cuda {
namespace {

// The name NVRTC puts in front of line numbers in its log: "fuser_kernel.cu(12): error".
constexpr const char* kProgramName = "fuser_kernel.cu";

struct Target {
  int code;   // archCode() of the architecture compiled for
  bool sass;  // true: cubin for sm_<code>; false: PTX for compute_<code>
};

Target chooseTarget(const NvrtcApi& api, Arch arch) {
  const int wanted = archCode(arch);
  const std::vector<int>& supported = api.supported_archs;
  // An NVRTC too old to list its architectures is trusted with the one asked for.
  if (supported.empty() || std::binary_search(supported.begin(), supported.end(), wanted)) {
    return {wanted, true};
  }
  // PTX runs on its own architecture and every later one.
  auto above = std::upper_bound(supported.begin(), supported.end(), wanted);
  if (above == supported.begin()) {
    throw std::runtime_error("fuser: " + archName(arch) + " is older than every architecture " +
                             nvrtcIdentity() + " supports (oldest sm_" +
                             std::to_string(supported.front()) + ")");
  }
  return {*(above - 1), false};
}

// Owns an nvrtcProgram so every exit path destroys it.
class Program {
 public:
  Program(const NvrtcApi& api, const std::string& source) : api_(api) {
    check(api_.createProgram(&program_, source.c_str(), kProgramName, 0, nullptr, nullptr),
          "nvrtcCreateProgram");
  }
  ~Program() { api_.destroyProgram(&program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    check(api_.getProgramLogSize(program_, &size), "nvrtcGetProgramLogSize");
    std::string log(size, '\0');
    check(api_.getProgramLog(program_, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  // The cubin, or the PTX without its terminating NUL (std::string::c_str() restores
  // it for cuModuleLoadData, which reads PTX as a C string).
  std::string image(bool sass) const {
    size_t size = 0;
    check((sass ? api_.getCUBINSize : api_.getPTXSize)(program_, &size),
          sass ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize");
    std::string image(size, '\0');
    check((sass ? api_.getCUBIN : api_.getPTX)(program_, image.data()),
          sass ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
    if (!sass && !image.empty() && image.back() == '\0') image.pop_back();
    return image;
  }

  void check(nvrtcResult result, const char* call) const {
    if (result == kNvrtcSuccess) return;
    throw std::runtime_error(std::string("fuser: ") + call +
                             " failed: " + api_.getErrorString(result));
  }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

// The source lines that the log points at ("fuser_kernel.cu(12): error: ..."), each
// with its number, so an error is readable without the generated source at hand.
std::string quoteLinesNamedInLog(const std::string& log, const std::string& source) {
  std::set<int> lines;
  const std::string marker = std::string(kProgramName) + "(";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    size_t pos = at + marker.size();
    int line = 0;
    while (pos < log.size() && log[pos] >= '0' && log[pos] <= '9') {
      line = line * 10 + (log[pos++] - '0');
    }
    if (pos < log.size() && log[pos] == ')' && line > 0) lines.insert(line);
  }
  if (lines.empty()) return "";

  std::vector<std::string> source_lines;
  std::istringstream in(source);
  for (std::string text; std::getline(in, text);) source_lines.push_back(text);
  std::string quoted = "source lines named in the log:\n";
  for (int line : lines) {
    if (line > static_cast<int>(source_lines.size())) continue;
    std::string number = std::to_string(line);
    quoted += std::string(number.size() < 5 ? 5 - number.size() : 0, ' ') + number + " | " +
              source_lines[line - 1] + "\n";
  }
  return quoted;
}

// Compiles `source` with the options every compile takes and `extra` ones; throws with
// NVRTC's log and the source lines it names on failure. Returns the log.
std::string runNvrtc(const NvrtcApi& api, const Program& program, const std::string& source,
                     const std::string& arch_option, const std::vector<const char*>& extra) {
  // No --use_fast_math: it flushes denormals and approximates division, sqrt and
  // transcendentals, so results would drift from eager PyTorch's.
  std::vector<const char*> options = {arch_option.c_str(), "-std=c++17", "-default-device"};
  options.insert(options.end(), extra.begin(), extra.end());
  const nvrtcResult compiled =
      api.compileProgram(program.get(), static_cast<int>(options.size()), options.data());
  std::string log = program.log();
  if (compiled != kNvrtcSuccess) {
    throw std::runtime_error("fuser: NVRTC (" + nvrtcIdentity() + ", " + arch_option +
                             ") failed to compile a kernel: " + api.getErrorString(compiled) +
                             "\n" + log + "\n" + quoteLinesNamedInLog(log, source));
  }
  return log;
}

std::string archOption(const Target& target) {
  return std::string("--gpu-architecture=") + (target.sass ? "sm_" : "compute_") +
         std::to_string(target.code);
}

}  // namespace

std::string compileToCubin(const std::string& source, Arch arch, std::string* log_out) {
  const NvrtcApi& api = nvrtc();
  const Target target = chooseTarget(api, arch);
  Program program(api, source);
  std::string log = runNvrtc(api, program, source, archOption(target), {});
  if (log_out) *log_out = std::move(log);
  return program.image(target.sass);
}

void checkSyntax(const std::string& source, Arch arch) {
  const NvrtcApi& api = nvrtc();
  Target target = chooseTarget(api, arch);
  target.sass = false;  // (the front end takes a virtual architecture)
  Program program(api, source);
  runNvrtc(api, program, source, archOption(target), {"-fdevice-syntax-only"});
}

}  // namespace fuser::cuda
