// The Redis (or Valkey) tier of the chunk store: canonicals and patches shared between server
// processes through an existing distributed store. Blobs are the same fingerprinted entries as
// on disk, with a MAC under the store key (store/entry_codec.h): an entry another client of the
// Redis wrote without the key is discarded and deleted, never served. When Redis is unreachable
// or slow, loads miss and saves are dropped with a warning and an error count; the local tiers
// keep serving. Reconnects after a back-off. A value of the wrong type, or garbage, is a miss
// for that key (and is deleted), not an outage.
//
// A delete is one script, atomic in Redis: it sets the tombstone key t:<chunk>, deletes the
// canonical, every patch of the chunk (their names are kept in the set ps:<chunk>, added to by
// each patch write) and the image embeddings linked to it (il:<chunk>). Writes of a tombstoned
// chunk are dropped by the same script that would write them, and loads of its canonical and
// patches miss while the tombstone lives, on every server sharing the Redis, until an explicit
// upload revives the chunk. A delete that cannot reach Redis reports it (TierErase::Unreachable):
// it tries to reconnect first, whatever the back-off.
//
// Image embeddings (store/store.h ImageEntry) are kept too, under kamera:<model>:i:<image key>,
// sealed and expiring like the chunk entries.
//
// TLS (rediss://): Debian bookworm's hiredis is 0.14, without hiredis_ssl, so the tier runs the
// TLS session itself (store/tls_tunnel.h) and gives hiredis a plain socket into it.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "store/tier_load.h"
#include "store/tls_tunnel.h"

struct redisContext;
struct redisReply;

namespace kamera {

class RedisTier : public StoreTier {
 public:
  struct Options {
    int timeout_ms = 300;  // connect and per-command
    int retry_after_ms = 3000;
    std::string key;  // the store key (required: at least 16 bytes)
    int ttl_s = 0;    // expiry of entries (0: none)
    int tombstone_ttl_s = 7 * 24 * 3600;
    size_t max_entry_bytes = 0;  // a larger value is discarded (0: default_entry_size_limit)
    TlsOptions tls;              // used with rediss:// URLs
  };
  // url: redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB] (AUTH on connect; rediss: TLS). Never fails
  // for an unreachable server (it is retried later); fails for a malformed URL or a missing key.
  static Result<std::shared_ptr<RedisTier>> open(const std::string& url, const Fingerprint& model,
                                                 const KvLayout& layout, const Options& opts);
  ~RedisTier() override;

  std::string name() const override { return "redis"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  void save_canonical(const CanonicalEntry& e) override;
  void save_patch(const PatchEntry& e) override;
  TierErase erase_canonical(const ChunkId& id) override;
  void revive_canonical(const ChunkId& id) override;
  bool tombstoned(const ChunkId& id) override;
  std::shared_ptr<const ImageEntry> load_image(const ChunkId& key) override;
  void save_image(const ImageEntry& e) override;
  void link_image(const ChunkId& chunk, const ChunkId& image) override;
  Stats stats() const override;
  bool connected() const;

 private:
  RedisTier(std::string host, int port, int db, const Fingerprint& fp, KvLayout layout, Options o);
  bool ensure_connected();      // under mu_
  bool connect_tls();           // under mu_: ctx_ over a TLS tunnel
  bool handshake();             // under mu_: AUTH and SELECT
  void fail(const char* what);  // under mu_: count, warn once per outage, drop the connection
  // Runs a command (argv form); null on a transport failure (then the tier is in outage).
  redisReply* command(const char* what, std::initializer_list<std::string_view> args);
  // Under mu_: GET, or (with a tombstone key) a miss while that key exists.
  Fetched get(const std::string& key, const std::string& tombstone);
  // Under mu_: SET unless the tombstone exists; `member` (when not empty) joins the set `index`.
  bool set(const std::string& key, const std::string& value, const std::string& tombstone,
           const std::string& index = {}, const std::string& member = {});
  void drop(const std::string& key);  // under mu_: a bad value goes
  template <class Entry>
  std::shared_ptr<const Entry> load(const std::string& key, const typename Sealed<Entry>::Key& k,
                                    const std::string& tombstone);
  void save(const std::string& key, const std::string& blob, const std::string& tombstone,
            const std::string& index = {}, const std::string& member = {});
  std::string key_prefix() const;
  std::string tombstone_key(const ChunkId& id) const { return key_prefix() + "t:" + id.hex(); }

  std::string host_, user_, password_;
  int port_ = 6379, db_ = 0;
  Fingerprint fp_;
  TierCodec codec_;
  Options opts_;
  mutable std::mutex mu_;
  bool tls_ = false;
  std::unique_ptr<TlsTunnel> tunnel_;  // with tls_, while ctx_ is open
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
  bool warned_ = false;
  Stats stats_;
};

}  // namespace kamera
