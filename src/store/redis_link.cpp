#include "store/redis_link.h"

#include <hiredis/hiredis.h>

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <regex>
#include <thread>

#include "core/log.h"

namespace kamera {

namespace {

constexpr uint16_t kSlots = 16384;
constexpr uint16_t kNoNode = 0xffff;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the cluster's key hash.
uint16_t crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= uint16_t(c) << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc;
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "host:port" (the last ':' splits, for IPv6 addresses); false when malformed.
bool split_endpoint(std::string_view s, std::string& host, int& port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  host = std::string(s.substr(0, colon));
  const std::string_view p = s.substr(colon + 1);
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  return ec == std::errc() && end == p.data() + p.size() && port > 0 && port < 65536;
}

}  // namespace

uint16_t redis_key_slot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % kSlots;
}

void RedisReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

struct RedisLink::Node {
  std::string host;
  int port = 0;
  redisContext* ctx = nullptr;
  std::unique_ptr<TlsTunnel> tunnel;  // with TLS, while ctx is open
  std::chrono::steady_clock::time_point next_attempt{};
  bool warned = false;
  bool readonly = false;           // READONLY sent on this connection
  std::vector<uint16_t> replicas;  // while it serves slots as a master
  std::string name() const { return fmt::format("{}:{}", host, port); }
  ~Node() {
    if (ctx) redisFree(ctx);  // closes hiredis's end of the tunnel first
  }
};

Result<std::vector<RedisLink::Endpoint>> RedisLink::parse_url(const std::string& url, Options& o) {
  static const std::regex re(
      R"(^redis(s?)://(?:([^:@/]*):([^@/]*)@)?([A-Za-z0-9.\-_:,]+?)(?:/([0-9]{1,3}))?/?$)");
  static const std::regex node_re(R"(^([A-Za-z0-9.\-_]+)(?::([0-9]{1,5}))?$)");
  const char* form =
      "--redis: expected redis[s]://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB]";
  std::smatch m;
  if (!std::regex_match(url, m, re)) return make_error(ErrorCode::InvalidArgument, "{}", form);
  std::vector<Endpoint> seeds;
  const std::string nodes = m[4].str();
  for (size_t at = 0; at <= nodes.size();) {
    const size_t comma = std::min(nodes.find(',', at), nodes.size());
    const std::string one = nodes.substr(at, comma - at);
    std::smatch n;
    if (!std::regex_match(one, n, node_re))
      return make_error(ErrorCode::InvalidArgument, "{}", form);
    const int port = n[2].matched ? std::stoi(n[2].str()) : 6379;
    if (port <= 0 || port > 65535)
      return make_error(ErrorCode::InvalidArgument, "--redis: bad port {}", port);
    seeds.push_back({n[1].str(), port});
    at = comma + 1;
  }
  o.tls = !m[1].str().empty();
  o.user = m[2].str();
  o.password = m[3].str();
  o.db = m[5].matched ? std::stoi(m[5].str()) : 0;
  return seeds;
}

RedisLink::RedisLink(std::vector<Endpoint> seeds, Options o)
    : seeds_(std::move(seeds)), opts_(std::move(o)), slot_master_(kSlots, kNoNode) {
  for (const Endpoint& e : seeds_) node_at(e.host, e.port);
}

RedisLink::~RedisLink() = default;

std::string RedisLink::describe() const {
  const std::string first =
      seeds_.empty() ? "?" : fmt::format("{}:{}", seeds_[0].host, seeds_[0].port);
  return cluster_ ? first + " (cluster)" : first;
}

RedisLink::Node* RedisLink::node_at(const std::string& host, int port) {
  for (auto& n : nodes_)
    if (n->host == host && n->port == port) return n.get();
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->host = host;
  nodes_.back()->port = port;
  return nodes_.back().get();
}

void RedisLink::fail(Node& n, const char* what) {
  ++failures_;
  if (!n.warned)
    log().warn("redis {}: {} failed ({}); serving from local tiers", n.name(), what,
               n.ctx && n.ctx->errstr[0] ? n.ctx->errstr : "unreachable");
  n.warned = true;
  if (n.ctx) redisFree(n.ctx);
  n.ctx = nullptr;
  n.tunnel.reset();
  n.readonly = false;
  n.next_attempt =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.retry_after_ms);
}

bool RedisLink::connect(Node& n, bool force) {
  if (n.ctx) return true;
  // A node backing off, or every node while the last map read found none answering (a
  // partition): no attempt, so a stopped cluster costs a few timeouts per retry_after_ms, not
  // one per command.
  const auto now = std::chrono::steady_clock::now();
  if (!force && (now < n.next_attempt || now < refresh_after_)) return false;
  const timeval tv{opts_.timeout_ms / 1000, (opts_.timeout_ms % 1000) * 1000};
  if (opts_.tls) {
    auto tunnel = TlsTunnel::open(n.host, n.port, opts_.tls_opts, opts_.timeout_ms);
    if (!tunnel.ok()) {
      if (!n.warned) log().warn("redis: {}", tunnel.message());
      fail(n, "TLS connect");
      return false;
    }
    n.tunnel = std::move(*tunnel);
    n.ctx = redisConnectFd(n.tunnel->release_plain_fd());
  } else {
    n.ctx = redisConnectWithTimeout(n.host.c_str(), n.port, tv);
  }
  if (!n.ctx || n.ctx->err) {
    fail(n, "connect");
    return false;
  }
  redisSetTimeout(n.ctx, tv);
  auto ok = [&](const char* what, std::vector<std::string> args) {
    RedisReply r = send(n, {"", std::move(args)}, false);
    if (!r) return false;
    if (r->type != REDIS_REPLY_ERROR) return true;
    log().warn("redis {}: {} refused: {}", n.name(), what, r->str);
    fail(n, what);
    return false;
  };
  if (!opts_.password.empty() &&
      !(opts_.user.empty() ? ok("AUTH", {"AUTH", opts_.password})
                           : ok("AUTH", {"AUTH", opts_.user, opts_.password})))
    return false;
  if (opts_.db != 0 && !ok("SELECT", {"SELECT", std::to_string(opts_.db)})) return false;
  if (n.warned) log().info("redis {}: reconnected", n.name());
  n.warned = false;
  return true;
}

RedisReply RedisLink::send(Node& n, const Command& c, bool asking) {
  if (!n.ctx) return nullptr;
  if (asking) RedisReply ok(static_cast<redisReply*>(redisCommand(n.ctx, "ASKING")));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : c.args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  RedisReply r(static_cast<redisReply*>(
      redisCommandArgv(n.ctx, int(argv.size()), argv.data(), lens.data())));
  if (!r) fail(n, c.args.empty() ? "command" : c.args[0].c_str());
  return r;
}

bool RedisLink::refresh(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force &&
      (now - last_refresh_ < std::chrono::milliseconds(opts_.refresh_ms) || now < refresh_after_))
    return mapped_;
  last_refresh_ = now;
  // Connected nodes first (no connect cost), then the seeds, then every other node known; at
  // most two that do not answer (a partition costs two timeouts, not one per node), and after a
  // refresh no node answered, none for retry_after_ms.
  std::vector<Node*> order;
  for (auto& n : nodes_)
    if (n->ctx) order.push_back(n.get());
  for (auto& n : nodes_)
    if (!n->ctx) order.push_back(n.get());
  int silent = 0;
  for (Node* n : order) {
    if (silent >= 2) break;
    const auto at = std::chrono::steady_clock::now();  // earlier nodes may have taken timeouts
    const bool backing_off = !n->ctx && (at < n->next_attempt || at < refresh_after_);
    if (!connect(*n, false)) {
      silent += !backing_off;  // tried now, and it did not answer
      continue;
    }
    RedisReply r = send(*n, {"", {"CLUSTER", "SLOTS"}}, false);
    if (!r) {
      ++silent;
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      if (std::string_view(r->str, r->len).find("cluster support disabled") ==
          std::string_view::npos)
        continue;
      cluster_ = false;  // a standalone server: every slot is its
      const uint16_t idx = uint16_t(
          std::find_if(nodes_.begin(), nodes_.end(), [&](auto& p) { return p.get() == n; }) -
          nodes_.begin());
      std::fill(slot_master_.begin(), slot_master_.end(), idx);
      return mapped_ = true;
    }
    if (r->type != REDIS_REPLY_ARRAY) continue;
    std::vector<uint16_t> map(kSlots, kNoNode);
    for (auto& node : nodes_) node->replicas.clear();
    auto node_of = [&](const redisReply* e) -> Node* {
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
          e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_INTEGER)
        return nullptr;
      std::string host(e->element[0]->str, e->element[0]->len);
      if (host.empty() || host == "?") host = n->host;
      return node_at(host, int(e->element[1]->integer));
    };
    auto index_of = [&](Node* p) {
      return uint16_t(
          std::find_if(nodes_.begin(), nodes_.end(), [&](auto& q) { return q.get() == p; }) -
          nodes_.begin());
    };
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
      const long long lo = e->element[0]->integer, hi = e->element[1]->integer;
      Node* m = node_of(e->element[2]);
      if (!m || lo < 0 || hi >= kSlots || lo > hi) continue;
      const uint16_t mi = index_of(m);
      for (long long s = lo; s <= hi; ++s) map[size_t(s)] = mi;
      for (size_t k = 3; k < e->elements; ++k) {
        Node* rep = node_of(e->element[k]);
        const uint16_t ri = rep ? index_of(rep) : kNoNode;
        if (rep && std::find(m->replicas.begin(), m->replicas.end(), ri) == m->replicas.end())
          m->replicas.push_back(ri);
      }
    }
    slot_master_ = std::move(map);
    cluster_ = true;
    return mapped_ = true;
  }
  // No node answered: none is tried again for retry_after_ms (unless none was tried at all:
  // the outage is not extended by the reads it refuses).
  if (silent > 0)  // counted from now: the timeouts of this read are behind it
    refresh_after_ =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.retry_after_ms);
  return false;
}

RedisLink::Node* RedisLink::node_for(const Command& c, bool connect_now, bool force) {
  if (!mapped_ && (!connect_now || !refresh(true))) return nullptr;
  const uint16_t slot = cluster_ && !c.key.empty() ? redis_key_slot(c.key) : 0;
  uint16_t idx = slot_master_[slot];
  if (idx == kNoNode && refresh()) idx = slot_master_[slot];
  if (idx == kNoNode) {  // a slot no master serves (the cluster is down for it)
    ++failures_;
    return nullptr;
  }
  Node* m = nodes_[idx].get();
  if (c.read && opts_.read_replicas && cluster_ && !m->replicas.empty()) {
    // Round robin over the master and its replicas; a replica not reachable leaves it to the
    // master.
    const size_t pick = next_replica_++ % (m->replicas.size() + 1);
    if (pick > 0) {
      Node* rep = nodes_[m->replicas[pick - 1]].get();
      if ((connect_now ? connect(*rep, false) : rep->ctx != nullptr) && (rep->readonly || [&] {
            RedisReply r = send(*rep, {"", {"READONLY"}}, false);
            return rep->readonly = r && r->type != REDIS_REPLY_ERROR;
          }()))
        return rep;
    }
  }
  if (!connect_now) return m->ctx ? m : nullptr;
  return connect(*m, force) ? m : nullptr;
}

bool RedisLink::redirected(const redisReply& r, Node*& ask_to) {
  const std::string_view msg(r.str, r.len);
  const bool moved = starts_with(msg, "MOVED "), ask = starts_with(msg, "ASK ");
  if (moved || ask) {
    // "MOVED <slot> <host>:<port>"
    const size_t sp1 = msg.find(' '), sp2 = msg.find(' ', sp1 + 1);
    std::string host;
    int port = 0, slot = -1;
    const std::string_view s = msg.substr(sp1 + 1, sp2 - sp1 - 1);
    std::from_chars(s.data(), s.data() + s.size(), slot);
    if (sp2 == std::string_view::npos || slot < 0 || slot >= kSlots ||
        !split_endpoint(msg.substr(sp2 + 1), host, port))
      return false;
    if (host.empty()) host = seeds_.empty() ? "127.0.0.1" : seeds_[0].host;
    Node* t = node_at(host, port);
    if (ask) {
      ask_to = t;
      return true;
    }
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].get() == t) slot_master_[size_t(slot)] = uint16_t(i);
    refresh();  // one slot moved: others may have too
    return true;
  }
  if (starts_with(msg, "READONLY ")) {  // a former master, now a replica: the map is stale
    refresh(true);
    return true;
  }
  if (starts_with(msg, "TRYAGAIN") || starts_with(msg, "CLUSTERDOWN")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return true;
  }
  return false;
}

RedisReply RedisLink::run(const Command& c, bool connect_now, bool force) {
  Node* ask = nullptr;
  for (int i = 0; i <= opts_.max_redirects; ++i) {
    Node* n = ask ? (connect(*ask, force) ? ask : nullptr) : node_for(c, connect_now, force);
    const bool asking = ask != nullptr;
    ask = nullptr;
    if (!n) {
      // The slot's node is down or backing off: after a failover the map names another.
      if (cluster_ && connect_now && i == 0 && refresh()) continue;
      return nullptr;
    }
    RedisReply r = send(*n, c, asking);
    if (!r) {
      if (cluster_ && connect_now && refresh()) continue;
      return nullptr;
    }
    if (r->type == REDIS_REPLY_ERROR && redirected(*r, ask)) {
      ++redirects_;
      continue;
    }
    return r;
  }
  ++failures_;
  return nullptr;
}

std::vector<RedisReply> RedisLink::run_many(std::span<const Command> cmds) {
  std::vector<RedisReply> out(cmds.size());
  std::vector<std::pair<Node*, std::vector<size_t>>> groups;
  for (size_t i = 0; i < cmds.size(); ++i) {
    Node* n = node_for(cmds[i], true, false);
    if (!n) continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](auto& p) { return p.first == n; });
    if (g == groups.end()) g = groups.insert(groups.end(), {n, {}});
    g->second.push_back(i);
  }
  for (auto& [n, idx] : groups) {
    for (size_t i : idx) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const std::string& a : cmds[i].args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      redisAppendCommandArgv(n->ctx, int(argv.size()), argv.data(), lens.data());
    }
    for (size_t i : idx) {
      void* reply = nullptr;
      if (redisGetReply(n->ctx, &reply) != REDIS_OK) {
        fail(*n, "pipeline");
        break;
      }
      out[i].reset(static_cast<redisReply*>(reply));
    }
  }
  // What a node did not answer, or answered with a redirect, is redone alone.
  for (size_t i = 0; i < cmds.size(); ++i) {
    const redisReply* r = out[i].get();
    const bool redirect =
        r && r->type == REDIS_REPLY_ERROR &&
        (starts_with({r->str, r->len}, "MOVED ") || starts_with({r->str, r->len}, "ASK ") ||
         starts_with({r->str, r->len}, "TRYAGAIN") || starts_with({r->str, r->len}, "READONLY "));
    if (!r || redirect) out[i] = run(cmds[i]);
  }
  return out;
}

void RedisLink::listen(const std::string& channel,
                       const std::function<void(std::string_view)>& on_message,
                       const std::atomic<bool>& stop, int poll_ms) {
  for (size_t next = 0; !stop; ++next) {
    if (!mapped_) refresh(true);
    // a connection of its own, to the next node known (seeds and the map's nodes)
    const size_t known = nodes_.size();
    Node n;
    n.host = nodes_[next % known]->host;
    n.port = nodes_[next % known]->port;
    RedisReply sub = connect(n, true) ? send(n, {"", {"SUBSCRIBE", channel}}, false) : nullptr;
    if (!sub || sub->type != REDIS_REPLY_ARRAY) {
      if (next % known == known - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    log().info("redis {}: listening on {}", n.name(), channel);
    while (!stop && n.ctx) {
      void* reply = nullptr;
      if (redisGetReplyFromReader(n.ctx, &reply) != REDIS_OK) break;
      if (reply) {
        RedisReply r(static_cast<redisReply*>(reply));
        // ["message", channel, payload]
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING &&
            std::string_view(r->element[0]->str, r->element[0]->len) == "message")
          on_message(std::string_view(r->element[2]->str, r->element[2]->len));
        continue;
      }
      pollfd p{n.ctx->fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, poll_ms);
      if (ready < 0 || (ready == 1 && redisBufferRead(n.ctx) != REDIS_OK)) break;
    }
    if (!stop) log().warn("redis {}: subscription lost; trying the next node", n.name());
  }
}

bool RedisLink::any_connected() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](auto& n) { return n->ctx != nullptr; });
}

std::vector<std::string> RedisLink::masters() const {
  std::vector<uint16_t> idx(slot_master_.begin(), slot_master_.end());
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<std::string> out;
  for (uint16_t i : idx)
    if (i != kNoNode) out.push_back(nodes_[i]->name());
  return out;
}

}  // namespace kamera
