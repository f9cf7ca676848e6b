#include "serve/window_registry.h"

#include <algorithm>

#include "serve/generation.h"

namespace kamera {

namespace {

// A slot index of window w, checked as 64 bits before it is narrowed (4294967296 is refused,
// never slot 0).
Result<int> slot_index(const Window& w, int64_t i, const char* what) {
  const int64_t last = int64_t(w.slots().size()) - 1;
  if (i < 0 || i > last)
    return make_error(ErrorCode::InvalidArgument, "{} = {} is outside [0, {}]", what, i, last);
  return int(i);
}

}  // namespace

WindowView WindowRegistry::view(const std::string& id, const Window& w) const {
  WindowView v;
  v.id = id;
  v.next_position = w.next_position();
  const auto stale = w.stale_slots();
  for (size_t i = 0; i < w.slots().size(); ++i) {
    const WindowSlot& s = w.slots()[i];
    const bool is_stale = std::find(stale.begin(), stale.end(), int(i)) != stale.end();
    v.slots.push_back({s.id, s.position, s.n_tokens(), s.conditioned, s.orbit, s.clean, is_stale});
  }
  return v;
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

Result<WindowView> WindowRegistry::create(const std::string& client, const WindowPolicy& p) {
  KAMERA_ASSIGN_OR_RETURN(auto w, Window::create(ctx_, p));
  const std::string id = add(client, std::move(w));
  return view(id, *windows_[id].window);
}

Result<WindowView> WindowRegistry::describe(const std::string& client, const std::string& id) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(client, id));
  return view(id, *w);
}

Status WindowRegistry::erase(const std::string& client, const std::string& id) {
  KAMERA_TRY(find(client, id));
  windows_.erase(id);
  return Status::Ok();
}

Result<WindowView> WindowRegistry::edit(const std::string& client, const std::string& id,
                                        const WindowEdit& e) {
  KAMERA_ASSIGN_OR_RETURN(Window * w, find(client, id));
  switch (e.op) {
    case WindowEdit::Op::Append:
      KAMERA_TRY(append(*w, e));
      break;
    case WindowEdit::Op::Evict:
      KAMERA_TRY(evict(*w, e));
      break;
    case WindowEdit::Op::Recall: {
      const int64_t n = int64_t(w->slots().size());
      const int64_t at = e.at.value_or(n);
      if (at < 0 || at > n)
        return make_error(ErrorCode::InvalidArgument, "\"at\" = {} is outside [0, {}]", at, n);
      KAMERA_TRY(w->recall(*e.chunk, int(at), e.recall));
      break;
    }
    case WindowEdit::Op::Reorder:
      KAMERA_TRY(reorder(*w, e));
      break;
    case WindowEdit::Op::Refresh:
      for (int s : w->stale_slots()) KAMERA_TRY(w->refresh(s));
      break;
    case WindowEdit::Op::Fork: {
      KAMERA_ASSIGN_OR_RETURN(auto f, w->fork());
      const std::string fid = add(client, std::move(f));
      return view(fid, *windows_[fid].window);
    }
  }
  return view(id, *w);
}

Status WindowRegistry::append(Window& w, const WindowEdit& e) {
  if (e.chunk) {
    auto entry = ctx_.store().find_canonical(*e.chunk);
    if (!entry) return make_error(ErrorCode::NotFound, "unknown chunk id {}", e.chunk->hex());
    return e.front ? w.admit_front(entry->content) : w.admit_back(entry->content);
  }
  return e.front ? w.admit_front(*e.content) : w.admit_back(*e.content);
}

Status WindowRegistry::evict(Window& w, const WindowEdit& e) {
  if (e.end != WindowEdit::End::None) {
    if (w.slots().empty()) return make_error(ErrorCode::InvalidArgument, "the window is empty");
    return e.end == WindowEdit::End::Front ? w.evict_front() : w.evict_back();
  }
  KAMERA_ASSIGN_OR_RETURN(const int slot, slot_index(w, e.slot, "\"slot\""));
  return w.evict(slot);
}

Status WindowRegistry::reorder(Window& w, const WindowEdit& e) {
  std::vector<int> order;
  for (int64_t i : e.order) {
    KAMERA_ASSIGN_OR_RETURN(const int s, slot_index(w, i, "a slot in \"order\""));
    order.push_back(s);
  }
  return w.reorder(order, e.reorder);
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

// Pages an edit may add (`e` null: a create): a new chunk's tokens, or a whole copy for a fork.
int64_t WindowRegistry::growth_pages(const std::string& client, const std::string& id,
                                     const WindowEdit* e) {
  const int64_t page = ctx_.pool().page_tokens();
  if (!e) return 1;
  auto w = find(client, id);
  if (!w.ok()) return 0;  // the edit itself answers 404
  if (e->op == WindowEdit::Op::Fork) return pages_of(**w);
  if (e->op != WindowEdit::Op::Append && e->op != WindowEdit::Op::Recall) return 0;
  int64_t tokens = 0;
  if (e->content) {
    tokens = e->content->n();
  } else if (e->chunk) {
    if (auto c = ctx_.store().find_canonical(*e->chunk)) tokens = c->content.n();
  }
  return (tokens + page - 1) / page + 1;
}

std::optional<WindowRegistry::Refusal> WindowRegistry::over_quota(const std::string& client,
                                                                  const std::string& id,
                                                                  const WindowEdit* e) {
  expire();
  if (!e || e->op == WindowEdit::Op::Fork) {
    int n = 0;
    for (const auto& [wid, entry] : windows_) n += entry.owner == client;
    if (n >= quota_.max_windows)
      return Refusal{fmt::format("window quota: this client holds {} windows, the limit is {}", n,
                                 quota_.max_windows)};
  }
  const int64_t extra = growth_pages(client, id, e);
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

}  // namespace kamera
