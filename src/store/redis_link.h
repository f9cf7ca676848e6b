// The connections of the Redis tier: one Redis, or a Redis Cluster, told apart at connect time
// (a standalone server refuses CLUSTER SLOTS). Debian bookworm packages no cluster client for C or
// C++ (hiredis 0.14 has none), so this is the small part of one the tier needs, over hiredis:
//
//   - the slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the text between the first
//     '{' and the next '}' when not empty), mod 16384: keys sharing a tag share a node, which the
//     tier's scripts need (a chunk's canonical, tombstone and patches are tagged with its id);
//   - the slot map (which master, which replicas serve each slot) read with CLUSTER SLOTS from any
//     node that answers, at start, after a MOVED redirect, and after a node fails (at most every
//     refresh_ms);
//   - MOVED (the slot has a new owner: the map entry is fixed and the command resent there) and
//     ASK (a slot being migrated: ASKING, then the command, on the node named, once);
//     TRYAGAIN / CLUSTERDOWN are retried after a short pause; all within max_redirects;
//   - reads from replicas, optional (READONLY on their connections; stale by the replication lag);
//   - per node: AUTH on connect, TLS through store/tls_tunnel.h, a back-off after a failure, a
//     warning once per outage;
//   - pipelining: a batch of commands is sent to each node at once and its replies read in order
//     (one round trip per node); a command redirected or failed in a batch is redone alone.
//
// Not thread-safe: the tier calls it under its own lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/tls_tunnel.h"

struct redisContext;
struct redisReply;

namespace kamera {

// The cluster slot of a key (hash tags honoured).
uint16_t redis_key_slot(std::string_view key);

struct RedisReplyFree {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyFree>;

class RedisLink {
 public:
  struct Endpoint {
    std::string host;
    int port = 6379;
  };
  struct Options {
    std::string user, password;  // AUTH on every connection (empty password: none)
    int db = 0;                  // standalone only (a cluster has database 0 alone)
    bool tls = false;
    TlsOptions tls_opts;
    int timeout_ms = 300;  // connect and per command
    int retry_after_ms = 3000;
    bool read_replicas = false;  // reads may go to a replica of the slot's master
    int max_redirects = 5;
    int refresh_ms = 100;  // slot map reads at most this often after failures
  };
  // One command: its argv and the key whose slot routes it (empty: any node).
  struct Command {
    std::string key;
    std::vector<std::string> args;
    bool read = false;  // may go to a replica (with read_replicas)
  };
  // A URL: redis[s]://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB] (several nodes: seeds
  // of a cluster, tried in order) into its seeds and o's user, password, db and tls.
  static Result<std::vector<Endpoint>> parse_url(const std::string& url, Options& o);
  // Never fails: unreachable seeds are retried by each command after their back-off.
  RedisLink(std::vector<Endpoint> seeds, Options o);
  ~RedisLink();
  RedisLink(const RedisLink&) = delete;
  RedisLink& operator=(const RedisLink&) = delete;

  // Runs one command; null when it could not be delivered (the node is down or in its back-off)
  // or it was still redirected after max_redirects. `connect`: false answers null at once for a
  // node not connected now (no connection attempt); `force`: ignores the node's back-off.
  RedisReply run(const Command& c, bool connect = true, bool force = false);
  // Runs a batch, pipelined per node; out[i] answers cmds[i] (null as in run()).
  std::vector<RedisReply> run_many(std::span<const Command> cmds);

  // Subscribes to `channel` on a connection of its own and calls on_message with each message's
  // payload until `stop` (checked every poll_ms). In a cluster every node relays every PUBLISH, so
  // one node is enough; when it fails, the next node of the map (or seed) is tried. Blocks: run
  // it on a thread of its own.
  void listen(const std::string& channel, const std::function<void(std::string_view)>& on_message,
              const std::atomic<bool>& stop, int poll_ms = 100);

  bool cluster() const { return cluster_; }
  bool any_connected() const;
  int64_t failures() const { return failures_; }  // commands not delivered, connect failures
  int64_t redirects() const { return redirects_; }
  // The slot map's masters as "host:port" (one per node serving slots); standalone: the server.
  std::vector<std::string> masters() const;
  // Reads the slot map now (at most every refresh_ms unless forced); false when no node answered.
  bool refresh(bool force = false);
  std::string describe() const;  // "host:port" of the first seed, "(cluster)" when one

 private:
  struct Node;
  Node* node_for(const Command& c, bool connect, bool force);
  Node* node_at(const std::string& host, int port);  // found or added
  bool connect(Node& n, bool force);
  void fail(Node& n, const char* what);
  RedisReply send(Node& n, const Command& c, bool asking);
  // Follows the error reply r of c (MOVED, ASK, TRYAGAIN); true: resend (ask_to set for ASK).
  bool redirected(const redisReply& r, Node*& ask_to);

  std::vector<Endpoint> seeds_;
  Options opts_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint16_t> slot_master_;  // node index per slot (cluster)
  bool cluster_ = false;
  bool mapped_ = false;  // the map (or the standalone verdict) was read once
  std::chrono::steady_clock::time_point last_refresh_{}, refresh_after_{};
  int64_t failures_ = 0, redirects_ = 0;
  size_t next_replica_ = 0;
};

}  // namespace kamera
