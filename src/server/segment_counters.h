// The server's counters of segments served, by source, as /metrics and /v1/stats name them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <utility>

#include "serve/metrics.h"

namespace kamera {

inline std::array<std::pair<const char*, const std::atomic<int64_t>*>, 15> segment_counters(
    const ServerMetrics& m) {
  return {{{"canonical", &m.seg->canonical},
           {"patch_exact", &m.seg->patch_exact},
           {"patch_orbit", &m.seg->patch_orbit},
           {"patch_formed", &m.seg->patch_formed},
           {"blind", &m.seg->blind},
           {"reprefilled", &m.seg->reprefilled},
           {"prefix", &m.seg->prefix},
           {"prefix_approximate", &m.seg->prefix_approximate},
           {"context_exact", &m.seg->context_exact},
           {"context_nearest", &m.seg->context_nearest},
           {"context_orbit", &m.seg->context_orbit},
           {"keep", &m.seg->context_keep},
           {"patch_nearest", &m.seg->patch_nearest},
           {"store_patch", &m.seg->store_patch},
           {"store_patch_nearest", &m.seg->store_patch_nearest}}};
}

}  // namespace kamera
