// GET /v1/stats: what the server holds and what it has reused, as JSON (the web page's store view
// reads it): the model, the chat template and its roles, the limits a request is checked against,
// the store's tiers, the exact-prefix and segment caches and their one budget, the KV pool, and the
// counters of /metrics that say where prompt tokens came from. Answered on the I/O thread from
// atomics and the store's own locked statistics, like /metrics.
#include "server/segment_counters.h"
#include "server/server_impl.h"
#include "store/store.h"

namespace kamera {

namespace {

json store_json(const ChunkStore& store) {
  const ChunkStore::Stats s = store.stats();
  json tiers = json::array();
  for (const auto& t : store.tiers()) {
    const StoreTier::Stats ts = t->stats();
    tiers.push_back({{"name", t->name()},
                     {"bytes", ts.bytes},
                     {"hits", ts.hits},
                     {"misses", ts.misses},
                     {"errors", ts.errors},
                     {"evictions", ts.evictions},
                     {"discarded", ts.discarded}});
  }
  return {{"memory",
           {{"bytes", s.bytes_held()},
            {"budget_bytes", s.byte_budget},
            {"canonical_entries", s.canonical_entries},
            {"patch_entries", s.patch_entries},
            {"canonical_hits", s.canonical_hits},
            {"canonical_misses", s.canonical_misses},
            {"patch_hits", s.patch_hits},
            {"patch_misses", s.patch_misses},
            {"evictions", s.canonical_evictions + s.patch_evictions},
            {"image_hits", s.image_hits},
            {"image_misses", s.image_misses}}},
          {"tiers", std::move(tiers)},
          {"bytes_saved", s.bytes_saved}};
}

json counters_json(const ServerMetrics& m) {
  json sources = json::object();
  for (auto [k, v] : segment_counters(m)) sources[k] = v->load();
  return {{"segments_served", std::move(sources)},
          {"prompt_tokens", m.prompt_tokens.load()},
          {"reused_tokens", m.tokens_reused.load()},
          {"recomputed_tokens", m.tokens_recomputed.load()},
          {"generated_tokens", m.tokens_generated.load()},
          {"images_encoded", m.images_encoded.load()},
          {"image_embedding_hits", m.image_embedding_hits.load()},
          {"image_chunk_hits", m.image_chunk_hits.load()}};
}

// The prefix entries and segment occurrences under their one budget of pool pages, each page
// counted once (docs/SERVER.md, "Cached KV").
json cached_kv_json(const ServerMetrics& m) {
  const int64_t page_bytes = m.cached_page_bytes.load();
  return {{"budget_pages", m.cached_budget_pages.load()},
          {"budget_bytes", m.cached_budget_pages.load() * page_bytes},
          {"page_bytes", page_bytes},
          {"pages", m.cached_pages.load()},
          {"bytes", m.cached_pages.load() * page_bytes},
          {"prefix_pages", m.cached_prefix_pages.load()},
          {"segment_pages", m.cached_segment_pages.load()},
          {"shared_pages", m.cached_shared_pages.load()},
          {"patch_pages", m.cached_patch_pages.load()},
          {"evictions", m.cached_evictions.load()}};
}

}  // namespace

json Server::Impl::stats_body() const {
  const ServerMetrics& m = metrics;
  json tmpl = {{"kind", "none"}, {"name", nullptr}};
  json roles = {"system", "developer", "user", "assistant", "tool"};
  if (words) {
    tmpl = {{"kind", "word-prompt"}, {"name", "kamera-minivl"}};
    roles = {"system", "user"};  // one question, no turns (docs/SERVER.md)
  } else if (chat_template) {
    tmpl = {{"kind", chat_template->is_builtin() ? "builtin" : "jinja"},
            {"name", chat_template->name()},
            {"tools", tool_format.has_value()}};
  }
  tmpl["roles"] = std::move(roles);
  tmpl["turns"] = !words.has_value();
  const double speed = m.prefill_tokens_per_s.load();
  return {{"model", models_body()["data"][0]},
          {"template", std::move(tmpl)},
          {"limits",
           {{"ctx_len", model.cfg.ctx_len},
            {"max_tokens_default",
             opts.default_max_tokens > 0 ? json(opts.default_max_tokens) : json(nullptr)},
            {"max_active", opts.max_active},
            {"max_queue", opts.max_queue},
            {"max_body_bytes", opts.max_body_bytes},
            {"max_images", media ? json(opts.max_images) : json(0)},
            {"max_image_bytes", opts.max_image_bytes},
            {"max_image_pixels", opts.max_image_pixels},
            {"max_image_rows", opts.max_image_rows},
            {"max_image_rgb_mb", opts.max_image_rgb_mb},
            {"reuse", reuse_policy_name(opts.reuse)},
            {"reuse_budget", opts.reuse_budget},
            {"prefill_slice_tokens", opts.prefill_slice_tokens}}},
          {"store", store_json(ctx->store())},
          {"prefix_cache",
           {{"entries", m.prefix_entries.load()},
            {"tokens", m.prefix_tokens.load()},
            {"budget_tokens", m.prefix_budget.load()},
            {"evictions", m.prefix_evictions.load()}}},
          {"segment_cache",
           {{"occurrences", m.segment_occurrences.load()},
            {"bytes", m.segment_bytes.load()},
            {"budget_bytes", m.segment_budget.load()},
            {"evictions", m.segment_evictions.load()},
            {"compacted", m.segment_compacted.load()}}},
          {"cached_kv", cached_kv_json(m)},
          {"kv_pool",
           {{"pages", m.kv_pages.load()},
            {"pages_used", m.kv_pages_used.load()},
            {"pages_used_max", m.kv_pages_used_max.load()},
            {"page_bytes", m.kv_page_bytes.load()},
            {"bytes", m.kv_bytes.load()},
            {"window_pages", m.kv_window_pages.load()},
            {"window_pages_used", m.kv_window_pages_used.load()},
            {"window_pages_used_max", m.kv_window_pages_used_max.load()}}},
          {"counters", counters_json(m)},
          {"prefill_tokens_per_s", speed > 0 ? json(speed) : json(nullptr)},
          {"queue_depth", scheduler->queued()}};
}

}  // namespace kamera
