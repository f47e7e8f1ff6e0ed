// Kernel variants timed at first run (runtime/variant_timing.h): the fastest candidate is
// chosen, and no round of launches begins that would end past the limit.
// pickVariant's rule on given samples.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "config.h"
#include "runtime/variant_timing.h"

namespace fuser::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Candidates that take `ms[i]` milliseconds a launch.
size_t choose(const std::string& key, const std::vector<double>& ms) {
  std::vector<std::string> names;
  for (size_t i = 0; i < ms.size(); ++i) names.push_back("candidate=" + std::to_string(i));
  return chooseVariant(key, names, [&](size_t i) {
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(ms[i] * 1000)));
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  });
}

const VariantRecord& lastRecord() {
  static std::vector<VariantRecord> log;
  log = variantLog();
  return log.back();
}

class VariantTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    config().use_disk_cache = false;
    config().autotune = true;
    config().force_variant = -1;
    forgetVariantChoices();
  }
};

TEST_F(VariantTiming, TheFastestCandidateIsChosenAndRemembered) {
  EXPECT_EQ(choose("fast", {3.0, 1.0, 2.0}), 1u);
  const VariantRecord& r = lastRecord();
  EXPECT_EQ(r.chosen, 1u);
  ASSERT_EQ(r.us.size(), 3u);
  EXPECT_LT(r.us[1], r.us[0]);
  EXPECT_GE(r.rounds, kFullRounds);
  EXPECT_LT(r.timing_ms, kTimingLimitMs + 20);
  const auto t0 = Clock::now();
  EXPECT_EQ(choose("fast", {3.0, 1.0, 2.0}), 1u);  // remembered: nothing launched
  const double again_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_LT(again_ms, 1.0);
}

TEST_F(VariantTiming, SlowCandidatesStopBeforeTheLimit) {
  // 10-20 ms a launch: the warm-up (45 ms) and two rounds fit in the limit, a third
  // would end past it.
  choose("slow", {15.0, 10.0, 20.0});
  const VariantRecord& r = lastRecord();
  EXPECT_LT(r.timing_ms, kTimingLimitMs + 20) << "timed for " << r.timing_ms << " ms";
  EXPECT_EQ(r.chosen, 1u);
  EXPECT_GE(r.rounds, 1);
  EXPECT_LT(r.rounds, kFullRounds);  // a partial timing: not written to the disk cache
}

TEST_F(VariantTiming, CandidatesTooSlowForOneRoundKeepTheHeuristic) {
  // 40 ms a launch: a round after the warm-up would end past the limit.
  choose("slower", {40.0, 30.0, 40.0});
  const VariantRecord& r = lastRecord();
  EXPECT_EQ(r.chosen, 0u);
  EXPECT_EQ(r.rounds, 0);
  EXPECT_TRUE(r.us.empty());
  EXPECT_LT(r.timing_ms, 3 * 40.0 + 20) << "timed for " << r.timing_ms << " ms";
}

// pickVariant on given samples (microseconds per round).
size_t pick(const std::vector<std::vector<double>>& samples) {
  VariantRecord r;
  pickVariant(samples, r);
  return r.chosen;
}

TEST(PickVariant, TheFastestOfThoseThatBeatTheHeuristicInMostRounds) {
  // 2% faster in every round: chosen; 0.5% faster: within kMinGain, the heuristic's.
  EXPECT_EQ(pick({{100, 101, 100, 102}, {98, 99, 98, 100}}), 1u);
  EXPECT_EQ(pick({{100, 101, 100, 102}, {99.6, 100.5, 99.5, 101.5}}), 0u);
  // A lower median that won only half the rounds (noise, or a drift): the heuristic's.
  EXPECT_EQ(pick({{100, 100, 100, 100}, {90, 90, 110, 110}}), 0u);
  // Of two that qualify, the lower median; one that loses is passed over.
  EXPECT_EQ(pick({{100, 100, 100}, {95, 96, 95}, {90, 91, 92}, {80, 120, 130}}), 2u);
  VariantRecord r;
  pickVariant({{100, 100, 100, 100}, {95, 96, 101, 95}}, r);
  EXPECT_EQ(r.wins, (std::vector<int>{0, 3}));  // 3 of 4 rounds: past kMinWinShare
  EXPECT_EQ(r.chosen, 1u);
  EXPECT_DOUBLE_EQ(r.us[1], 96);  // the upper median of an even count
}

}  // namespace
}  // namespace fuser::runtime
