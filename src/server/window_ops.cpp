#include "server/window_ops.h"

#include <algorithm>

namespace kamera {

using json = nlohmann::json;

Result<WindowPolicy> window_policy(const json& b) {
  WindowPolicy p;
  if (b.contains("rank")) {
    if (!b["rank"].is_number_integer() || b["rank"].get<int>() < 1)
      return make_error(ErrorCode::InvalidArgument, "\"rank\" must be a positive integer");
    p.rank = b["rank"].get<int>();
  }
  if (b.contains("deep_half"))
    p.deep_half = b["deep_half"].is_boolean() && b["deep_half"].get<bool>();
  if (b.contains("form_on_miss"))
    p.form_on_miss = !b["form_on_miss"].is_boolean() || b["form_on_miss"].get<bool>();
  if (b.contains("patch_byte_budget")) {
    if (!b["patch_byte_budget"].is_number_unsigned())
      return make_error(ErrorCode::InvalidArgument, "\"patch_byte_budget\" must be a byte count");
    p.patch_byte_budget = b["patch_byte_budget"].get<size_t>();
  }
  return p;
}

json window_json(const std::string& id, const Window& w) {
  json slots = json::array();
  const auto stale = w.stale_slots();
  for (size_t i = 0; i < w.slots().size(); ++i) {
    const WindowSlot& s = w.slots()[i];
    slots.push_back({{"index", i},
                     {"id", s.id.hex()},
                     {"position", s.position},
                     {"n_tokens", s.n_tokens()},
                     {"conditioned", s.conditioned},
                     {"orbit", s.orbit},
                     {"clean", s.clean},
                     {"stale", std::find(stale.begin(), stale.end(), int(i)) != stale.end()}});
  }
  return {{"id", id}, {"object", "window"}, {"slots", slots}, {"next_position", w.next_position()}};
}

std::string WindowRegistry::add(std::unique_ptr<Window> w) {
  const std::string id = fmt::format("w{}", ++counter_);
  windows_[id] = std::move(w);
  return id;
}

Result<Window*> WindowRegistry::find(const std::string& id) {
  auto it = windows_.find(id);
  if (it == windows_.end()) return make_error(ErrorCode::NotFound, "unknown window {}", id);
  return it->second.get();
}

Result<json> WindowRegistry::create(const WindowPolicy& p) {
  KAMERA_ASSIGN_OR_RETURN(auto w, Window::create(ctx_, p));
  const std::string id = add(std::move(w));
  return window_json(id, *windows_[id]);
}

Result<json> WindowRegistry::describe(const std::string& id) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(id));
  return window_json(id, *w);
}

Result<json> WindowRegistry::erase(const std::string& id) {
  if (!windows_.erase(id)) return make_error(ErrorCode::NotFound, "unknown window {}", id);
  return json{{"id", id}, {"deleted", true}};
}

Result<json> WindowRegistry::edit(const std::string& id, const std::string& op, const json& b) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(id));
  if (op == "append") {
    KAMERA_TRY(append(*w, b));
  } else if (op == "evict") {
    KAMERA_TRY(evict(*w, b));
  } else if (op == "recall") {
    KAMERA_TRY(recall(*w, b));
  } else if (op == "reorder") {
    KAMERA_TRY(reorder(*w, b));
  } else if (op == "refresh") {
    for (int s : w->stale_slots()) KAMERA_TRY(w->refresh(s));
  } else if (op == "fork") {
    KAMERA_ASSIGN_OR_RETURN(auto f, w->fork());
    const std::string fid = add(std::move(f));
    return window_json(fid, *windows_[fid]);
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown window operation '{}'", op);
  }
  return window_json(id, *w);
}

Status WindowRegistry::append(Window& w, const json& b) {
  Result<ChunkContent> c =
      make_error(ErrorCode::InvalidArgument, "give \"chunk\" (an id) or the chunk's content");
  if (b.contains("chunk")) {
    auto cid =
        b["chunk"].is_string() ? ChunkId::from_hex(b["chunk"].get<std::string>()) : std::nullopt;
    if (!cid) return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
    auto e = ctx_.store().find_canonical(*cid);
    if (!e) return make_error(ErrorCode::NotFound, "unknown chunk id {}", cid->hex());
    c = e->content;
  } else {
    c = parse_content_(b);
  }
  if (!c.ok()) return c.error();
  const bool front = b.contains("front") && b["front"].is_boolean() && b["front"].get<bool>();
  return front ? w.admit_front(*c) : w.admit_back(*c);
}

Status WindowRegistry::evict(Window& w, const json& b) {
  if (b.contains("end") && b["end"].is_string()) {
    const std::string end = b["end"].get<std::string>();
    if (w.slots().empty()) return make_error(ErrorCode::InvalidArgument, "the window is empty");
    if (end == "front") return w.evict_front();
    if (end == "back") return w.evict_back();
    return make_error(ErrorCode::InvalidArgument, "\"end\" must be front or back");
  }
  if (!b.contains("slot") || !b["slot"].is_number_integer())
    return make_error(ErrorCode::InvalidArgument, "\"slot\" must be a slot index");
  return w.evict(b["slot"].get<int>());
}

Status WindowRegistry::recall(Window& w, const json& b) {
  auto cid = b.contains("chunk") && b["chunk"].is_string()
                 ? ChunkId::from_hex(b["chunk"].get<std::string>())
                 : std::nullopt;
  if (!cid) return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
  const int at =
      b.contains("at") && b["at"].is_number_integer() ? b["at"].get<int>() : int(w.slots().size());
  const std::string mode =
      b.contains("mode") && b["mode"].is_string() ? b["mode"].get<std::string>() : "fresh";
  if (mode != "fresh" && mode != "stale" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument, "\"mode\" must be fresh, stale or blind");
  return w.recall(*cid, at,
                  mode == "fresh"   ? RecallMode::Fresh
                  : mode == "stale" ? RecallMode::Stale
                                    : RecallMode::Blind);
}

Status WindowRegistry::reorder(Window& w, const json& b) {
  if (!b.contains("order") || !b["order"].is_array())
    return make_error(ErrorCode::InvalidArgument, "\"order\" must be an array of slot indices");
  std::vector<int> order;
  for (const json& x : b["order"]) {
    if (!x.is_number_integer())
      return make_error(ErrorCode::InvalidArgument, "\"order\" must hold integers");
    order.push_back(x.get<int>());
  }
  const std::string mode =
      b.contains("mode") && b["mode"].is_string() ? b["mode"].get<std::string>() : "orbit";
  if (mode != "transfer" && mode != "exact" && mode != "orbit" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument,
                      "\"mode\" must be transfer, exact, orbit or blind");
  return w.reorder(order, mode == "transfer" ? ReorderMode::Transfer
                          : mode == "exact"  ? ReorderMode::Exact
                          : mode == "blind"  ? ReorderMode::Blind
                                             : ReorderMode::Orbit);
}

}  // namespace kamera
