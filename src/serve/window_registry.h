// The agent windows of the server (/v1/windows): their registry, owned per client, and the typed
// edits the API exposes (append, evict, recall, reorder, refresh, fork). The API layer parses a
// request into a WindowEdit (server/window_ops.h) and renders the WindowView it gets back; every
// member here runs on the scheduler thread, which owns the engine and the KV pool.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "context/context.h"
#include "window/window.h"

namespace kamera {

// One edit of a window, as the request named it. Values that depend on the window (a slot index
// in range) are checked when it is applied.
struct WindowEdit {
  enum class Op { Append, Evict, Recall, Reorder, Refresh, Fork } op = Op::Refresh;
  // append: a stored chunk (chunk), or the content given; at the front or the back
  std::optional<ChunkId> chunk;
  std::optional<ChunkContent> content;
  bool front = false;
  // evict: one end (front / back), or a slot
  enum class End { None, Front, Back } end = End::None;
  int64_t slot = -1;
  // recall: the chunk (chunk), where (none: after the last slot), how
  std::optional<int64_t> at;
  RecallMode recall = RecallMode::Fresh;
  // reorder: the new order of the slots, how
  std::vector<int64_t> order;
  ReorderMode reorder = ReorderMode::Orbit;
};

// A window as the API shows it.
struct WindowView {
  struct Slot {
    ChunkId id;
    int32_t position = 0;
    int64_t n_tokens = 0;
    bool conditioned = false, orbit = false, clean = false, stale = false;
  };
  std::string id;
  std::vector<Slot> slots;
  int32_t next_position = 0;
};

// What windows may hold. Pages are KV pool pages; a window's count is an upper bound (its
// tokens in whole pages, plus a partial page per slot).
struct WindowQuota {
  int max_windows = 16;              // per client
  double ttl_s = 600;                // unused this long: deleted (0: never)
  int64_t client_pages = INT64_MAX;  // held by one client's windows
  int64_t total_pages = INT64_MAX;   // held by all windows
};

// Windows by id, each owned by the client that created it (others get 404). Not thread-safe:
// every call runs on the scheduler thread.
class WindowRegistry {
 public:
  WindowRegistry(Context& ctx, WindowQuota quota) : ctx_(ctx), quota_(quota) {}

  Result<WindowView> create(const std::string& client, const WindowPolicy& p);
  Result<WindowView> describe(const std::string& client, const std::string& id);
  Status erase(const std::string& client, const std::string& id);
  // The window after the edit (the new window for a fork).
  Result<WindowView> edit(const std::string& client, const std::string& id, const WindowEdit& e);
  Result<Window*> find(const std::string& client, const std::string& id);

  // Why an edit of window `id` (`e` null: a create) would pass a quota, or nullopt when it fits.
  // total: true when the refusal is the server's capacity rather than the client's share.
  struct Refusal {
    std::string message;
    bool total = false;
  };
  std::optional<Refusal> over_quota(const std::string& client, const std::string& id,
                                    const WindowEdit* e);
  // Deletes windows unused for longer than the TTL; returns how many.
  int expire();
  int64_t pages_held(const std::string& client) const;  // "" for all clients
  size_t size() const { return windows_.size(); }
  void clear() { windows_.clear(); }

 private:
  struct Entry {
    std::unique_ptr<Window> window;
    std::string owner;
    double last_used = 0;
  };
  Status append(Window& w, const WindowEdit& e);
  Status evict(Window& w, const WindowEdit& e);
  Status reorder(Window& w, const WindowEdit& e);
  std::string add(const std::string& client, std::unique_ptr<Window> w);
  WindowView view(const std::string& id, const Window& w) const;
  int64_t pages_of(const Window& w) const;
  int64_t growth_pages(const std::string& client, const std::string& id, const WindowEdit* e);

  Context& ctx_;
  WindowQuota quota_;
  std::map<std::string, Entry> windows_;
  int counter_ = 0;
};

}  // namespace kamera
