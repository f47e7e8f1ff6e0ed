// The answer to "may these fuse?": empty means yes, otherwise the reason why not.
// Reasons feed FUSER_DUMP=reasons and the report tool.
#pragma once

#include <string>
#include <utility>

namespace fuser {

class FusionDecision {
 public:
  static FusionDecision yes() { return FusionDecision(); }
  static FusionDecision no(std::string reason) { return FusionDecision(std::move(reason)); }

  explicit operator bool() const { return reason_.empty(); }
  const std::string& reason() const { return reason_; }

 private:
  FusionDecision() = default;
  explicit FusionDecision(std::string reason) : reason_(std::move(reason)) {}
  std::string reason_;
};

}  // namespace fuser
