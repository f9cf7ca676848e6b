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
//
// Redis Cluster: the same URL names one node or several (HOST:PORT,HOST:PORT,...); a cluster is
// recognised when the first node that answers serves CLUSTER SLOTS (store/redis_link.h follows
// its slot map and redirects). Every key of a chunk carries the chunk's id as its hash tag
// (kamera:<model>:c:{<id>}, t:{<id>}, ps:{<id>}, p:{<id>}<patch>, il:{<id>}), so the scripts above
// run on one node; an image's keys are tagged with the image's key (i:{<key>}), so a delete drops
// the chunk's keys atomically and then the images linked to it, one by one (a delete that cannot
// reach an image's node is reported Unreachable, as an outage). With wait_replicas, a write counts
// (stats().writes, save_*_acked) only once that many replicas hold it (WAIT), so a master killed
// after the answer loses nothing the tier reported written.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <string>

#include "store/redis_link.h"
#include "store/tier_load.h"

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
    bool read_replicas = false;  // cluster: loads may read a replica (stale by the lag)
    int wait_replicas = 0;       // a write is acknowledged once this many replicas have it
    int wait_ms = 100;           // ... within this long (at most half of timeout_ms)
  };
  // url: redis[s]://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB] (AUTH on connect to
  // every node; rediss: TLS; several nodes: seeds of a cluster, tried in order). Never fails
  // for an unreachable server (it is retried later); fails for a malformed URL or a missing key.
  static Result<std::shared_ptr<RedisTier>> open(const std::string& url, const Fingerprint& model,
                                                 const KvLayout& layout, const Options& opts);
  ~RedisTier() override;

  std::string name() const override { return "redis"; }
  std::shared_ptr<const CanonicalEntry> load_canonical(const ChunkId& id) override;
  std::shared_ptr<const PatchEntry> load_patch(const PatchKey& key) override;
  bool save_canonical(const CanonicalEntry& e) override;
  void save_patch(const PatchEntry& e) override;
  TierErase erase_canonical(const ChunkId& id) override;
  void revive_canonical(const ChunkId& id) override;
  bool tombstoned(const ChunkId& id) override;
  std::shared_ptr<const ImageEntry> load_image(const ChunkId& key) override;
  void save_image(const ImageEntry& e) override;
  void link_image(const ChunkId& chunk, const ChunkId& image) override;
  BatchLoaded load_batch(const Batch& want) override;
  std::vector<Contexts> load_contexts(std::span<const ChunkId> chunks) override;
  Stats stats() const override;
  bool connected() const;
  bool cluster() const;
  // The writes of save_canonical / save_patch, answering whether the entry was acknowledged (stored
  // and, with wait_replicas, replicated).
  bool save_canonical_acked(const CanonicalEntry& e);
  bool save_patch_acked(const PatchEntry& e);
  // Fetch timings of this tier's load_batch round trips (zero until measured).
  FetchCost fetch_cost() const override;
  bool remote() const override { return true; }
  int64_t redirects() const;
  int64_t read_bytes() const;  // bytes of the entries its loads found
  // Keys of this model's entries: a canonical, a tombstone (for tests and tools).
  std::string canonical_key(const ChunkId& id) const { return key_prefix() + "c:" + tag(id); }
  std::string tombstone_key(const ChunkId& id) const { return key_prefix() + "t:" + tag(id); }
  std::string patch_key(const PatchKey& k) const { return key_prefix() + "p:" + patch_member(k); }
  std::string image_key(const ChunkId& k) const { return key_prefix() + "i:" + tag(k); }
  // The hash of a chunk's patches' contexts (patch name -> the antecedents' hex ids).
  std::string contexts_key(const ChunkId& id) const { return key_prefix() + "pc:" + tag(id); }

 private:
  RedisTier(const Fingerprint& fp, KvLayout layout, Options o);
  // A hash tag: every key of one chunk on one cluster node. Appended piecewise (GCC 12 warns,
  // falsely, on "{" + std::string&&).
  static std::string tag(const ChunkId& id) {
    std::string t(1, '{');
    t += id.hex();
    t += '}';
    return t;
  }
  // Runs a command routed by `key`; null on a transport failure (counted).
  RedisReply command(const std::string& key, std::vector<std::string> args, bool read = false);
  // Under mu_: GET, or (with a tombstone key) a miss while that key exists.
  Fetched get(const std::string& key, const std::string& tombstone);
  RedisLink::Command get_command(const std::string& key, const std::string& tombstone) const;
  Fetched fetched(const std::string& key, RedisReply r);  // under mu_: a GET's reply read
  // Where a write is also recorded: `member` joins the set `index` (when not empty), and the hash
  // `contexts` maps it to `context` (when not empty).
  struct Indexed {
    std::string index, member, contexts, context;
  };
  // Under mu_: SET unless the tombstone exists, recorded as `in` says.
  bool set(const std::string& key, const std::string& value, const std::string& tombstone,
           const Indexed& in = {});
  void drop(const std::string& key);  // under mu_: a bad value goes
  template <class Entry>
  std::shared_ptr<const Entry> open_fetched(const std::string& key,
                                            const typename Sealed<Entry>::Key& k, Fetched f);
  bool save(const std::string& key, const std::string& blob, const std::string& tombstone,
            const Indexed& in = {});
  std::string key_prefix() const;
  static std::string patch_member(const PatchKey& k) { return tag(k.chunk) + patch_key_name(k); }

  Fingerprint fp_;
  TierCodec codec_;
  Options opts_;
  mutable std::mutex mu_;
  std::unique_ptr<RedisLink> link_;
  Stats stats_;
  FetchCost cost_;
  std::deque<double> rtt_samples_, kib_samples_;  // the last batches' (fetch_cost's medians)
  int64_t read_bytes_ = 0;
};

}  // namespace kamera
