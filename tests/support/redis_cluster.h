// A Redis Cluster of a test's own on loopback: three masters and three replicas, redis-server
// --cluster-enabled on six free ports (each with its cluster bus port, +10000, free too: other
// helpers and tests run at once, and 6379 belongs to the tests' standalone Redis), joined by
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, with a password on every
// node (AUTH and masterauth), a short node timeout so that a killed master's replica takes over in
// about a second. Everything is killed and removed with the object. ok() is false, and why() says
// so, when redis-server or redis-cli is missing or the cluster did not form.
#pragma once

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/shell.h"
#include "support/temp_path.h"

class OwnCluster {
 public:
  static constexpr const char* kPassword = "cluster-test-password";

  explicit OwnCluster(int node_timeout_ms = 1000) : dir_(unique_temp("redis-cluster")) {
    if (run_shell("command -v redis-server && command -v redis-cli").rc != 0) {
      why_ = "redis-server or redis-cli is not installed (scripts/install-deps.sh installs them)";
      return;
    }
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ports_ = free_ports(6);
    if (ports_.size() < 6) {
      why_ = "no six free port pairs";
      return;
    }
    for (int p : ports_) {
      const std::string cmd = fmt::format(
          "redis-server --port {1} --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "
          "{0}/nodes-{1}.conf --cluster-node-timeout {2} --cluster-replica-validity-factor 0 "
          "--requirepass {3} --masterauth {3} --save '' --appendonly no --daemonize yes --dir {0} "
          "--pidfile {0}/{1}.pid --logfile {0}/{1}.log >/dev/null 2>&1",
          dir_, p, node_timeout_ms, kPassword);
      if (std::system(cmd.c_str()) != 0) {
        why_ = "redis-server did not start";
        return;
      }
    }
    for (int p : ports_)
      if (!wait_for([&] { return reply_of(p, {"PING"}) == "PONG"; }, 5000)) {
        why_ = fmt::format("redis-server on port {} does not answer", p);
        return;
      }
    std::string nodes;
    for (int p : ports_) nodes += fmt::format(" 127.0.0.1:{}", p);
    const ShellOutput c = run_shell(fmt::format(
        "redis-cli -a {} --no-auth-warning --cluster create{} --cluster-replicas 1 --cluster-yes",
        kPassword, nodes));
    if (c.rc != 0) {
      why_ = "redis-cli --cluster create failed: " + c.err + c.out;
      return;
    }
    // Every node sees the whole cluster, and every master has its replica in sync.
    const bool formed = wait_for(
        [&] {
          for (int p : ports_)
            if (reply_of(p, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos)
              return false;
          int linked = 0;
          for (int p : ports_)
            linked += reply_of(p, {"INFO", "replication"}).find("master_link_status:up") !=
                      std::string::npos;
          return linked == 3;
        },
        15000);
    if (!formed) why_ = "the cluster did not form within 15 s";
    ok_ = formed;
  }
  ~OwnCluster() {
    for (int p : ports_) {
      const int pid = pid_of(p);
      if (pid > 0) ::kill(pid, SIGCONT), ::kill(pid, SIGKILL);
    }
    std::filesystem::remove_all(dir_);
  }
  OwnCluster(const OwnCluster&) = delete;
  OwnCluster& operator=(const OwnCluster&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::vector<int>& ports() const { return ports_; }
  // Every node as a seed: redis://:PASSWORD@127.0.0.1:P1,127.0.0.1:P2,...
  std::string url(size_t seeds = 6) const {
    std::string u = fmt::format("redis://:{}@", kPassword);
    for (size_t i = 0; i < std::min(seeds, ports_.size()); ++i)
      u += fmt::format("{}127.0.0.1:{}", i ? "," : "", ports_[i]);
    return u;
  }
  // The port of the master serving `key`'s slot now (asked of a live node), 0 when none answers.
  int master_of(const std::string& key) const {
    for (int p : ports_) {
      const std::string slot = reply_of(p, {"CLUSTER", "KEYSLOT", key});
      if (slot.empty()) continue;
      for (const auto& [lo, hi, port] : slots(p))
        if (std::stoi(slot) >= lo && std::stoi(slot) <= hi) return port;
    }
    return 0;
  }
  std::vector<int> masters() const {
    std::vector<int> out;
    for (int p : ports_)
      for (const auto& s : slots(p))
        if (std::find(out.begin(), out.end(), std::get<2>(s)) == out.end())
          out.push_back(std::get<2>(s));
    return out;
  }
  // (first slot, last slot, master port) as a live node sees them.
  std::vector<std::tuple<int, int, int>> slots(int asked) const {
    std::vector<std::tuple<int, int, int>> out;
    redisContext* c = connect(asked);
    if (!c) return out;
    auto* r = static_cast<redisReply*>(redisCommand(c, "CLUSTER SLOTS"));
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      out.emplace_back(int(e->element[0]->integer), int(e->element[1]->integer),
                       int(e->element[2]->element[1]->integer));
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }
  // A command's reply on one node as text (status, string, integer; arrays: empty).
  std::string reply_of(int port, std::vector<std::string> args) const {
    redisContext* c = connect(port);
    if (!c) return "";
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* r =
        static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), lens.data()));
    std::string out;
    if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
              r->type == REDIS_REPLY_ERROR))
      out.assign(r->str, r->len);
    if (r && r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }
  void signal(int port, int sig) const {
    if (const int pid = pid_of(port); pid > 0) ::kill(pid, sig);
  }
  // Kills the node (SIGKILL), then waits until the survivors serve every slot again (its replica
  // took over); false when that did not happen within timeout_ms.
  bool kill_and_wait_failover(int port, int timeout_ms = 15000) {
    signal(port, SIGKILL);
    dead_.push_back(port);
    return wait_for(
        [&] {
          for (int p : ports_) {
            if (std::find(dead_.begin(), dead_.end(), p) != dead_.end()) continue;
            if (reply_of(p, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos)
              return false;
            for (const auto& s : slots(p))
              if (std::find(dead_.begin(), dead_.end(), std::get<2>(s)) != dead_.end())
                return false;
          }
          return true;
        },
        timeout_ms);
  }

  template <class F>
  static bool wait_for(F&& f, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return f();
  }

 private:
  redisContext* connect(int port) const {
    timeval tv{0, 300000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", kPassword));
    if (r) freeReplyObject(r);
    return c;
  }
  int pid_of(int port) const {
    int pid = 0;
    std::ifstream(fmt::format("{}/{}.pid", dir_, port)) >> pid;
    return pid;
  }
  static bool bindable(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  }
  // Ports p in [20000, 40000) with p and its cluster bus port p + 10000 free, away from 6379.
  static std::vector<int> free_ports(int n) {
    std::mt19937 rng(std::random_device{}() ^ uint32_t(::getpid()));
    std::vector<int> out;
    for (int tries = 0; tries < 2000 && int(out.size()) < n; ++tries) {
      const int p = 20000 + int(rng() % 20000);
      if (std::find(out.begin(), out.end(), p) != out.end()) continue;
      if (bindable(p) && bindable(p + 10000)) out.push_back(p);
    }
    return out;
  }

  std::string dir_;
  std::vector<int> ports_;
  std::vector<int> dead_;
  bool ok_ = false;
  std::string why_;
};
