#include "server/window_ops.h"

#include "server/json_fields.h"

namespace kamera {

using json = nlohmann::json;

namespace {

// A chunk id named by "chunk", or the refusal.
Result<ChunkId> chunk_field(const json& b) {
  auto cid = b.contains("chunk") && b["chunk"].is_string()
                 ? ChunkId::from_hex(b["chunk"].get<std::string>())
                 : std::nullopt;
  if (!cid) return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
  return *cid;
}

// An integer the window checks against its slots: here only its type and its 64 bits.
Result<int64_t> index_value(const json& v, const std::string& what) {
  return int_value(v, what, INT64_MIN, INT64_MAX);
}

Status parse_evict(const json& b, WindowEdit& e) {
  if (b.contains("end") && !b["end"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(const std::string end, string_field(b, "end", ""));
    if (end != "front" && end != "back")
      return make_error(ErrorCode::InvalidArgument, "\"end\" must be front or back");
    e.end = end == "front" ? WindowEdit::End::Front : WindowEdit::End::Back;
    return Status::Ok();
  }
  if (!b.contains("slot"))
    return make_error(ErrorCode::InvalidArgument, "\"slot\" must be a slot index");
  KAMERA_ASSIGN_OR_RETURN(e.slot, index_value(b["slot"], "\"slot\""));
  return Status::Ok();
}

Status parse_recall(const json& b, WindowEdit& e) {
  KAMERA_ASSIGN_OR_RETURN(e.chunk, chunk_field(b));
  if (b.contains("at") && !b["at"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(e.at, index_value(b["at"], "\"at\""));
  }
  KAMERA_ASSIGN_OR_RETURN(const std::string mode, string_field(b, "mode", "fresh"));
  if (mode != "fresh" && mode != "stale" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument, "\"mode\" must be fresh, stale or blind");
  e.recall = mode == "fresh"   ? RecallMode::Fresh
             : mode == "stale" ? RecallMode::Stale
                               : RecallMode::Blind;
  return Status::Ok();
}

Status parse_reorder(const json& b, WindowEdit& e) {
  if (!b.contains("order") || !b["order"].is_array())
    return make_error(ErrorCode::InvalidArgument, "\"order\" must be an array of slot indices");
  for (const json& x : b["order"]) {
    KAMERA_ASSIGN_OR_RETURN(int64_t i, index_value(x, "a slot in \"order\""));
    e.order.push_back(i);
  }
  KAMERA_ASSIGN_OR_RETURN(const std::string mode, string_field(b, "mode", "orbit"));
  if (mode != "transfer" && mode != "exact" && mode != "orbit" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument,
                      "\"mode\" must be transfer, exact, orbit or blind");
  e.reorder = mode == "transfer" ? ReorderMode::Transfer
              : mode == "exact"  ? ReorderMode::Exact
              : mode == "blind"  ? ReorderMode::Blind
                                 : ReorderMode::Orbit;
  return Status::Ok();
}

}  // namespace

Result<WindowPolicy> window_policy(const json& b) {
  WindowPolicy p;
  if (b.contains("rank")) {
    KAMERA_ASSIGN_OR_RETURN(int64_t rank, int_value(b["rank"], "\"rank\"", 1, 1 << 20));
    p.rank = int(rank);
  }
  KAMERA_ASSIGN_OR_RETURN(p.deep_half, bool_field(b, "deep_half", p.deep_half));
  KAMERA_ASSIGN_OR_RETURN(p.form_on_miss, bool_field(b, "form_on_miss", p.form_on_miss));
  if (b.contains("patch_byte_budget")) {
    if (!b["patch_byte_budget"].is_number_unsigned())
      return make_error(ErrorCode::InvalidArgument, "\"patch_byte_budget\" must be a byte count");
    p.patch_byte_budget = b["patch_byte_budget"].get<size_t>();
  }
  return p;
}

Result<WindowEdit> window_edit(const std::string& op, const json& b, const ContentParser& content) {
  WindowEdit e;
  if (op == "append") {
    e.op = WindowEdit::Op::Append;
    if (b.contains("chunk")) {
      KAMERA_ASSIGN_OR_RETURN(e.chunk, chunk_field(b));
    } else {
      KAMERA_ASSIGN_OR_RETURN(e.content, content(b));
    }
    KAMERA_ASSIGN_OR_RETURN(e.front, bool_field(b, "front", false));
  } else if (op == "evict") {
    e.op = WindowEdit::Op::Evict;
    KAMERA_TRY(parse_evict(b, e));
  } else if (op == "recall") {
    e.op = WindowEdit::Op::Recall;
    KAMERA_TRY(parse_recall(b, e));
  } else if (op == "reorder") {
    e.op = WindowEdit::Op::Reorder;
    KAMERA_TRY(parse_reorder(b, e));
  } else if (op == "refresh" || op == "fork") {
    e.op = op == "fork" ? WindowEdit::Op::Fork : WindowEdit::Op::Refresh;
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown window operation '{}'", op);
  }
  return e;
}

json window_json(const WindowView& w) {
  json slots = json::array();
  for (size_t i = 0; i < w.slots.size(); ++i) {
    const WindowView::Slot& s = w.slots[i];
    slots.push_back({{"index", i},
                     {"id", s.id.hex()},
                     {"position", s.position},
                     {"n_tokens", s.n_tokens},
                     {"conditioned", s.conditioned},
                     {"orbit", s.orbit},
                     {"clean", s.clean},
                     {"stale", s.stale}});
  }
  return {{"id", w.id}, {"object", "window"}, {"slots", slots}, {"next_position", w.next_position}};
}

}  // namespace kamera
