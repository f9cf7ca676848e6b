// The server's counters of segments served, by source, as /metrics and /v1/stats name them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <utility>

#include "serve/metrics.h"

namespace kamera {

inline std::array<std::pair<const char*, const std::atomic<int64_t>*>, 13> segment_counters(
    const ServerMetrics& m) {
  return {{{"canonical", &m.seg_canonical},
           {"patch_exact", &m.seg_patch_exact},
           {"patch_orbit", &m.seg_patch_orbit},
           {"patch_formed", &m.seg_patch_formed},
           {"blind", &m.seg_blind},
           {"reprefilled", &m.seg_reprefilled},
           {"prefix", &m.seg_prefix},
           {"context_exact", &m.seg_context_exact},
           {"context_nearest", &m.seg_context_nearest},
           {"keep", &m.seg_context_keep},
           {"patch_nearest", &m.seg_patch_nearest},
           {"store_patch", &m.seg_store_patch},
           {"store_patch_nearest", &m.seg_store_patch_nearest}}};
}

}  // namespace kamera
