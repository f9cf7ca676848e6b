// Contexts, the chunk store and its tiers, pool statistics (include/kamera.h).
#include <cstring>

#include "api/handles.h"
#include "store/disk_tier.h"

using namespace kamera;
using namespace kamera::api;

namespace {

Result<std::shared_ptr<StoreTier>> open_disk_tier(const Model& m, const char* dir) {
  if (!*dir) return make_error(ErrorCode::InvalidArgument, "the disk tier directory is empty");
  auto t = DiskTier::open(dir, m.fingerprint, m.kv_layout());
  if (!t.ok()) return t.error();
  return std::shared_ptr<StoreTier>(std::move(t.value()));
}

Result<ContextOptions> context_options(const Model& m, const kamera_context_params& p) {
  if (p.n_anchor < 0 || (p.n_anchor > 0 && !p.anchor))
    return make_error(ErrorCode::InvalidArgument, "anchor: {} ids at a null pointer", p.n_anchor);
  if (p.page_tokens < 1 || p.kv_tokens < 0)
    return make_error(ErrorCode::InvalidArgument, "page_tokens {} must be >= 1, kv_tokens {} >= 0",
                      p.page_tokens, p.kv_tokens);
  ContextOptions o;
  o.n_threads = p.n_threads;
  o.kv_tokens = p.kv_tokens;
  o.page_tokens = p.page_tokens;
  o.store_bytes = size_t(p.store_bytes);
  if (p.kv_type != KAMERA_DTYPE_F32 && p.kv_type != KAMERA_DTYPE_F16 &&
      p.kv_type != KAMERA_DTYPE_BF16)
    return make_error(ErrorCode::InvalidArgument, "kv_type {} is not f32 (0), bf16 (1) or f16 (2)",
                      p.kv_type);
  o.kv_type = p.kv_type == KAMERA_DTYPE_F16    ? DType::F16
              : p.kv_type == KAMERA_DTYPE_BF16 ? DType::BF16
                                               : DType::F32;
  if (p.swa_full != 0 && p.swa_full != 1)
    return make_error(ErrorCode::InvalidArgument, "swa_full {} is not 0 or 1", p.swa_full);
  o.swa_full = p.swa_full == 1;
  for (int32_t i = 0; i < p.n_anchor; ++i) {
    if (p.anchor[i] < 0 || p.anchor[i] >= m.cfg.n_vocab)
      return make_error(ErrorCode::InvalidArgument,
                        "anchor token {} is outside the vocabulary [0, {})", p.anchor[i],
                        m.cfg.n_vocab);
    o.anchor.push_back(p.anchor[i]);
  }
  if (p.disk_dir) {
    KAMERA_ASSIGN_OR_RETURN(auto tier, open_disk_tier(m, p.disk_dir));
    o.tiers.push_back(std::move(tier));
  }
  return o;
}

}  // namespace

extern "C" {

kamera_context_params kamera_context_default_params(void) {
  kamera_context_params p{};
  p.n_threads = 2;
  p.kv_tokens = 0;
  p.page_tokens = 16;
  p.store_bytes = uint64_t(1) << 30;
  return p;
}

kamera_status kamera_context_new(kamera_model* model, const kamera_context_params* params,
                                 kamera_context** out) {
  clear_out(out);
  return guarded("kamera_context_new", [&] {
    KAMERA_API_REQUIRE("kamera_context_new", model);
    KAMERA_API_REQUIRE("kamera_context_new", out);
    const kamera_context_params p = params ? *params : kamera_context_default_params();
    auto opts = context_options(*model->model, p);
    if (!opts.ok()) return set_error(with_context(opts.error(), "kamera_context_new"));
    auto ctx = Context::create(model->model, *opts);
    if (!ctx.ok()) return set_error(ctx.error());
    auto h = std::make_unique<kamera_context>();
    h->box = std::make_shared<ContextBox>();
    h->box->ctx = std::move(ctx.value());
    *out = h.release();
    return KAMERA_OK;
  });
}

void kamera_context_free(kamera_context* ctx) {
  delete ctx;
}

kamera_status kamera_store_get_stats(kamera_context* ctx, kamera_store_stats* out) {
  return guarded("kamera_store_get_stats", [&] {
    KAMERA_API_REQUIRE("kamera_store_get_stats", ctx);
    KAMERA_API_REQUIRE("kamera_store_get_stats", out);
    ChunkStore& store = ctx->box->ctx->store();
    const ChunkStore::Stats s = store.stats();
    *out = kamera_store_stats{};
    out->canonical_hits = s.canonical_hits;
    out->canonical_misses = s.canonical_misses;
    out->patch_hits = s.patch_hits;
    out->patch_misses = s.patch_misses;
    out->tier_canonical_hits = s.tier_canonical_hits;
    out->tier_patch_hits = s.tier_patch_hits;
    out->canonical_evictions = s.canonical_evictions;
    out->patch_evictions = s.patch_evictions;
    out->canonical_entries = s.canonical_entries;
    out->patch_entries = s.patch_entries;
    out->canonical_bytes = s.canonical_bytes;
    out->patch_bytes = s.patch_bytes;
    out->byte_budget = s.byte_budget;
    out->patch_byte_budget = s.patch_byte_budget;
    out->bytes_saved = s.bytes_saved;
    out->n_tiers = int32_t(store.tiers().size());
    return KAMERA_OK;
  });
}

kamera_status kamera_store_get_tier_stats(kamera_context* ctx, int32_t index,
                                          kamera_tier_stats* out) {
  return guarded("kamera_store_get_tier_stats", [&] {
    KAMERA_API_REQUIRE("kamera_store_get_tier_stats", ctx);
    KAMERA_API_REQUIRE("kamera_store_get_tier_stats", out);
    const auto& tiers = ctx->box->ctx->store().tiers();
    if (index < 0 || index >= int32_t(tiers.size()))
      return fail(KAMERA_ERR_NOT_FOUND,
                  "kamera_store_get_tier_stats: no tier {} (the store has {})", index,
                  tiers.size());
    const StoreTier& t = *tiers[size_t(index)];
    const StoreTier::Stats s = t.stats();
    *out = kamera_tier_stats{};
    std::strncpy(out->name, t.name().c_str(), sizeof(out->name) - 1);
    out->hits = s.hits;
    out->misses = s.misses;
    out->writes = s.writes;
    out->errors = s.errors;
    out->discarded = s.discarded;
    out->bytes = s.bytes;
    return KAMERA_OK;
  });
}

kamera_status kamera_store_set_budget(kamera_context* ctx, uint64_t bytes) {
  return guarded("kamera_store_set_budget", [&] {
    KAMERA_API_REQUIRE("kamera_store_set_budget", ctx);
    ctx->box->ctx->store().set_budget(size_t(bytes));
    return KAMERA_OK;
  });
}

kamera_status kamera_store_set_patch_budget(kamera_context* ctx, uint64_t bytes) {
  return guarded("kamera_store_set_patch_budget", [&] {
    KAMERA_API_REQUIRE("kamera_store_set_patch_budget", ctx);
    ctx->box->ctx->store().set_patch_budget(size_t(bytes));
    return KAMERA_OK;
  });
}

kamera_status kamera_store_add_disk_tier(kamera_context* ctx, const char* dir) {
  return guarded("kamera_store_add_disk_tier", [&] {
    KAMERA_API_REQUIRE("kamera_store_add_disk_tier", ctx);
    KAMERA_API_REQUIRE("kamera_store_add_disk_tier", dir);
    Context& c = *ctx->box->ctx;
    auto tier = open_disk_tier(c.model(), dir);
    if (!tier.ok()) return set_error(with_context(tier.error(), "kamera_store_add_disk_tier"));
    c.store().add_tier(std::move(tier.value()));
    return KAMERA_OK;
  });
}

kamera_status kamera_store_clear(kamera_context* ctx) {
  return guarded("kamera_store_clear", [&] {
    KAMERA_API_REQUIRE("kamera_store_clear", ctx);
    ctx->box->ctx->clear_store();
    return KAMERA_OK;
  });
}

kamera_status kamera_context_pool_stats(kamera_context* ctx, kamera_pool_stats* out) {
  return guarded("kamera_context_pool_stats", [&] {
    KAMERA_API_REQUIRE("kamera_context_pool_stats", ctx);
    KAMERA_API_REQUIRE("kamera_context_pool_stats", out);
    const KvPool::Stats s = ctx->box->ctx->pool().stats();
    *out = kamera_pool_stats{s.pages_total, s.pages_used, s.sequences, s.tokens, s.cow_copies};
    return KAMERA_OK;
  });
}

}  // extern "C"
