#include "cache/served_span.h"

namespace kamera {

const char* span_source_name(SpanSource s) {
  switch (s) {
    case SpanSource::Prefix:
      return "prefix";
    case SpanSource::ContextExact:
      return "context-exact";
    case SpanSource::ContextNearest:
      return "context-nearest";
    case SpanSource::ContextOrbit:
      return "context-orbit";
    case SpanSource::PatchExact:
      return "patch-exact";
    case SpanSource::PatchNearest:
      return "patch-nearest";
    case SpanSource::Keep:
      return "keep";
    case SpanSource::StorePatch:
      return "store-patch";
    case SpanSource::StorePatchNearest:
      return "store-patch-nearest";
    case SpanSource::Recomputed:
      return "recomputed";
    case SpanSource::Canonical:
      return "canonical";
    case SpanSource::PatchHit:
      return "patch-hit";
    case SpanSource::PatchFormed:
      return "patch-formed";
    case SpanSource::Blind:
      return "blind";
    case SpanSource::Reprefilled:
      return "reprefilled";
    case SpanSource::WindowPatch:
      return "patch";
    case SpanSource::WindowOrbit:
      return "patch-orbit";
    case SpanSource::WindowClean:
      return "clean-view";
    case SpanSource::PrefixApproximate:
      return "prefix-approximate";
  }
  return "?";
}

SpanSource span_source_of(SegmentSource s) {
  switch (s) {
    case SegmentSource::Canonical:
      return SpanSource::Canonical;
    case SegmentSource::PatchHit:
      return SpanSource::PatchHit;
    case SegmentSource::PatchFormed:
      return SpanSource::PatchFormed;
    case SegmentSource::Blind:
      return SpanSource::Blind;
    case SegmentSource::Reprefilled:
      return SpanSource::Reprefilled;
  }
  return SpanSource::Recomputed;
}

void mark_approximate_prefix(std::vector<ServedSegment>& spans, int begin, int exact) {
  int at = begin;  // the prompt token the span starts at
  for (size_t i = 0; i < spans.size(); ++i) {
    ServedSegment& s = spans[i];
    if (s.source != SpanSource::Prefix) continue;
    const int end = at + int(s.tokens);
    if (end > exact && (at >= exact || s.media)) {
      s.source = SpanSource::PrefixApproximate;
    } else if (end > exact) {  // text on both sides: split it
      ServedSegment tail = s;
      tail.tokens = end - exact;
      tail.position = s.position + (exact - at);
      tail.source = SpanSource::PrefixApproximate;
      s.tokens = exact - at;
      spans.insert(spans.begin() + std::ptrdiff_t(i) + 1, tail);
      return;  // the spans past it are approximate already (or none)
    }
    at = end;
  }
}

RepairKind repair_kind(const ServedSegment& s) {
  if (s.repaired) return RepairKind::Recomputed;
  switch (s.source) {
    case SpanSource::Prefix:
    case SpanSource::ContextExact:
    case SpanSource::Canonical:  // a leading chunk part: its canonical is its KV in context
      return RepairKind::Exact;
    case SpanSource::ContextNearest:
    case SpanSource::Keep:
    case SpanSource::Blind:
    case SpanSource::WindowClean:
      return RepairKind::Relocated;
    case SpanSource::PatchExact:
    case SpanSource::PatchNearest:
    case SpanSource::StorePatch:
    case SpanSource::StorePatchNearest:
    case SpanSource::PatchHit:
    case SpanSource::PatchFormed:
    case SpanSource::WindowPatch:
    case SpanSource::WindowOrbit:
      return RepairKind::Patch;
    case SpanSource::ContextOrbit:
      return RepairKind::Orbit;
    case SpanSource::PrefixApproximate:
      return RepairKind::Approximate;
    case SpanSource::Recomputed:
    case SpanSource::Reprefilled:
      return RepairKind::Prefilled;
  }
  return RepairKind::Prefilled;
}

const char* repair_kind_name(RepairKind k) {
  switch (k) {
    case RepairKind::Exact:
      return "exact";
    case RepairKind::Prefilled:
      return "prefilled";
    case RepairKind::Relocated:
      return "relocated";
    case RepairKind::Patch:
      return "patch";
    case RepairKind::Recomputed:
      return "recomputed";
    case RepairKind::Orbit:
      return "orbit";
    case RepairKind::Approximate:
      return "approximate";
  }
  return "?";
}

}  // namespace kamera
