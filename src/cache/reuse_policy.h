// The policies a request may reuse cached KV under.
#pragma once

#include <optional>
#include <string_view>

#include "cache/chunk_cache.h"

namespace kamera {

// How a request reuses what the server holds (the request's "reuse", else `kamera serve --reuse`):
//   patch     the default: the longest exact token prefix, then every segment seen before served
//             from its conditioned KV (exact antecedents, else the nearest context's), the rest
//             prefilled; chunk parts: canonical plus a patch for their antecedents;
//   keep      llama.cpp's --cache-reuse: the prefix, then the most recent KV of each segment
//             relocated as it is, whatever it was conditioned on;
//   prefix    vLLM's and SGLang's prefix caching: the exact prefix only;
//   blind     the prefix, then stored canonicals with no patch;
//   reprefill nothing reused: the whole prompt prefilled.
enum class ReusePolicy { Patch, Keep, Prefix, Blind, Reprefill };
const char* reuse_policy_name(ReusePolicy p);
std::optional<ReusePolicy> reuse_policy_named(std::string_view name);
// The chunk cache's policy for a prompt's chunk parts (keep serves them as patch does; prefix
// recomputes them, as reprefill).
ServePolicy chunk_policy(ReusePolicy p);
// Whether a prompt may be served from a prefix entry's approximate tail (cache/prefix_index.h):
// patch and keep, which reuse rows from other contexts anyway; prefix and blind reuse exact
// prefixes only, reprefill none.
inline bool approximate_prefix(ReusePolicy p) {
  return p == ReusePolicy::Patch || p == ReusePolicy::Keep;
}

}  // namespace kamera
