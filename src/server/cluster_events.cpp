#include "server/cluster_events.h"

#include <hiredis/hiredis.h>

#include <chrono>

#include "core/log.h"
#include "store/redis_link.h"

namespace kamera {

std::string events_channel(const Fingerprint& fp) {
  return fmt::format("kamera:{:016x}{:016x}:events", fp[0], fp[1]);
}

ClusterEvents::ClusterEvents(std::unique_ptr<RedisLink> link, std::string channel,
                             std::string server, std::function<nlohmann::json()> load,
                             int interval_ms, int snapshot_ms)
    : link_(std::move(link)),
      channel_(std::move(channel)),
      server_(std::move(server)),
      load_(std::move(load)),
      interval_ms_(interval_ms),
      snapshot_ms_(snapshot_ms) {
  thread_ = std::thread([this] { loop(); });
}

ClusterEvents::~ClusterEvents() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ClusterEvents::segment(const ChunkId& id, int64_t bytes, bool stored) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.size() < 100000) pending_.push_back({id, bytes, stored});  // else: dropped
}

void ClusterEvents::loop() {
  using Clock = std::chrono::steady_clock;
  auto last = Clock::time_point{}, last_snapshot = Clock::time_point{};
  int64_t seq = 0;
  bool lost = true;  // the next message is a snapshot
  for (;;) {
    std::vector<Change> batch;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [&] { return stop_; });
      stopping = stop_;
      batch.swap(pending_);
    }
    if (stopping) return;
    nlohmann::json stored = nlohmann::json::array(), evicted = nlohmann::json::array();
    for (const Change& c : batch) {
      int64_t& b = held_[c.id];
      b += c.stored ? c.bytes : -c.bytes;
      if (b <= 0) held_.erase(c.id);
      (c.stored ? stored : evicted)
          .push_back({{"id", c.id.hex()}, {"bytes", c.bytes}, {"kind", "segment"}});
    }
    const auto now = Clock::now();
    const bool snapshot = lost || now - last_snapshot >= std::chrono::milliseconds(snapshot_ms_);
    if (!snapshot && batch.empty() && now - last < std::chrono::seconds(1)) continue;
    if (snapshot) {
      stored = nlohmann::json::array();
      evicted = nlohmann::json::array();
      for (const auto& [id, bytes] : held_)
        stored.push_back({{"id", id.hex()}, {"bytes", bytes}, {"kind", "segment"}});
    }
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const nlohmann::json msg = {
        {"v", 1},         {"server", server_}, {"seq", seq},       {"reset", snapshot},
        {"t_ms", now_ms}, {"load", load_()},   {"stored", stored}, {"evicted", evicted}};
    RedisReply r = link_->run({"", {"PUBLISH", channel_, msg.dump()}});
    lost = !(r && r->type == REDIS_REPLY_INTEGER);
    if (lost) continue;
    ++seq;
    ++published_;
    last = now;
    if (snapshot) last_snapshot = now;
  }
}

}  // namespace kamera
