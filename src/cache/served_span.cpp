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
  }
  return "?";
}

}  // namespace kamera
