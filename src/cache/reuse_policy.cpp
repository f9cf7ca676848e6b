#include "cache/reuse_policy.h"

namespace kamera {

const char* reuse_policy_name(ReusePolicy p) {
  switch (p) {
    case ReusePolicy::Patch:
      return "patch";
    case ReusePolicy::Keep:
      return "keep";
    case ReusePolicy::Prefix:
      return "prefix";
    case ReusePolicy::Blind:
      return "blind";
    case ReusePolicy::Reprefill:
      return "reprefill";
  }
  return "patch";
}

std::optional<ReusePolicy> reuse_policy_named(std::string_view name) {
  for (ReusePolicy p : {ReusePolicy::Patch, ReusePolicy::Keep, ReusePolicy::Prefix,
                        ReusePolicy::Blind, ReusePolicy::Reprefill})
    if (name == reuse_policy_name(p)) return p;
  return std::nullopt;
}

ServePolicy chunk_policy(ReusePolicy p) {
  return p == ReusePolicy::Blind                                   ? ServePolicy::Blind
         : p == ReusePolicy::Reprefill || p == ReusePolicy::Prefix ? ServePolicy::Reprefill
                                                                   : ServePolicy::Patch;
}

}  // namespace kamera
