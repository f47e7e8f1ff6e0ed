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
  std::vector<int> wins;           // per candidate, the rounds it ran faster than variant 0
  bool from_disk = false;
};

// The variant for `key` among `names`: forced or fixed by the flags, else remembered in
// this process or on disk, else timed by `time_launch(i)` (launches candidate i, waits
// for it and returns the microseconds of one launch: the device's own time on CUDA, by
// events, so the host's launch and wait do not dilute the candidates' difference), interleaving
// the candidates for at most kTimingBudgetMs after one warm-up launch each; a round that
// would end past kTimingLimitMs (200 ms a group less a margin) is not begun, and where
// the warm-up shows that no round would fit, variant 0 is taken untimed (the warm-up
// itself is one launch of each candidate, however long). pickVariant decides. Only
// choices timed in kFullRounds rounds go to the disk cache: a loaded machine's guess is
// not kept for later processes.
size_t chooseVariant(const std::string& key, const std::vector<std::string>& names,
                     const std::function<double(size_t)>& time_launch);

// The choice among candidates timed in rounds (samples[i][round], microseconds): the
// candidate of the lowest median among those whose median is below kMinGain times
// variant 0's and that ran faster than variant 0 in at least kMinWinShare of the
// rounds (each round runs them back to back, so a machine whose speed drifts slows them
// alike); variant 0, the heuristic's, where none does. Fills r.us, r.wins and r.chosen.
void pickVariant(const std::vector<std::vector<double>>& samples, VariantRecord& r);

inline constexpr double kTimingBudgetMs = 60.0;
inline constexpr double kTimingLimitMs = 150.0;
inline constexpr int kFullRounds = 3;
// On CUDA every candidate is a kernel of its own to compile (NVRTC, about 0.1 s each):
// a problem of fewer elements, whose launch latency hides the candidates' difference,
// builds the heuristic's alone.
inline constexpr int64_t kMinCudaElementsToTime = int64_t(1) << 21;
// A candidate replaces variant 0 only where its median is below kMinGain times variant
// 0's and it won kMinWinShare of the rounds (pickVariant).
inline constexpr double kMinGain = 0.99;
// (On the H200, 128 lanes for 4096 rows of 1024 floats: 7% below the heuristic's median,
// faster in 17 of 25 rounds, the events' noise at 12 us a launch.)
inline constexpr double kMinWinShare = 0.6;

// Every choice this process made by timing or read from disk (fuser.variant_log()).
std::vector<VariantRecord> variantLog();

// Forgets the in-memory choices (tests: a fresh process's view, disk cache kept).
void forgetVariantChoices();

}  // namespace fuser::runtime
