// The Prometheus text of /metrics.
#pragma once

#include <cstdint>
#include <string>

#include "serve/metrics.h"

namespace kamera {

class ChunkStore;

// The server's counters, the store's and its tiers'.
std::string render_metrics(const ServerMetrics& m, const ChunkStore& store, int64_t queued);

}  // namespace kamera
