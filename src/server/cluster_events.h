// What a server tells the routers that share its Redis (or Redis Cluster): the prompt segments
// its memory holds, as they are stored and dropped, and its load, published as JSON on the
// channel kamera:<model fingerprint>:events (one message every interval_ms while something
// changed, and at least once a second as a heartbeat). A Redis Cluster relays every PUBLISH to
// every node, so a router subscribed to any node hears every server. The format (docs/SERVER.md,
// "Several servers"):
//
//   {"v": 1, "server": "<its URL>", "seq": <n, from 0>, "reset": <true on its first message>,
//    "t_ms": <unix ms>, "load": {"inflight": <completions queued or decoding>},
//    "stored":  [{"id": "<32 hex>", "bytes": <n>, "kind": "segment"}, ...],
//    "evicted": [{"id": "<32 hex>", "bytes": <n>, "kind": "segment"}, ...]}
//
// A segment's id is the chunk id of its tokens (cache/prompt_plan.h), which a router computes
// from a request the same way. "reset": true on a snapshot: "stored" then lists everything the
// server holds (an id's bytes summed over its occurrences), and a router replaces what it knew of
// this server. A snapshot is sent first, every snapshot_ms, and after a message was lost.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "reuse/chunk.h"
#include "store/entry_codec.h"

namespace kamera {

class RedisLink;  // store/redis_link.h

// The channel of a model's events.
std::string events_channel(const Fingerprint& model);

class ClusterEvents {
 public:
  // load() is called on the publishing thread: {"inflight": n, ...}.
  ClusterEvents(std::unique_ptr<RedisLink> link, std::string channel, std::string server,
                std::function<nlohmann::json()> load, int interval_ms = 100,
                int snapshot_ms = 2000);
  ~ClusterEvents();
  ClusterEvents(const ClusterEvents&) = delete;
  ClusterEvents& operator=(const ClusterEvents&) = delete;

  // From any thread: an occurrence of segment `id` stored or dropped (SegmentIndex::Observer).
  void segment(const ChunkId& id, int64_t bytes, bool stored);
  int64_t published() const { return published_; }

 private:
  struct Change {
    ChunkId id;
    int64_t bytes;
    bool stored;
  };
  void loop();

  std::unique_ptr<RedisLink> link_;
  std::string channel_, server_;
  std::function<nlohmann::json()> load_;
  int interval_ms_, snapshot_ms_;
  std::unordered_map<ChunkId, int64_t, ChunkIdHash> held_;  // the publishing thread's mirror
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Change> pending_;
  bool stop_ = false;
  std::atomic<int64_t> published_{0};
  std::thread thread_;
};

}  // namespace kamera
