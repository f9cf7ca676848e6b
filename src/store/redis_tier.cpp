#include "store/redis_tier.h"

#include <hiredis/hiredis.h>

#include <regex>

#include "core/log.h"

namespace kamera {

namespace {

// SET KEYS[1] = ARGV[1] (expiring after ARGV[2] seconds unless 0), unless the tombstone KEYS[2]
// exists: one round trip, and no write-back can slip between the check and the write. With a
// third key, ARGV[3] joins the set KEYS[3] (the patches of a chunk, for its delete).
const char* kSetUnlessTombstoned =
    "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end "
    "if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) "
    "else redis.call('SET', KEYS[1], ARGV[1]) end "
    "if #KEYS == 3 then "
    "  local t = redis.call('TYPE', KEYS[3]).ok "
    "  if t ~= 'set' and t ~= 'none' then redis.call('DEL', KEYS[3]) end "
    "  redis.call('SADD', KEYS[3], ARGV[3]) "
    "  if ARGV[2] ~= '0' then redis.call('EXPIRE', KEYS[3], ARGV[2]) end "
    "end return 1";

// GET KEYS[1], a miss while the tombstone KEYS[2] exists; a wrong type answers its WRONGTYPE.
const char* kGetUnlessTombstoned =
    "if redis.call('EXISTS', KEYS[2]) == 1 then return false end "
    "return redis.pcall('GET', KEYS[1])";

// A delete: the tombstone KEYS[1] (expiring after ARGV[1] s) first, then the canonical KEYS[2],
// the patches named in the set KEYS[3] and the images named in the set KEYS[4] (keys ARGV[2] ..
// 'p:' .. name, ARGV[2] .. 'i:' .. image), then both sets. Answers whether the canonical was there.
const char* kErase =
    "redis.call('SET', KEYS[1], '1', 'EX', ARGV[1]) "
    "local had = redis.call('DEL', KEYS[2]) "
    "local function members(k) "
    "  if redis.call('TYPE', k).ok == 'set' then return redis.call('SMEMBERS', k) end "
    "  return {} end "
    "for _, p in ipairs(members(KEYS[3])) do redis.call('DEL', ARGV[2] .. 'p:' .. p) end "
    "for _, i in ipairs(members(KEYS[4])) do redis.call('DEL', ARGV[2] .. 'i:' .. i) end "
    "redis.call('DEL', KEYS[3], KEYS[4]) return had";

// The image KEYS[2] made chunk KEYS[1]'s content: its name ARGV[1] joins the set KEYS[3], or, when
// the chunk is tombstoned (KEYS[1]), the image goes. ARGV[2]: expiry as in kSetUnlessTombstoned.
const char* kLinkImage =
    "if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DEL', KEYS[2]) return 0 end "
    "local t = redis.call('TYPE', KEYS[3]).ok "
    "if t ~= 'set' and t ~= 'none' then redis.call('DEL', KEYS[3]) end "
    "redis.call('SADD', KEYS[3], ARGV[1]) "
    "if ARGV[2] ~= '0' then redis.call('EXPIRE', KEYS[3], ARGV[2]) end return 1";

}  // namespace

Result<std::shared_ptr<RedisTier>> RedisTier::open(const std::string& url, const Fingerprint& model,
                                                   const KvLayout& layout, const Options& opts) {
  static const std::regex re(
      R"(^redis(s?)://(?:([^:@/]*):([^@/]*)@)?([A-Za-z0-9.\-_]+)(?::([0-9]{1,5}))?(?:/([0-9]{1,3}))?/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    return make_error(ErrorCode::InvalidArgument,
                      "--redis: expected redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB]");
  const int port = m[5].matched ? std::stoi(m[5].str()) : 6379;
  const int db = m[6].matched ? std::stoi(m[6].str()) : 0;
  if (port <= 0 || port > 65535)
    return make_error(ErrorCode::InvalidArgument, "--redis: bad port {}", port);
  if (opts.key.size() < 16)
    return make_error(ErrorCode::InvalidArgument,
                      "--redis needs a store key of at least 16 bytes (--store-key-file): entries "
                      "shared through Redis are authenticated");
  if (!opts.tls.cert_file.empty() && opts.tls.key_file.empty())
    return make_error(ErrorCode::InvalidArgument, "--redis-cert needs --redis-key");
  if (!m[1].str().empty()) KAMERA_TRY(TlsTunnel::check(opts.tls));
  std::shared_ptr<RedisTier> t(new RedisTier(m[4].str(), port, db, model, layout, opts));
  t->tls_ = !m[1].str().empty();
  t->user_ = m[2].str();
  t->password_ = m[3].str();
  {
    std::lock_guard<std::mutex> lock(t->mu_);
    if (!t->ensure_connected())
      log().warn("redis {}:{}: not reachable now; serving from local tiers, will retry", t->host_,
                 port);
  }
  return t;
}

RedisTier::RedisTier(std::string host, int port, int db, const Fingerprint& fp, KvLayout layout,
                     Options o)
    : host_(std::move(host)),
      port_(port),
      db_(db),
      fp_(fp),
      codec_(fp, std::move(layout), o.key, o.max_entry_bytes),
      opts_(std::move(o)) {}

RedisTier::~RedisTier() {
  if (ctx_) redisFree(ctx_);  // closes hiredis's end of the tunnel first
}

std::string RedisTier::key_prefix() const {
  return fmt::format("kamera:{:016x}{:016x}:", fp_[0], fp_[1]);
}

redisReply* RedisTier::command(const char* what, std::initializer_list<std::string_view> args) {
  if (!ctx_) return nullptr;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r =
      static_cast<redisReply*>(redisCommandArgv(ctx_, int(argv.size()), argv.data(), lens.data()));
  if (!r) fail(what);
  return r;
}

bool RedisTier::handshake() {
  auto ok = [&](const char* what, std::initializer_list<std::string_view> args) {
    redisReply* r = command(what, args);
    if (!r) return false;
    const bool good = r->type != REDIS_REPLY_ERROR;
    if (!good) log().warn("redis {}:{}: {} refused: {}", host_, port_, what, r->str);
    freeReplyObject(r);
    if (!good) fail(what);
    return good;
  };
  if (!password_.empty()) {
    const bool auth =
        user_.empty() ? ok("AUTH", {"AUTH", password_}) : ok("AUTH", {"AUTH", user_, password_});
    if (!auth) return false;
  }
  const std::string db = std::to_string(db_);
  return db_ == 0 || ok("SELECT", {"SELECT", db});
}

bool RedisTier::ensure_connected() {
  if (ctx_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) return false;
  timeval tv{opts_.timeout_ms / 1000, (opts_.timeout_ms % 1000) * 1000};
  if (tls_ && !connect_tls()) return false;
  if (!tls_) ctx_ = redisConnectWithTimeout(host_.c_str(), port_, tv);
  if (!ctx_ || ctx_->err) {
    fail("connect");
    return false;
  }
  redisSetTimeout(ctx_, tv);
  if (!handshake()) return false;
  if (warned_) log().info("redis {}:{}: reconnected", host_, port_);
  warned_ = false;
  return true;
}

bool RedisTier::connect_tls() {
  auto tunnel = TlsTunnel::open(host_, port_, opts_.tls, opts_.timeout_ms);
  if (!tunnel.ok()) {
    if (!warned_) log().warn("redis: {}", tunnel.message());
    fail("TLS connect");
    return false;
  }
  tunnel_ = std::move(*tunnel);
  ctx_ = redisConnectFd(tunnel_->release_plain_fd());
  return true;
}

void RedisTier::fail(const char* what) {
  ++stats_.errors;
  if (!warned_)
    log().warn("redis {}:{}: {} failed ({}); serving from local tiers", host_, port_, what,
               ctx_ && ctx_->errstr[0] ? ctx_->errstr : "unreachable");
  warned_ = true;
  if (ctx_) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  tunnel_.reset();
  next_attempt_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.retry_after_ms);
}

bool RedisTier::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_ != nullptr;
}

void RedisTier::drop(const std::string& key) {
  if (redisReply* r = command("DEL", {"DEL", key})) freeReplyObject(r);
}

// A string is found; nil a miss; a key of another type (WRONGTYPE) is a miss for this key and
// is deleted; anything else is an outage.
Fetched RedisTier::get(const std::string& key, const std::string& tombstone) {
  Fetched f;
  if (!ensure_connected()) return f;
  redisReply* r = tombstone.empty()
                      ? command("GET", {"GET", key})
                      : command("GET", {"EVAL", kGetUnlessTombstoned, "2", key, tombstone});
  if (!r) return f;
  const int type = r->type;
  const bool wrong_type =
      type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).rfind("WRONGTYPE", 0) == 0;
  if (type == REDIS_REPLY_STRING) {
    f.blob.assign(r->str, r->len);
    f.state = Fetched::State::Found;
  }
  freeReplyObject(r);
  if (wrong_type) {
    log().warn("redis: {} holds a value of another type; deleting it", key);
    ++stats_.discarded;
    drop(key);
  } else if (type != REDIS_REPLY_STRING && type != REDIS_REPLY_NIL) {
    fail("GET");
  }
  return f;
}

bool RedisTier::set(const std::string& key, const std::string& value, const std::string& tombstone,
                    const std::string& index, const std::string& member) {
  if (!ensure_connected()) return false;
  const std::string ttl = std::to_string(std::max(0, opts_.ttl_s));
  redisReply* r =
      index.empty()
          ? command("SET", {"EVAL", kSetUnlessTombstoned, "2", key, tombstone, value, ttl})
          : command("SET",
                    {"EVAL", kSetUnlessTombstoned, "3", key, tombstone, index, value, ttl, member});
  if (!r) return false;
  const bool ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  const bool err = r->type == REDIS_REPLY_ERROR;
  freeReplyObject(r);
  if (err) fail("SET");
  return ok;
}

template <class Entry>
std::shared_ptr<const Entry> RedisTier::load(const std::string& key,
                                             const typename Sealed<Entry>::Key& k,
                                             const std::string& tombstone) {
  std::lock_guard<std::mutex> lock(mu_);
  auto got = load_sealed<Entry>(
      codec_, k, "redis", key, [&] { return get(key, tombstone); }, [&] { drop(key); });
  got.count(stats_);
  return got.entry;
}

std::shared_ptr<const CanonicalEntry> RedisTier::load_canonical(const ChunkId& id) {
  return load<CanonicalEntry>(key_prefix() + "c:" + id.hex(), id, tombstone_key(id));
}

std::shared_ptr<const PatchEntry> RedisTier::load_patch(const PatchKey& key) {
  return load<PatchEntry>(key_prefix() + "p:" + patch_key_name(key), key, tombstone_key(key.chunk));
}

std::shared_ptr<const ImageEntry> RedisTier::load_image(const ChunkId& key) {
  return load<ImageEntry>(key_prefix() + "i:" + key.hex(), key, "");
}

void RedisTier::save(const std::string& key, const std::string& blob, const std::string& tombstone,
                     const std::string& index, const std::string& member) {
  std::lock_guard<std::mutex> lock(mu_);
  if (set(key, blob, tombstone, index, member)) {
    ++stats_.writes;
    stats_.bytes += int64_t(blob.size());
  }
}

void RedisTier::save_canonical(const CanonicalEntry& e) {
  save(key_prefix() + "c:" + e.id.hex(), codec_.seal(e), tombstone_key(e.id));
}

void RedisTier::save_patch(const PatchEntry& e) {
  const std::string name = patch_key_name(e.key);
  save(key_prefix() + "p:" + name, codec_.seal(e), tombstone_key(e.key.chunk),
       key_prefix() + "ps:" + e.key.chunk.hex(), name);
}

// Images are deleted with a chunk they are linked to, so their own tombstone key is one no
// delete writes.
void RedisTier::save_image(const ImageEntry& e) {
  save(key_prefix() + "i:" + e.key.hex(), codec_.seal(e), key_prefix() + "ti:" + e.key.hex());
}

void RedisTier::link_image(const ChunkId& chunk, const ChunkId& image) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) return;
  const std::string ttl = std::to_string(std::max(0, opts_.ttl_s));
  redisReply* r = command(
      "EVAL", {"EVAL", kLinkImage, "3", tombstone_key(chunk), key_prefix() + "i:" + image.hex(),
               key_prefix() + "il:" + chunk.hex(), image.hex(), ttl});
  if (!r) return;
  const bool err = r->type == REDIS_REPLY_ERROR;
  freeReplyObject(r);
  if (err) fail("EVAL");
}

TierErase RedisTier::erase_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  next_attempt_ = {};  // a delete tries now, whatever the back-off
  if (!ensure_connected()) return TierErase::Unreachable;
  const std::string ttl = std::to_string(std::max(1, opts_.tombstone_ttl_s));
  redisReply* r = command("EVAL", {"EVAL", kErase, "4", tombstone_key(id),
                                   key_prefix() + "c:" + id.hex(), key_prefix() + "ps:" + id.hex(),
                                   key_prefix() + "il:" + id.hex(), ttl, key_prefix()});
  if (!r) return TierErase::Unreachable;
  const bool ok = r->type == REDIS_REPLY_INTEGER;
  const bool had = ok && r->integer > 0;
  if (!ok) log().warn("redis: the delete of {} failed: {}", id.hex(), r->str ? r->str : "?");
  freeReplyObject(r);
  if (!ok) {
    fail("EVAL");
    return TierErase::Unreachable;
  }
  return had ? TierErase::Erased : TierErase::Absent;
}

void RedisTier::revive_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ensure_connected()) drop(tombstone_key(id));
}

// Asked on memory hits and puts: an outage answers "no" at once, without a reconnect attempt.
bool RedisTier::tombstoned(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_) return false;
  redisReply* r = command("EXISTS", {"EXISTS", tombstone_key(id)});
  if (!r) return false;
  const bool yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  freeReplyObject(r);
  return yes;
}

StoreTier::Stats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
