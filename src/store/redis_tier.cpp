#include "store/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "core/log.h"

namespace kamera {

namespace {

// SET KEYS[1] = ARGV[1] (expiring after ARGV[2] seconds unless 0), unless the tombstone KEYS[2]
// exists: one round trip, and no write-back can slip between the check and the write. With a
// third key, ARGV[3] joins the set KEYS[3] (the patches of a chunk, for its delete); with a
// fourth, the hash KEYS[4] maps ARGV[3] to ARGV[4] (the context a patch was measured in).
const char* kSetUnlessTombstoned =
    "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end "
    "if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) "
    "else redis.call('SET', KEYS[1], ARGV[1]) end "
    "local function keep(k, kind, add) "
    "  local t = redis.call('TYPE', k).ok "
    "  if t ~= kind and t ~= 'none' then redis.call('DEL', k) end "
    "  add() "
    "  if ARGV[2] ~= '0' then redis.call('EXPIRE', k, ARGV[2]) end end "
    "if #KEYS >= 3 then keep(KEYS[3], 'set', function() redis.call('SADD', KEYS[3], ARGV[3]) end) "
    "end "
    "if #KEYS == 4 then "
    "  keep(KEYS[4], 'hash', function() redis.call('HSET', KEYS[4], ARGV[3], ARGV[4]) end) "
    "end return 1";

// GET KEYS[1], a miss while the tombstone KEYS[2] exists; a wrong type answers its WRONGTYPE.
const char* kGetUnlessTombstoned =
    "if redis.call('EXISTS', KEYS[2]) == 1 then return false end "
    "return redis.pcall('GET', KEYS[1])";

// A delete: the tombstone KEYS[1] (expiring after ARGV[1] s) first, then the canonical KEYS[2],
// the patches named in the set KEYS[3] (keys ARGV[2] .. 'p:' .. name, tagged as the chunk: on this
// node), then the set of images KEYS[4], whose names it answers after whether the canonical was
// there ({had, image, ...}): images live on their own nodes, and the caller deletes them. KEYS[5],
// the hash of the patches' contexts, goes too.
const char* kErase =
    "redis.call('SET', KEYS[1], '1', 'EX', ARGV[1]) "
    "local out = {redis.call('DEL', KEYS[2])} "
    "local function members(k) "
    "  if redis.call('TYPE', k).ok == 'set' then return redis.call('SMEMBERS', k) end "
    "  return {} end "
    "for _, p in ipairs(members(KEYS[3])) do redis.call('DEL', ARGV[2] .. 'p:' .. p) end "
    "for _, i in ipairs(members(KEYS[4])) do table.insert(out, i) end "
    "redis.call('DEL', KEYS[3], KEYS[4], KEYS[5]) return out";

// The image named ARGV[1] made chunk KEYS[1]'s content: it joins the set KEYS[2] (answer 1), or,
// when the chunk is tombstoned (KEYS[1]), the answer is 0 and the caller deletes the image.
// ARGV[2]: expiry as in kSetUnlessTombstoned.
const char* kLinkImage =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
    "local t = redis.call('TYPE', KEYS[2]).ok "
    "if t ~= 'set' and t ~= 'none' then redis.call('DEL', KEYS[2]) end "
    "redis.call('SADD', KEYS[2], ARGV[1]) "
    "if ARGV[2] ~= '0' then redis.call('EXPIRE', KEYS[2], ARGV[2]) end return 1";

bool is_error(const RedisReply& r) {
  return r && r->type == REDIS_REPLY_ERROR;
}

}  // namespace

Result<std::shared_ptr<RedisTier>> RedisTier::open(const std::string& url, const Fingerprint& model,
                                                   const KvLayout& layout, const Options& opts) {
  RedisLink::Options lo;
  KAMERA_ASSIGN_OR_RETURN(std::vector<RedisLink::Endpoint> seeds, RedisLink::parse_url(url, lo));
  if (opts.key.size() < 16)
    return make_error(ErrorCode::InvalidArgument,
                      "--redis needs a store key of at least 16 bytes (--store-key-file): entries "
                      "shared through Redis are authenticated");
  if (!opts.tls.cert_file.empty() && opts.tls.key_file.empty())
    return make_error(ErrorCode::InvalidArgument, "--redis-cert needs --redis-key");
  if (opts.wait_replicas < 0 || opts.wait_ms < 0)
    return make_error(ErrorCode::InvalidArgument, "--redis-wait-replicas: not negative");
  if (lo.tls) KAMERA_TRY(TlsTunnel::check(opts.tls));
  lo.tls_opts = opts.tls;
  lo.timeout_ms = opts.timeout_ms;
  lo.retry_after_ms = opts.retry_after_ms;
  lo.read_replicas = opts.read_replicas;
  std::shared_ptr<RedisTier> t(new RedisTier(model, layout, opts));
  t->link_ = std::make_unique<RedisLink>(std::move(seeds), lo);
  {
    std::lock_guard<std::mutex> lock(t->mu_);
    if (!t->link_->refresh(true)) {
      ++t->stats_.errors;
      log().warn("redis {}: not reachable now; serving from local tiers, will retry",
                 t->link_->describe());
    } else if (t->link_->cluster())
      log().info("redis: a cluster of {} masters", t->link_->masters().size());
  }
  if (lo.db != 0 && t->link_->cluster())
    return make_error(ErrorCode::InvalidArgument, "--redis: a cluster has database 0 only");
  return t;
}

RedisTier::RedisTier(const Fingerprint& fp, KvLayout layout, Options o)
    : fp_(fp), codec_(fp, std::move(layout), o.key, o.max_entry_bytes), opts_(std::move(o)) {}

RedisTier::~RedisTier() = default;

std::string RedisTier::key_prefix() const {
  return fmt::format("kamera:{:016x}{:016x}:", fp_[0], fp_[1]);
}

RedisReply RedisTier::command(const std::string& key, std::vector<std::string> args, bool read) {
  RedisReply r = link_->run({key, std::move(args), read});
  if (!r) ++stats_.errors;
  return r;
}

bool RedisTier::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_->any_connected();
}

bool RedisTier::cluster() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_->cluster();
}

void RedisTier::drop(const std::string& key) {
  command(key, {"DEL", key});
}

RedisLink::Command RedisTier::get_command(const std::string& key,
                                          const std::string& tombstone) const {
  if (tombstone.empty()) return {key, {"GET", key}, true};
  // EVAL_RO (Redis 7) runs on a replica; EVAL on every version.
  return {key,
          {opts_.read_replicas ? "EVAL_RO" : "EVAL", kGetUnlessTombstoned, "2", key, tombstone},
          true};
}

// A string is found; nil a miss; a key of another type (WRONGTYPE) is a miss for this key and
// is deleted; anything else is an outage.
Fetched RedisTier::fetched(const std::string& key, RedisReply r) {
  Fetched f;
  if (!r) return f;
  const int type = r->type;
  const bool wrong_type =
      type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).rfind("WRONGTYPE", 0) == 0;
  if (type == REDIS_REPLY_STRING) {
    read_bytes_ += int64_t(r->len);
    f.blob.assign(r->str, r->len);
    f.state = Fetched::State::Found;
  }
  if (wrong_type) {
    log().warn("redis: {} holds a value of another type; deleting it", key);
    ++stats_.discarded;
    drop(key);
  } else if (type != REDIS_REPLY_STRING && type != REDIS_REPLY_NIL) {
    log().warn("redis: GET {}: {}", key, type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    ++stats_.errors;
  }
  return f;
}

Fetched RedisTier::get(const std::string& key, const std::string& tombstone) {
  RedisLink::Command c = get_command(key, tombstone);
  RedisReply r = link_->run(c);
  if (!r) ++stats_.errors;
  return fetched(key, std::move(r));
}

bool RedisTier::set(const std::string& key, const std::string& value, const std::string& tombstone,
                    const Indexed& in) {
  const std::string ttl = std::to_string(std::max(0, opts_.ttl_s));
  std::vector<std::string> eval{"EVAL", kSetUnlessTombstoned, "2", key, tombstone, value, ttl};
  if (!in.index.empty()) {
    const bool context = !in.contexts.empty();
    eval = {"EVAL", kSetUnlessTombstoned, context ? "4" : "3", key, tombstone, in.index};
    if (context) eval.push_back(in.contexts);
    for (const std::string& a : {value, ttl, in.member}) eval.push_back(a);
    if (context) eval.push_back(in.context);
  }
  std::vector<RedisLink::Command> cmds;
  cmds.push_back({key, std::move(eval)});
  // WAIT on the same connection, right behind the write (one round trip: a pipeline)
  if (opts_.wait_replicas > 0)
    cmds.push_back({key,  // within half the command timeout: a slow WAIT is not an outage
                    {"WAIT", std::to_string(opts_.wait_replicas),
                     std::to_string(std::max(1, std::min(opts_.wait_ms, opts_.timeout_ms / 2)))}});
  std::vector<RedisReply> r = link_->run_many(cmds);
  if (!r[0]) ++stats_.errors;
  if (is_error(r[0])) {
    log().warn("redis: SET {}: {}", key, r[0]->str);
    ++stats_.errors;
  }
  const bool stored = r[0] && r[0]->type == REDIS_REPLY_INTEGER && r[0]->integer == 1;
  if (!stored || opts_.wait_replicas == 0) return stored;
  return r[1] && r[1]->type == REDIS_REPLY_INTEGER && r[1]->integer >= opts_.wait_replicas;
}

template <class Entry>
std::shared_ptr<const Entry> RedisTier::open_fetched(const std::string& key,
                                                     const typename Sealed<Entry>::Key& k,
                                                     Fetched f) {
  auto got = load_sealed<Entry>(
      codec_, k, "redis", key, [&] { return std::move(f); }, [&] { drop(key); });
  got.count(stats_);
  return got.entry;
}

std::shared_ptr<const CanonicalEntry> RedisTier::load_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = canonical_key(id);
  return open_fetched<CanonicalEntry>(key, id, get(key, tombstone_key(id)));
}

std::shared_ptr<const PatchEntry> RedisTier::load_patch(const PatchKey& k) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = patch_key(k);
  return open_fetched<PatchEntry>(key, k, get(key, tombstone_key(k.chunk)));
}

std::shared_ptr<const ImageEntry> RedisTier::load_image(const ChunkId& k) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = image_key(k);
  return open_fetched<ImageEntry>(key, k, get(key, ""));
}

// Every GET of the batch sent at once (pipelined per node), then each reply opened as a load.
StoreTier::BatchLoaded RedisTier::load_batch(const Batch& want) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RedisLink::Command> cmds;
  std::vector<std::string> keys;
  for (const ChunkId& id : want.canonicals) {
    keys.push_back(canonical_key(id));
    cmds.push_back(get_command(keys.back(), tombstone_key(id)));
  }
  for (const PatchKey& k : want.patches) {
    keys.push_back(patch_key(k));
    cmds.push_back(get_command(keys.back(), tombstone_key(k.chunk)));
  }
  BatchLoaded out;
  if (cmds.empty()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RedisReply> r = link_->run_many(cmds);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  size_t bytes = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (!r[i]) ++stats_.errors;
    if (r[i] && r[i]->type == REDIS_REPLY_STRING) bytes += r[i]->len;
  }
  // The cost model's two numbers, the medians of the last batches (round trip: the batches that
  // fetched nothing; per KiB: what the others took beyond it). A median, because a batch that had
  // to connect to a node first takes many times longer.
  auto median = [](std::deque<double>& d, double x) {
    d.push_back(x);
    if (d.size() > 15) d.pop_front();
    std::vector<double> v(d.begin(), d.end());
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  ++cost_.samples;
  if (bytes == 0) cost_.rtt_us = median(rtt_samples_, us);
  if (bytes > 0)
    cost_.us_per_kib =
        median(kib_samples_, std::max(0.0, us - cost_.rtt_us) / (double(bytes) / 1024));
  const size_t nc = want.canonicals.size();
  for (size_t i = 0; i < nc; ++i)
    out.canonicals.push_back(open_fetched<CanonicalEntry>(keys[i], want.canonicals[i],
                                                          fetched(keys[i], std::move(r[i]))));
  for (size_t i = 0; i < want.patches.size(); ++i)
    out.patches.push_back(open_fetched<PatchEntry>(keys[nc + i], want.patches[i],
                                                   fetched(keys[nc + i], std::move(r[nc + i]))));
  return out;
}

StoreTier::FetchCost RedisTier::fetch_cost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cost_;
}

int64_t RedisTier::read_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return read_bytes_;
}

int64_t RedisTier::redirects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_->redirects();
}

bool RedisTier::save(const std::string& key, const std::string& blob, const std::string& tombstone,
                     const Indexed& in) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!set(key, blob, tombstone, in)) return false;
  ++stats_.writes;
  stats_.bytes += int64_t(blob.size());
  return true;
}

bool RedisTier::save_canonical_acked(const CanonicalEntry& e) {
  return save(canonical_key(e.id), codec_.seal(e), tombstone_key(e.id));
}

bool RedisTier::save_patch_acked(const PatchEntry& e) {
  Indexed in{key_prefix() + "ps:" + tag(e.key.chunk), patch_member(e.key), {}, {}};
  if (!e.antecedents.empty()) {  // the context, as the antecedents' hex ids one after the other
    in.contexts = contexts_key(e.key.chunk);
    for (const ChunkId& a : e.antecedents) in.context += a.hex();
  }
  return save(patch_key(e.key), codec_.seal(e), tombstone_key(e.key.chunk), in);
}

// One HVALS per chunk, pipelined (replicas allowed): each value a context's ids; a malformed one
// is skipped. A tombstoned chunk's hash went with its delete.
std::vector<StoreTier::Contexts> RedisTier::load_contexts(std::span<const ChunkId> chunks) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Contexts> out(chunks.size());
  std::vector<RedisLink::Command> cmds;
  for (const ChunkId& id : chunks)
    cmds.push_back({contexts_key(id), {"HVALS", contexts_key(id)}, true});
  if (cmds.empty()) return out;
  std::vector<RedisReply> r = link_->run_many(cmds);
  for (size_t i = 0; i < r.size(); ++i) {
    if (!r[i]) ++stats_.errors;
    if (!r[i] || r[i]->type != REDIS_REPLY_ARRAY) continue;
    for (size_t k = 0; k < r[i]->elements; ++k) {
      const redisReply* v = r[i]->element[k];
      if (v->type != REDIS_REPLY_STRING || v->len % 32 != 0) continue;
      std::vector<ChunkId> ids;
      for (size_t at = 0; at < v->len; at += 32)
        if (auto id = ChunkId::from_hex(std::string_view(v->str + at, 32))) ids.push_back(*id);
      if (ids.size() * 32 == v->len) out[i].push_back(std::move(ids));
    }
  }
  return out;
}

bool RedisTier::save_canonical(const CanonicalEntry& e) {
  return save_canonical_acked(e);
}

void RedisTier::save_patch(const PatchEntry& e) {
  save_patch_acked(e);
}

// Images are deleted with a chunk they are linked to, so their own tombstone key is one no
// delete writes.
void RedisTier::save_image(const ImageEntry& e) {
  save(image_key(e.key), codec_.seal(e), key_prefix() + "ti:" + tag(e.key));
}

void RedisTier::link_image(const ChunkId& chunk, const ChunkId& image) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string ttl = std::to_string(std::max(0, opts_.ttl_s));
  const std::string set = key_prefix() + "il:" + tag(chunk);
  RedisReply r =
      command(set, {"EVAL", kLinkImage, "2", tombstone_key(chunk), set, image.hex(), ttl});
  if (is_error(r)) {
    log().warn("redis: linking image {}: {}", image.hex(), r->str);
    ++stats_.errors;
  }
  if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 0) drop(image_key(image));
}

TierErase RedisTier::erase_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string ttl = std::to_string(std::max(1, opts_.tombstone_ttl_s));
  // a delete tries now, whatever the back-off
  RedisReply r = link_->run(
      {tombstone_key(id),
       {"EVAL", kErase, "5", tombstone_key(id), canonical_key(id), key_prefix() + "ps:" + tag(id),
        key_prefix() + "il:" + tag(id), contexts_key(id), ttl, key_prefix()}},
      true, true);
  if (!r) {
    ++stats_.errors;
    return TierErase::Unreachable;
  }
  const bool ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                  r->element[0]->type == REDIS_REPLY_INTEGER;
  if (!ok) {
    log().warn("redis: the delete of {} failed: {}", id.hex(), r->str ? r->str : "?");
    ++stats_.errors;
    return TierErase::Unreachable;
  }
  const bool had = r->element[0]->integer > 0;
  for (size_t i = 1; i < r->elements; ++i) {
    const std::string key =
        key_prefix() + "i:{" + std::string(r->element[i]->str, r->element[i]->len) + "}";
    RedisReply d = link_->run({key, {"DEL", key}}, true, true);
    if (!d || is_error(d)) {
      ++stats_.errors;
      return TierErase::Unreachable;  // the chunk is gone; an image of it is not yet
    }
  }
  return had ? TierErase::Erased : TierErase::Absent;
}

void RedisTier::revive_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  drop(tombstone_key(id));
}

// Asked on memory hits and puts: an outage answers "no" at once, without a reconnect attempt.
bool RedisTier::tombstoned(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = tombstone_key(id);
  RedisReply r = link_->run({key, {"EXISTS", key}}, false);  // the master: the freshest answer
  return r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

StoreTier::Stats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
