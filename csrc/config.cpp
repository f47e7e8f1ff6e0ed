// Reads the FUSER_* environment once. A bad value never throws: it is recorded as a
// warning (reported once by whoever loads us) and the default is kept.
#include "config.h"

#include <cstdlib>
#include <sstream>

namespace fuser {
namespace {

std::vector<std::string>& warnings() {
  static std::vector<std::string> list;
  return list;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool readBool(const char* name, bool fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  std::string s(v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  warnings().push_back(std::string(name) + "='" + s +
                       "' is not understood; accepted values: 1, 0 (or true/false). Using the "
                       "default.");
  return fallback;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> items;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

// An integer in [min, max] from `name`, or `fallback` (with a warning naming `accepted`
// when the variable is set to something else).
int readInt(const char* name, int fallback, long min, long max, const std::string& accepted) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end && *end == '\0' && n >= min && n <= max) return static_cast<int>(n);
  warnings().push_back(std::string(name) + "='" + v + "' is not understood; accepted values: " +
                       accepted + ". Using " + std::to_string(fallback) + ".");
  return fallback;
}

void readDump(Config& c) {
  const char* v = env("FUSER_DUMP");
  if (!v) return;
  for (const auto& item : splitList(v)) {
    if (item == "graph") c.dump_graph = true;
    else if (item == "kernels") c.dump_kernels = true;
    else if (item == "reasons") c.dump_reasons = true;
    else if (item == "interpreted") c.dump_interpreted = true;
    else if (item == "all")
      c.dump_graph = c.dump_kernels = c.dump_reasons = c.dump_interpreted = true;
    else
      warnings().push_back("FUSER_DUMP item '" + item +
                           "' is not understood; accepted values: graph, kernels, reasons, "
                           "interpreted (comma-separated). Ignoring it.");
  }
}

void readDevices(Config& c) {
  const char* v = env("FUSER_DEVICES");
  if (!v) return;
  bool cpu = false, cuda = false, bad = false;
  for (const auto& item : splitList(v)) {
    if (item == "cpu") cpu = true;
    else if (item == "cuda") cuda = true;
    else bad = true;
  }
  if (bad || (!cpu && !cuda)) {
    warnings().push_back(std::string("FUSER_DEVICES='") + v +
                         "' is not understood; accepted values: cpu, cuda (comma-separated). "
                         "Using cpu,cuda.");
    return;
  }
  c.fuse_cpu = cpu;
  c.fuse_cuda = cuda;
}

void readExecutor(Config& c) {
  const char* v = env("FUSER_EXECUTOR");
  if (!v) return;
  std::string s(v);
  if (s == "interpreter") c.use_interpreter = true;
  else if (s != "codegen")
    warnings().push_back("FUSER_EXECUTOR='" + s +
                         "' is not understood; accepted values: codegen, interpreter. Using "
                         "codegen.");
}

void readCrossCompile(Config& c) {
  const char* v = env("FUSER_CROSS_COMPILE");
  if (!v) return;
  const std::string given(v);
  const size_t colon = given.find(':');
  const std::string arch = given.substr(0, colon);
  const std::string depth = colon == std::string::npos ? "" : given.substr(colon + 1);
  if (arch.rfind("sm_", 0) == 0 && arch.size() >= 5 &&
      arch.find_first_not_of("0123456789", 3) == std::string::npos &&
      (colon == std::string::npos || depth == "front")) {
    c.cross_compile_arch = std::stoi(arch.substr(3));
    c.cross_compile_front_only = depth == "front";
  } else {
    warnings().push_back("FUSER_CROSS_COMPILE='" + given +
                         "' is not understood; accepted values: sm_XY, e.g. sm_90, or "
                         "sm_XY:front (NVRTC's front end only). Ignoring it.");
  }
}

void readChannelsLast(Config& c) {
  const char* v = env("FUSER_CHANNELS_LAST");
  if (!v) return;
  const std::string s = v;
  if (s == "all") {
    c.channels_last_cpu = true;
    return;
  }
  c.channels_last_cuda = readBool("FUSER_CHANNELS_LAST", true);
}

void readColumnSums(Config& c) {
  const char* v = env("FUSER_COLUMN_SUMS");
  if (!v) return;
  if (std::string(v) == "all") {
    c.column_sums_cpu = true;
    return;
  }
  c.column_sums_cuda = readBool("FUSER_COLUMN_SUMS", true);
}

void readCacheDir(Config& c) {
  if (const char* v = env("FUSER_CACHE_DIR")) {
    c.cache_dir = v;
  } else if (const char* xdg = env("XDG_CACHE_HOME")) {
    c.cache_dir = std::string(xdg) + "/fuser";
  } else if (const char* home = env("HOME")) {
    c.cache_dir = std::string(home) + "/.cache/fuser";
  } else {
    c.cache_dir = "/tmp/fuser-cache";
  }
}

void readTileSide(Config& c) {
  const char* v = env("FUSER_TILE_SIDE");
  if (!v) return;
  const std::string s = v;
  if (s == "0" || s == "32" || s == "64") {
    c.tile_side = std::stoi(s);
  } else {
    warnings().push_back("FUSER_TILE_SIDE='" + s +
                         "' is not understood; accepted values: 0, 32, 64. Using 0.");
  }
}

Config* readConfig() {
  auto* c = new Config();
  c->killed = readBool("FUSER_DISABLE", false);
  c->enable_at_import = readBool("FUSER_ENABLE", false);
  c->keep_singletons = readBool("FUSER_SINGLETON", false);
  c->use_disk_cache = readBool("FUSER_DISK_CACHE", true);
  c->hoist_projections = readBool("FUSER_HOIST", true);
  c->pool_first = readBool("FUSER_POOL_FIRST", true);
  c->elementwise_siblings = readBool("FUSER_SIBLING_GROUPS", true);
  c->gradient_sums = readBool("FUSER_GRADIENT_SUMS", true);
  c->max_pool_kernel = readBool("FUSER_MAX_POOL_KERNEL", true);
  c->transpose_tiles = readBool("FUSER_TRANSPOSE_TILES", true);
  c->leave_to_onednn = readBool("FUSER_LEAVE_TO_ONEDNN", true);
  readChannelsLast(*c);
  readColumnSums(*c);
  c->min_group_size = readInt("FUSER_MIN_GROUP_SIZE", c->keep_singletons ? 1 : 2, 1, 1000000,
                              "an integer >= 1");
  c->max_groups = readInt("FUSER_MAX_GROUPS", 0, 0, 1000000, "an integer >= 0 (0: no limit)");
  c->arg_limit = readInt("FUSER_ARG_LIMIT", c->arg_limit, 2, 100000, "an integer >= 2");
  readDump(*c);
  readDevices(*c);
  readExecutor(*c);
  readCacheDir(*c);
  readCrossCompile(*c);
  c->shape_kernels =
      readInt("FUSER_SHAPE_KERNELS", c->shape_kernels, 0, 64, "an integer from 0 to 64");
  readTileSide(*c);
  c->tile_group = readInt("FUSER_TILE_GROUP", c->tile_group, 0, 1024,
                          "an integer from 0 to 1024 (0: chosen per tile side)");
  c->tile_min_blocks = readInt("FUSER_TILE_MIN_BLOCKS", c->tile_min_blocks, 0, 8,
                               "an integer from 0 to 8 (0: chosen per kernel)");
  c->autotune = readBool("FUSER_AUTOTUNE", true);
  c->force_variant = readInt("FUSER_FORCE_VARIANT", -1, -1, 1024,
                             "an integer from -1 to 1024 (-1: chosen)");
  c->row_splits = readInt("FUSER_ROW_SPLITS", 0, 0, 4096, "an integer from 0 to 4096 (0: chosen)");
  return c;
}

}  // namespace

Config& config() {
  static Config* instance = readConfig();  // never freed: used from static destructors
  return *instance;
}

int minGroupSize() { return config().keep_singletons ? 1 : config().min_group_size.load(); }

const std::vector<std::string>& configWarnings() {
  config();
  return warnings();
}

}  // namespace fuser
