// The Redis (or Valkey) tier of the chunk store: canonicals and patches shared between server
// processes through an existing distributed store. Blobs are the same fingerprinted, checksummed
// entries as on disk. When Redis is unreachable or slow, loads miss and saves are dropped with a
// warning and an error count; the local tiers keep serving. Reconnects after a back-off.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "reuse/disk_tier.h"

struct redisContext;

namespace kamera {

class RedisTier : public StoreTier {
 public:
  struct Options {
    int timeout_ms = 300;  // connect and per-command
    int retry_after_ms = 3000;
  };
  // url: redis://HOST[:PORT][/DB]. Never fails for an unreachable server (it is retried later);
  // fails only for a malformed URL.
  static Result<std::shared_ptr<RedisTier>> open(const std::string& url, const Fingerprint& model,
                                                 const KvLayout& layout, const Options& opts);
  ~RedisTier() override;

  std::string name() const override { return "redis"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  void save_canonical(const CanonicalEntry& e) override;
  void save_patch(const PatchEntry& e) override;
  void erase_canonical(const ChunkId& id) override;
  Stats stats() const override;
  bool connected() const;

 private:
  RedisTier(std::string host, int port, int db, const Fingerprint& fp, KvLayout layout, Options o);
  bool ensure_connected();      // under mu_
  void fail(const char* what);  // under mu_: count, warn once per outage, drop the connection
  bool get(const std::string& key, std::string& out, bool* found);
  bool set(const std::string& key, const std::string& value);
  std::string key_prefix() const;

  std::string host_;
  int port_ = 6379, db_ = 0;
  Fingerprint fp_;
  KvLayout layout_;
  Options opts_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
  bool warned_ = false;
  Stats stats_;
};

}  // namespace kamera
