#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "config.h"
#include "runtime/hashing.h"

namespace fuser::runtime {
namespace {

constexpr char kMagic[8] = {'F', 'U', 'S', 'E', 'R', 'K', 'C', '1'};

struct Header {
  char magic[8];
  uint64_t key_hash;
  uint64_t size;
  uint64_t checksum;
};

bool makeDirs(const std::string& path) {
  std::string partial;
  std::stringstream in(path);
  std::string part;
  if (!path.empty() && path[0] == '/') partial = "/";
  while (std::getline(in, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

DiskCache::DiskCache(std::string kind)
    : dir_(config().cache_dir + "/" + kind), enabled_(config().use_disk_cache) {
  if (enabled_) enabled_ = makeDirs(dir_);
}

std::string DiskCache::pathFor(const std::string& key) const {
  return dir_ + "/" + hex64(fnv1a(key)) + ".bin";
}

std::optional<std::string> DiskCache::load(const std::string& key) const {
  if (!enabled_) return std::nullopt;
  const std::string path = pathFor(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  Header h{};
  std::string image;
  bool valid = static_cast<bool>(in.read(reinterpret_cast<char*>(&h), sizeof(h))) &&
               std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.key_hash == fnv1a(key) &&
               h.size < (1ull << 32);
  if (valid) {
    image.resize(h.size);
    valid = static_cast<bool>(in.read(image.data(), static_cast<std::streamsize>(h.size))) &&
            in.peek() == std::char_traits<char>::eof() &&
            fnv1a(image.data(), image.size()) == h.checksum;
  }
  if (!valid) {
    std::remove(path.c_str());  // corrupt or foreign: rebuilt by the caller
    return std::nullopt;
  }
  return image;
}

void DiskCache::store(const std::string& key, const std::string& image) const {
  if (!enabled_) return;
  const std::string path = pathFor(key);
  std::ostringstream tmp_name;
  tmp_name << path << ".tmp." << getpid() << "." << std::this_thread::get_id();
  const std::string tmp = tmp_name.str();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.key_hash = fnv1a(key);
    h.size = image.size();
    h.checksum = fnv1a(image.data(), image.size());
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace fuser::runtime
