#include "server/window_ops.h"

#include <algorithm>

#include "server/generation.h"
#include "server/openai.h"

namespace kamera {

using json = nlohmann::json;

namespace {

// The largest slot index of a window (-1 when it is empty).
int64_t slot_limit(const Window& w) {
  return int64_t(w.slots().size()) - 1;
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

std::string WindowRegistry::add(const std::string& client, std::unique_ptr<Window> w) {
  const std::string id = fmt::format("w{}", ++counter_);
  windows_[id] = Entry{std::move(w), client, now_s()};
  return id;
}

Result<Window*> WindowRegistry::find(const std::string& client, const std::string& id) {
  auto it = windows_.find(id);
  if (it == windows_.end() || it->second.owner != client)
    return make_error(ErrorCode::NotFound, "unknown window {}", id);
  it->second.last_used = now_s();
  return it->second.window.get();
}

Result<json> WindowRegistry::create(const std::string& client, const WindowPolicy& p) {
  KAMERA_ASSIGN_OR_RETURN(auto w, Window::create(ctx_, p));
  const std::string id = add(client, std::move(w));
  return window_json(id, *windows_[id].window);
}

Result<json> WindowRegistry::describe(const std::string& client, const std::string& id) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(client, id));
  return window_json(id, *w);
}

Result<json> WindowRegistry::erase(const std::string& client, const std::string& id) {
  KAMERA_TRY(find(client, id));
  windows_.erase(id);
  return json{{"id", id}, {"deleted", true}};
}

Result<json> WindowRegistry::edit(const std::string& client, const std::string& id,
                                  const std::string& op, const json& b) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(client, id));
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
    const std::string fid = add(client, std::move(f));
    return window_json(fid, *windows_[fid].window);
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown window operation '{}'", op);
  }
  return window_json(id, *w);
}

int64_t WindowRegistry::pages_of(const Window& w) const {
  const int64_t page = ctx_.pool().page_tokens();
  const int64_t tokens = ctx_.pool().n_tokens(w.sequence());
  return (tokens + page - 1) / page + int64_t(w.slots().size()) + 1;
}

int64_t WindowRegistry::pages_held(const std::string& client) const {
  int64_t pages = 0;
  for (const auto& [id, e] : windows_)
    if (client.empty() || e.owner == client) pages += pages_of(*e.window);
  return pages;
}

// Pages an operation may add: a new chunk's tokens, or a whole copy for a fork.
int64_t WindowRegistry::growth_pages(const std::string& client, const std::string& id,
                                     const std::string& op, const json& b) {
  const int64_t page = ctx_.pool().page_tokens();
  if (op == "create") return 1;
  auto w = find(client, id);
  if (!w.ok()) return 0;  // the operation itself answers 404
  if (op == "fork") return pages_of(**w);
  if (op != "append" && op != "recall") return 0;
  int64_t tokens = 0;
  const json* cid = b.contains("chunk") && b["chunk"].is_string() ? &b["chunk"] : nullptr;
  if (auto id128 = cid ? ChunkId::from_hex(cid->get<std::string>()) : std::nullopt) {
    if (auto e = ctx_.store().find_canonical(*id128)) tokens = e->content.n();
  } else if (b.contains("tokens") && b["tokens"].is_array()) {
    tokens = int64_t(b["tokens"].size());
  } else if (b.contains("embeddings") && b["embeddings"].is_array()) {
    tokens = int64_t(b["embeddings"].size());
  } else if (b.contains("text") && b["text"].is_string()) {
    tokens = int64_t(b["text"].get<std::string>().size());  // a token covers at least a byte
  }
  return (tokens + page - 1) / page + 1;
}

std::optional<WindowRegistry::Refusal> WindowRegistry::over_quota(const std::string& client,
                                                                  const std::string& id,
                                                                  const std::string& op,
                                                                  const json& b) {
  expire();
  if (op == "create" || op == "fork") {
    int n = 0;
    for (const auto& [wid, e] : windows_) n += e.owner == client;
    if (n >= quota_.max_windows)
      return Refusal{fmt::format("window quota: this client holds {} windows, the limit is {}", n,
                                 quota_.max_windows)};
  }
  const int64_t extra = growth_pages(client, id.empty() ? "" : id, op, b);
  if (extra == 0) return std::nullopt;
  const int64_t mine = pages_held(client), all = pages_held("");
  if (mine + extra > quota_.client_pages)
    return Refusal{
        fmt::format("KV quota: this client's windows hold {} pages, {} more would pass "
                    "its share of {}",
                    mine, extra, quota_.client_pages)};
  if (all + extra > quota_.total_pages)
    return Refusal{
        fmt::format("windows hold {} KV pages, {} more would pass the {} kept apart from "
                    "completions",
                    all, extra, quota_.total_pages),
        true};
  return std::nullopt;
}

int WindowRegistry::expire() {
  if (quota_.ttl_s <= 0) return 0;
  const double cutoff = now_s() - quota_.ttl_s;
  int n = 0;
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (it->second.last_used < cutoff) {
      it = windows_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
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
  KAMERA_ASSIGN_OR_RETURN(const bool front, bool_field(b, "front", false));
  return front ? w.admit_front(*c) : w.admit_back(*c);
}

Status WindowRegistry::evict(Window& w, const json& b) {
  if (b.contains("end") && !b["end"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(const std::string end, string_field(b, "end", ""));
    if (w.slots().empty()) return make_error(ErrorCode::InvalidArgument, "the window is empty");
    if (end == "front") return w.evict_front();
    if (end == "back") return w.evict_back();
    return make_error(ErrorCode::InvalidArgument, "\"end\" must be front or back");
  }
  if (!b.contains("slot"))
    return make_error(ErrorCode::InvalidArgument, "\"slot\" must be a slot index");
  KAMERA_ASSIGN_OR_RETURN(int64_t slot, int_value(b["slot"], "\"slot\"", 0, slot_limit(w)));
  return w.evict(int(slot));
}

Status WindowRegistry::recall(Window& w, const json& b) {
  auto cid = b.contains("chunk") && b["chunk"].is_string()
                 ? ChunkId::from_hex(b["chunk"].get<std::string>())
                 : std::nullopt;
  if (!cid) return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
  // checked as 64 bits before it is narrowed: 4294967296 is refused, never slot 0
  KAMERA_ASSIGN_OR_RETURN(const int64_t at, int_field(b, "at", int64_t(w.slots().size()), 0,
                                                      int64_t(w.slots().size())));
  KAMERA_ASSIGN_OR_RETURN(const std::string mode, string_field(b, "mode", "fresh"));
  if (mode != "fresh" && mode != "stale" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument, "\"mode\" must be fresh, stale or blind");
  return w.recall(*cid, int(at),
                  mode == "fresh"   ? RecallMode::Fresh
                  : mode == "stale" ? RecallMode::Stale
                                    : RecallMode::Blind);
}

Status WindowRegistry::reorder(Window& w, const json& b) {
  if (!b.contains("order") || !b["order"].is_array())
    return make_error(ErrorCode::InvalidArgument, "\"order\" must be an array of slot indices");
  std::vector<int> order;
  for (const json& x : b["order"]) {
    KAMERA_ASSIGN_OR_RETURN(int64_t i, int_value(x, "a slot in \"order\"", 0, slot_limit(w)));
    order.push_back(int(i));
  }
  KAMERA_ASSIGN_OR_RETURN(const std::string mode, string_field(b, "mode", "orbit"));
  if (mode != "transfer" && mode != "exact" && mode != "orbit" && mode != "blind")
    return make_error(ErrorCode::InvalidArgument,
                      "\"mode\" must be transfer, exact, orbit or blind");
  return w.reorder(order, mode == "transfer" ? ReorderMode::Transfer
                          : mode == "exact"  ? ReorderMode::Exact
                          : mode == "blind"  ? ReorderMode::Blind
                                             : ReorderMode::Orbit);
}

}  // namespace kamera
