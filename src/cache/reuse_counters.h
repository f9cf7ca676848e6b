// Counts of where served prompt spans got their KV, and of the caches' work off the request path:
// written by whoever assembles prompts (the assembler, the server's chunk and window paths) and
// read from other threads (/metrics, /v1/stats), hence atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace kamera {

struct ReuseCounters {
  // chunk parts (cache/chunk_cache.h's assemble) and window slots
  std::atomic<int64_t> canonical{0}, patch_exact{0}, patch_orbit{0}, patch_formed{0}, blind{0},
      reprefilled{0};
  // text prompts (cache/prompt_assembler.h): admissions served an exact prefix (and of those, an
  // approximate tail past it: prefix_approximate), segments served
  // from an earlier context (exact antecedents, the nearest, the latest as it is), from a
  // canonical plus the nearest context's patch, from another server's stored canonical and patch
  std::atomic<int64_t> prefix{0}, prefix_approximate{0}, context_exact{0}, context_nearest{0},
      context_keep{0}, patch_nearest{0}, store_patch{0}, store_patch_nearest{0};
  // ... from the orbit of the segment's antecedent set (cache/idle_repair.h)
  std::atomic<int64_t> context_orbit{0};
  // Canonicals formed off the request path and the occurrences they compacted into patches.
  std::atomic<int64_t> background_canonicals{0}, background_patches{0};
  // Prompts refreshed exact and orbit occurrences formed off the request path (idle repair).
  std::atomic<int64_t> background_refreshes{0}, background_orbits{0};
  // Batches asked of the shared tiers for missed segments, and segments not asked for because
  // recomputing them was estimated cheaper (PromptAssembler's break-even).
  std::atomic<int64_t> store_fetch_batches{0}, store_fetch_skipped{0};
};

}  // namespace kamera
