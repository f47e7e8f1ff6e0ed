// A sampling profiler for machines without perf: a CLOCK_MONOTONIC timer signals the
// process every interval; the handler records the interrupted thread's stack
// (backtrace) into a preallocated buffer. sampler_stop writes the leaf (self) and
// inclusive counts per function, named through dladdr and demangled, to a file.
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr int kDepth = 48;
constexpr int kMaxSamples = 200000;

struct Sample {
  int depth;
  void* pcs[kDepth];
};

Sample* samples = nullptr;
std::atomic<int> taken{0};
std::atomic<bool> on{false};
timer_t timer;

void onSignal(int, siginfo_t*, void*) {
  if (!on.load(std::memory_order_relaxed)) return;
  const int i = taken.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxSamples) return;
  samples[i].depth = backtrace(samples[i].pcs, kDepth);
}

std::string nameOf(void* pc) {
  Dl_info info;
  if (dladdr(pc, &info) == 0) return "?";
  std::string lib = info.dli_fname ? info.dli_fname : "?";
  lib = lib.substr(lib.find_last_of('/') + 1);
  if (!info.dli_sname) return lib + "!?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : info.dli_sname;
  std::free(demangled);
  if (name.size() > 140) name = name.substr(0, 140);
  return lib + "!" + name;
}

}  // namespace

extern "C" void sampler_start(int interval_us) {
  if (!samples) samples = new Sample[kMaxSamples];
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder outside the handler
  struct sigaction sa = {};
  sa.sa_sigaction = onSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, nullptr);
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  timer_create(CLOCK_MONOTONIC, &ev, &timer);
  struct itimerspec spec = {};
  spec.it_interval.tv_nsec = interval_us * 1000L;
  spec.it_value.tv_nsec = interval_us * 1000L;
  taken = 0;
  on = true;
  timer_settime(timer, 0, &spec, nullptr);
}

extern "C" void sampler_stop(const char* path, int top) {
  on = false;
  timer_delete(timer);
  const int n = std::min<int>(taken.load(), kMaxSamples);
  std::map<void*, std::string> names;
  auto name = [&](void* pc) -> const std::string& {
    auto it = names.find(pc);
    if (it == names.end()) it = names.emplace(pc, nameOf(pc)).first;
    return it->second;
  };
  std::map<std::string, int> self, inclusive;
  for (int i = 0; i < n; ++i) {
    const Sample& s = samples[i];
    // Frame 0 is the handler, 1 the signal trampoline, 2 the interrupted function.
    if (s.depth < 3) continue;
    self[name(s.pcs[2])]++;
    std::set<std::string> seen;
    for (int d = 2; d < s.depth; ++d) {
      // Return addresses point after the call: step back one byte to name the caller.
      const std::string& f = name(d == 2 ? s.pcs[d] : static_cast<char*>(s.pcs[d]) - 1);
      if (seen.insert(f).second) inclusive[f]++;
    }
  }
  FILE* out = std::fopen(path, "w");
  if (!out) return;
  auto dump = [&](const char* title, const std::map<std::string, int>& counts) {
    std::vector<std::pair<int, std::string>> rows;
    for (const auto& [f, c] : counts) rows.emplace_back(c, f);
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(out, "%s (%d samples)\n", title, n);
    for (int i = 0; i < std::min<int>(top, rows.size()); ++i) {
      std::fprintf(out, "  %6.2f%%  %s\n", 100.0 * rows[i].first / n, rows[i].second.c_str());
    }
  };
  dump("self", self);
  dump("inclusive", inclusive);
  // SAMPLER_FOCUS=text: who calls the functions whose names hold the text.
  if (const char* focus = std::getenv("SAMPLER_FOCUS")) {
    std::map<std::string, int> callers;
    for (int i = 0; i < n; ++i) {
      const Sample& s = samples[i];
      for (int d = 2; d + 1 < s.depth; ++d) {
        const std::string& f = name(d == 2 ? s.pcs[d] : static_cast<char*>(s.pcs[d]) - 1);
        if (f.find(focus) == std::string::npos) continue;
        const std::string& caller = name(static_cast<char*>(s.pcs[d + 1]) - 1);
        if (caller.find(focus) != std::string::npos) continue;
        std::string chain = caller;
        for (int up = d + 2; up < std::min(s.depth, d + 5); ++up) {
          chain += "  <-  " + name(static_cast<char*>(s.pcs[up]) - 1).substr(0, 70);
        }
        callers[chain]++;
        break;
      }
    }
    dump("callers of the focus", callers);
  }
  std::fclose(out);
}
