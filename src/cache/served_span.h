// What a prompt's assembly tells of each run of its tokens: where its KV came from (SpanSource)
// and how much of it there was (ServedSegment). The assembler (cache/prompt_assembler.h), the
// chunk cache's assemble and the windows report in these terms; the API layer names them
// (usage.kamera.segments[].source) and the C API hands them out (kamera_serve_report).
#pragma once

#include <cstdint>
#include <optional>

#include "cache/chunk_cache.h"

namespace kamera {

// Where a span of the prompt got its KV (usage.kamera.segments[].source).
enum class SpanSource {
  Prefix,             // the exact token prefix (prefix index)
  ContextExact,       // a segment's rows from an earlier context with the same antecedents
  ContextNearest,     // ... from the context nearest to this one
  PatchExact,         // the segment's canonical plus that context's patch
  PatchNearest,       // ... plus the nearest context's patch
  Keep,               // the segment's latest rows, relocated as they are
  StorePatch,         // canonical and patch another server stored (this context's)
  StorePatchNearest,  // ... the nearest stored context's
  Recomputed,         // prefilled here
  Canonical,          // a chunk part: its canonical, no patch needed (leading)
  PatchHit,           // a chunk part: canonical plus a stored patch
  PatchFormed,        // a chunk part: canonical plus a patch formed for this request
  Blind,              // a chunk part: canonical, relocated, no patch
  Reprefilled,        // a chunk part prefilled in context
  WindowPatch,        // a window slot: canonical plus its patch
  WindowOrbit,        // a window slot: canonical plus its orbit patch
  WindowClean,        // a window slot: its clean (canonical) view
};
const char* span_source_name(SpanSource s);
SpanSource span_source_of(SegmentSource s);  // a chunk part's (cache/chunk_cache.h)

// A run of prompt tokens and where its KV came from.
struct ServedSegment {
  std::optional<ChunkId> id;  // the chunk's or segment's (none: the prefix, a recomputed run)
  int64_t tokens = 0;
  int32_t position = 0;
  SpanSource source = SpanSource::Recomputed;
  int shared_antecedents = -1;  // segments from another context: antecedents it shares (in order)
  bool media = false;           // an image or video part (else text)
  // The repair of a segment held from another context (cache/repair_plan.h): its deficit
  // estimate (per token; < 0: none made) and whether the reuse budget had it recomputed in
  // context (source Recomputed) instead of served from the index.
  double repair_estimate = -1;
  bool repaired = false;
};

// What a span got for the context it is served in (usage.kamera.segments[].repair.kind):
//   exact       its KV is what this context computes: the exact prefix, a segment's rows from the
//               same antecedents; nothing to repair
//   prefilled   nothing held it: computed here, in context
//   relocated   another context's rows, moved to this position as they are (context-nearest,
//               keep, a canonical with no patch)
//   patch       a canonical plus a stored (or formed) conditioning patch
//   recomputed  held from another context, but recomputed in context by the reuse budget
enum class RepairKind { Exact, Prefilled, Relocated, Patch, Recomputed };
RepairKind repair_kind(const ServedSegment& s);
const char* repair_kind_name(RepairKind k);

}  // namespace kamera
