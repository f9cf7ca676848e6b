#include "server/redis_tier.h"

#include <hiredis/hiredis.h>

#include <regex>

#include "core/log.h"

namespace kamera {

Result<std::shared_ptr<RedisTier>> RedisTier::open(const std::string& url, const Fingerprint& model,
                                                   const KvLayout& layout, const Options& opts) {
  static const std::regex re(
      R"(^redis://([A-Za-z0-9.\-_]+)(?::([0-9]{1,5}))?(?:/([0-9]{1,3}))?/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    return make_error(ErrorCode::InvalidArgument, "--redis '{}': expected redis://HOST[:PORT][/DB]",
                      url);
  const int port = m[2].matched ? std::stoi(m[2].str()) : 6379;
  const int db = m[3].matched ? std::stoi(m[3].str()) : 0;
  if (port <= 0 || port > 65535)
    return make_error(ErrorCode::InvalidArgument, "--redis '{}': bad port", url);
  std::shared_ptr<RedisTier> t(new RedisTier(m[1].str(), port, db, model, layout, opts));
  {
    std::lock_guard<std::mutex> lock(t->mu_);
    if (!t->ensure_connected())
      log().warn("redis {}: not reachable now; serving from local tiers, will retry", url);
  }
  return t;
}

RedisTier::RedisTier(std::string host, int port, int db, const Fingerprint& fp, KvLayout layout,
                     Options o)
    : host_(std::move(host)), port_(port), db_(db), fp_(fp), layout_(std::move(layout)), opts_(o) {}

RedisTier::~RedisTier() {
  if (ctx_) redisFree(ctx_);
}

std::string RedisTier::key_prefix() const {
  return fmt::format("kamera:{:016x}{:016x}:", fp_[0], fp_[1]);
}

bool RedisTier::ensure_connected() {
  if (ctx_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) return false;
  timeval tv{opts_.timeout_ms / 1000, (opts_.timeout_ms % 1000) * 1000};
  ctx_ = redisConnectWithTimeout(host_.c_str(), port_, tv);
  if (!ctx_ || ctx_->err) {
    fail("connect");
    return false;
  }
  redisSetTimeout(ctx_, tv);
  if (db_ != 0) {
    auto* r = static_cast<redisReply*>(redisCommand(ctx_, "SELECT %d", db_));
    const bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (!ok) {
      fail("select");
      return false;
    }
  }
  if (warned_) log().info("redis {}:{}: reconnected", host_, port_);
  warned_ = false;
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
  next_attempt_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.retry_after_ms);
}

bool RedisTier::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_ != nullptr;
}

bool RedisTier::get(const std::string& key, std::string& out, bool* found) {
  *found = false;
  if (!ensure_connected()) return false;
  auto* r = static_cast<redisReply*>(redisCommand(ctx_, "GET %b", key.data(), key.size()));
  if (!r) {
    fail("GET");
    return false;
  }
  bool ok = true;
  if (r->type == REDIS_REPLY_STRING) {
    out.assign(r->str, r->len);
    *found = true;
  } else if (r->type != REDIS_REPLY_NIL) {
    ok = false;
  }
  freeReplyObject(r);
  if (!ok) fail("GET");
  return ok;
}

bool RedisTier::set(const std::string& key, const std::string& value) {
  if (!ensure_connected()) return false;
  auto* r = static_cast<redisReply*>(
      redisCommand(ctx_, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
  const bool ok = r && r->type != REDIS_REPLY_ERROR;
  if (r) freeReplyObject(r);
  if (!ok) fail("SET");
  return ok;
}

std::shared_ptr<const CanonicalEntry> RedisTier::load_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string blob;
  bool found = false;
  get(key_prefix() + "c:" + id.hex(), blob, &found);
  if (!found) {
    ++stats_.misses;
    return nullptr;
  }
  auto e = decode_canonical(blob, fp_, layout_, id);
  if (!e.ok()) {
    log().warn("redis: discarding canonical {}: {}", id.hex(), e.message());
    ++stats_.discarded;
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  return *e;
}

std::shared_ptr<const PatchEntry> RedisTier::load_patch(const PatchKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string blob;
  bool found = false;
  get(key_prefix() + "p:" + patch_key_name(key), blob, &found);
  if (!found) {
    ++stats_.misses;
    return nullptr;
  }
  auto e = decode_patch(blob, fp_, layout_, key);
  if (!e.ok()) {
    log().warn("redis: discarding patch: {}", e.message());
    ++stats_.discarded;
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  return *e;
}

void RedisTier::save_canonical(const CanonicalEntry& e) {
  const std::string blob = serialize_canonical(e, fp_);
  std::lock_guard<std::mutex> lock(mu_);
  if (set(key_prefix() + "c:" + e.id.hex(), blob)) {
    ++stats_.writes;
    stats_.bytes += int64_t(blob.size());
  }
}

void RedisTier::save_patch(const PatchEntry& e) {
  const std::string blob = serialize_patch(e, fp_);
  std::lock_guard<std::mutex> lock(mu_);
  if (set(key_prefix() + "p:" + patch_key_name(e.key), blob)) {
    ++stats_.writes;
    stats_.bytes += int64_t(blob.size());
  }
}

void RedisTier::erase_canonical(const ChunkId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ensure_connected()) return;
  const std::string key = key_prefix() + "c:" + id.hex();
  auto* r = static_cast<redisReply*>(redisCommand(ctx_, "DEL %b", key.data(), key.size()));
  if (!r) {
    fail("DEL");
    return;
  }
  freeReplyObject(r);
}

StoreTier::Stats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kamera
