// Kernel variants timed at first run (SEEDS.md seed 003). Where a group's kernel has
// several candidate forms (a CUDA row kernel's lanes per row, a CPU row kernel's rows
// per task), the first call of each shape class runs every candidate on the call's own
// arguments, keeps the fastest and remembers the choice: in memory, and on disk next to
// the kernels (FUSER_CACHE_DIR/variants), so that a later process times nothing.
// Candidates write only the call's freshly allocated outputs, so no argument needs
// cloning, and the caller launches the chosen one last.
// FUSER_AUTOTUNE=0 takes variant 0 (the heuristic's) without timing;
// FUSER_FORCE_VARIANT=i takes variant i (the last one where there are fewer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fuser::runtime {

struct VariantRecord {
  std::string key;                 // the group, kernel and shape class it was made for
  std::vector<std::string> names;  // what each candidate is ("lanes=256")
  std::vector<double> us;          // median microseconds per launch; empty when not timed
  size_t chosen = 0;
  double timing_ms = 0;            // wall time spent timing (0 when read from disk)
  int rounds = 0;                  // rounds of launches timed (after the warm-up)
  bool from_disk = false;
};

// The variant for `key` among `names`: forced or fixed by the flags, else remembered in
// this process or on disk, else timed by `launch(i)` (one launch of candidate i) and
// `sync()` (waits for the device; a no-op on CPU), interleaving the candidates for at
// most kTimingBudgetMs after one warm-up launch each; a round that would end past
// kTimingLimitMs (200 ms a group less a margin) is not begun, and where the warm-up
// shows that no round would fit, variant 0 is taken untimed (the warm-up itself is one
// launch of each candidate, however long). The fastest median wins if it beats variant
// 0's by kMinGain. Only choices timed in kFullRounds rounds go to the disk cache: a
// loaded machine's guess is not kept for later processes.
size_t chooseVariant(const std::string& key, const std::vector<std::string>& names,
                     const std::function<void(size_t)>& launch, const std::function<void()>& sync);

inline constexpr double kTimingBudgetMs = 60.0;
inline constexpr double kTimingLimitMs = 150.0;
inline constexpr int kFullRounds = 3;
// On CUDA every candidate is a kernel of its own to compile (NVRTC, about 0.1 s each):
// a problem of fewer elements, whose launch latency hides the candidates' difference,
// builds the heuristic's alone.
inline constexpr int64_t kMinCudaElementsToTime = int64_t(1) << 21;
// Another variant replaces variant 0 only when its median is below kMinGain times 0's.
inline constexpr double kMinGain = 0.97;

// Every choice this process made by timing or read from disk (fuser.variant_log()).
std::vector<VariantRecord> variantLog();

// Forgets the in-memory choices (tests: a fresh process's view, disk cache kept).
void forgetVariantChoices();

}  // namespace fuser::runtime
