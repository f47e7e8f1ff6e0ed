#include "runtime/variant_timing.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "config.h"
#include "runtime/disk_cache.h"
#include "stats.h"

namespace fuser::runtime {
namespace {

using Clock = std::chrono::steady_clock;

struct Memory {
  std::mutex mutex;
  std::unordered_map<std::string, size_t> chosen;
  std::vector<VariantRecord> log;
};

// The log keeps the latest kMaxLogged records (a long run meets many shape classes).
constexpr size_t kMaxLogged = 1024;

void remember(Memory& m, VariantRecord r) {
  if (m.log.size() >= kMaxLogged) m.log.erase(m.log.begin());
  m.log.push_back(std::move(r));
}

Memory& memory() {
  static Memory* m = new Memory();  // never freed: used from static destructors
  return *m;
}

const DiskCache& diskCache() {
  static const DiskCache* cache = new DiskCache("variants");
  return *cache;
}

// "chosen=<i>\n<name> <us>\n..." : the choice and, for people, what was measured (the
// entry is found by a hash of the key, whose candidate names make a stale index name
// another candidate list's entry, never this one's).
std::string serialize(const VariantRecord& r) {
  std::ostringstream s;
  s << "chosen=" << r.chosen << "\n";
  for (size_t i = 0; i < r.names.size(); ++i) s << r.names[i] << " " << r.us[i] << "\n";
  return s.str();
}

// The stored choice, when it names one of `count` candidates.
std::optional<size_t> parse(const std::string& text, size_t count) {
  std::istringstream s(text);
  std::string first;
  if (!std::getline(s, first) || first.rfind("chosen=", 0) != 0) return std::nullopt;
  try {
    const size_t i = std::stoul(first.substr(7));
    if (i < count) return i;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

VariantRecord timeCandidates(const std::string& key, const std::vector<std::string>& names,
                             const std::function<double(size_t)>& time_launch) {
  const auto started = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  const size_t n = names.size();
  VariantRecord r;
  r.key = key;
  r.names = names;
  // Warm-up: caches, clocks, first-touch pages. Where it took so long that a round of
  // launches would pass kTimingLimitMs, the heuristic's variant stays untimed (a loaded
  // machine's CPU layer_norm of 4096 x 512 took 25 ms a launch, 307 ms in all).
  for (size_t i = 0; i < n; ++i) time_launch(i);
  if (2 * since(started) > kTimingLimitMs) {
    r.timing_ms = since(started);
    return r;
  }
  std::vector<std::vector<double>> samples(n);
  // Rounds of one launch per candidate until kTimingBudgetMs (kFullRounds at least) or
  // before a round that would pass kTimingLimitMs.
  for (int round = 0; round < 25; ++round) {
    const auto round_start = Clock::now();
    for (size_t i = 0; i < n; ++i) samples[i].push_back(time_launch(i));
    r.rounds = round + 1;
    const double spent = since(started);
    if (r.rounds >= kFullRounds && spent > kTimingBudgetMs) break;
    if (spent + since(round_start) > kTimingLimitMs) break;
  }
  pickVariant(samples, r);
  r.timing_ms = since(started);
  return r;
}

}  // namespace

void pickVariant(const std::vector<std::vector<double>>& samples, VariantRecord& r) {
  const size_t n = samples.size();
  r.us.clear();
  r.wins.assign(n, 0);
  r.chosen = 0;
  for (const auto& s : samples) r.us.push_back(median(s));
  if (n == 0) return;
  const size_t rounds = samples[0].size();
  for (size_t i = 1; i < n; ++i) {
    for (size_t k = 0; k < rounds && k < samples[i].size(); ++k) {
      r.wins[i] += samples[i][k] < samples[0][k] ? 1 : 0;
    }
    const bool beats = r.us[i] < kMinGain * r.us[0] && r.wins[i] >= kMinWinShare * rounds;
    if (beats && r.us[i] < r.us[r.chosen]) r.chosen = i;
  }
}

size_t chooseVariant(const std::string& key, const std::vector<std::string>& names,
                     const std::function<double(size_t)>& time_launch) {
  const size_t n = names.size();
  if (n <= 1) return 0;
  const int forced = config().force_variant;
  if (forced >= 0) return std::min(static_cast<size_t>(forced), n - 1);
  if (!config().autotune) return 0;
  Memory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (auto it = m.chosen.find(key); it != m.chosen.end() && it->second < n) return it->second;
  }
  const DiskCache& disk = diskCache();
  if (disk.enabled()) {
    if (auto text = disk.load(key)) {
      if (auto i = parse(*text, n)) {
        stats().variant_disk_hits++;
        VariantRecord r;
        r.key = key;
        r.names = names;
        r.chosen = *i;
        r.from_disk = true;
        std::lock_guard<std::mutex> lock(m.mutex);
        m.chosen.emplace(key, *i);
        remember(m, std::move(r));
        return *i;
      }
    }
  }
  VariantRecord r = timeCandidates(key, names, time_launch);
  stats().variants_timed++;
  stats().variant_timing_us += static_cast<int64_t>(r.timing_ms * 1000);
  if (disk.enabled() && r.rounds >= kFullRounds) disk.store(key, serialize(r));
  const size_t chosen = r.chosen;
  std::lock_guard<std::mutex> lock(m.mutex);
  m.chosen.emplace(key, chosen);
  remember(m, std::move(r));
  return chosen;
}

std::vector<VariantRecord> variantLog() {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.log;
}

void forgetVariantChoices() {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.chosen.clear();
  m.log.clear();
}

}  // namespace fuser::runtime
