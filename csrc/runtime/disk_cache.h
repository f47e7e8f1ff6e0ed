// The on-disk kernel cache (FUSER_CACHE_DIR). An entry is one file holding a header
// (magic, key, size, checksum) and the compiled image, written to a temporary file and
// renamed into place, so a reader never sees a partial entry; an entry whose header
// or checksum does not match is removed and rebuilt, never loaded.
#pragma once

#include <optional>
#include <string>

namespace fuser::runtime {

class DiskCache {
 public:
  // `kind` names a subdirectory ("cpu", "cuda").
  explicit DiskCache(std::string kind);

  // The image stored under `key`, if a valid entry exists.
  std::optional<std::string> load(const std::string& key) const;
  // Stores atomically; failures (read-only disk, ...) are ignored: the cache is optional.
  void store(const std::string& key, const std::string& image) const;
  bool enabled() const { return enabled_; }
  std::string pathFor(const std::string& key) const;

 private:
  std::string dir_;
  bool enabled_;
};

}  // namespace fuser::runtime
