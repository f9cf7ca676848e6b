#include "server/prometheus.h"

#include <fmt/format.h>

#include <tuple>

#include "server/segment_counters.h"
#include "store/redis_tier.h"
#include "store/store.h"

namespace kamera {

namespace {

void counter(std::string& out, const std::string& name, const std::string& help, double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
}

void gauge(std::string& out, const std::string& name, const std::string& help, double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
}

void render_requests(std::string& out, const ServerMetrics& m) {
  out += "# HELP kamera_requests_total HTTP requests by endpoint\n";
  out += "# TYPE kamera_requests_total counter\n";
  for (auto [k, v] : {std::pair{"completions", &m.requests_completions},
                      {"chat", &m.requests_chat},
                      {"responses", &m.requests_responses},
                      {"messages", &m.requests_messages},
                      {"chunks", &m.requests_chunks},
                      {"windows", &m.requests_windows},
                      {"embeddings", &m.requests_embeddings}})
    out += fmt::format("kamera_requests_total{{endpoint=\"{}\"}} {}\n", k, v->load());
  counter(out, "kamera_responses_4xx_total", "client errors answered", double(m.responses_4xx));
  counter(out, "kamera_responses_5xx_total", "server errors answered", double(m.responses_5xx));
  counter(out, "kamera_rejected_busy_total", "requests refused with 429 (queue full)",
          double(m.rejected_busy));
  counter(out, "kamera_rejected_quota_total",
          "window operations refused by a quota (429) or the windows' share of the pool (503)",
          double(m.rejected_quota));
}

void render_generation(std::string& out, const ServerMetrics& m) {
  out += m.ttft_seconds.render("kamera_ttft_seconds", "time to first token");
  counter(out, "kamera_tokens_generated_total", "completion tokens", double(m.tokens_generated));
  counter(out, "kamera_prompt_tokens_total", "prompt tokens", double(m.prompt_tokens));
  counter(out, "kamera_tokens_reused_total", "prompt tokens served from the chunk store",
          double(m.tokens_reused));
  counter(out, "kamera_tokens_recomputed_total", "prompt tokens that went through a forward",
          double(m.tokens_recomputed));
  gauge(out, "kamera_decode_tokens_per_second", "tokens per second of the last batched decode step",
        m.decode_tokens_per_s.load());
  counter(out, "kamera_decode_steps_total", "batched decode steps", double(m.decode_steps));
  counter(out, "kamera_decode_rows_total",
          "sequences decoded, summed over steps (rows / steps = batch size)",
          double(m.decode_rows));
  counter(out, "kamera_spec_drafted_tokens_total",
          "speculative decoding: draft tokens checked in decode steps", double(m.spec_drafted));
  counter(out, "kamera_spec_accepted_tokens_total",
          "speculative decoding: draft tokens accepted (completion tokens without a step of "
          "their own)",
          double(m.spec_accepted));
  counter(out, "kamera_spec_forced_tokens_total",
          "speculative decoding: draft tokens a request's grammar forced (of the drafted; always "
          "accepted)",
          double(m.spec_forced));
  counter(out, "kamera_spec_rows_total", "speculative decoding: decode rows that carried a draft",
          double(m.spec_rows));
  counter(out, "kamera_prefill_pauses_total",
          "times a prefill (admission, chunk upload, window edit) used up an engine step's slice "
          "and let a decode step run before its next slice",
          double(m.prefill_pauses));
  out += "# HELP kamera_segments_total chunk segments served, by source\n";
  out += "# TYPE kamera_segments_total counter\n";
  for (auto [k, v] : segment_counters(m))
    out += fmt::format("kamera_segments_total{{source=\"{}\"}} {}\n", k, v->load());
  counter(out, "kamera_background_canonicals_total",
          "canonicals of long prompt segments formed while the engine was idle",
          double(m.seg->background_canonicals));
  counter(out, "kamera_background_patches_total",
          "segment occurrences that keep a patch against their canonical instead of their rows",
          double(m.seg->background_patches));
  counter(out, "kamera_background_refreshes_total",
          "prompts served from other contexts, prefilled cold while idle and kept exact",
          double(m.seg->background_refreshes));
  counter(out, "kamera_background_orbits_total",
          "orbit occurrences formed while idle (the mean rows of a segment over orderings of one "
          "antecedent set)",
          double(m.seg->background_orbits));
  counter(out, "kamera_admissions_held_total",
          "requests that waited for an admission computing prompt tokens they share, then "
          "reused them",
          double(m.admissions_held));
  counter(out, "kamera_store_fetch_batches_total",
          "batches of prompt segments fetched from the shared tiers (one round trip per node)",
          double(m.seg->store_fetch_batches));
  counter(out, "kamera_store_fetch_skipped_total",
          "prompt segments not fetched: recomputing them was estimated cheaper",
          double(m.seg->store_fetch_skipped));
}

void render_images(std::string& out, const ServerMetrics& m) {
  counter(out, "kamera_images_encoded_total", "image and video parts the vision tower encoded",
          double(m.images_encoded));
  counter(
      out, "kamera_image_embedding_hits_total",
      "image and video parts whose embeddings came from the image cache or the store (no encode)",
      double(m.image_embedding_hits));
  counter(out, "kamera_image_chunk_hits_total",
          "image segments served from KV already in the store (relocated, patched)",
          double(m.image_chunk_hits));
  out += m.vision_encode_seconds.render("kamera_vision_encode_seconds",
                                        "vision tower time per encoded part (preprocessing too)");
}

void render_store(std::string& out, const ChunkStore::Stats& s) {
  out += "# HELP kamera_store_lookups_total memory-tier lookups\n";
  out += "# TYPE kamera_store_lookups_total counter\n";
  for (auto [kind, result, v] : {std::tuple{"canonical", "hit", s.canonical_hits},
                                 {"canonical", "miss", s.canonical_misses},
                                 {"patch", "hit", s.patch_hits},
                                 {"patch", "miss", s.patch_misses}})
    out += fmt::format("kamera_store_lookups_total{{kind=\"{}\",result=\"{}\"}} {}\n", kind, result,
                       v);
  out += "# HELP kamera_store_evictions_total memory-tier evictions\n";
  out += "# TYPE kamera_store_evictions_total counter\n";
  out +=
      fmt::format("kamera_store_evictions_total{{kind=\"canonical\"}} {}\n", s.canonical_evictions);
  out += fmt::format("kamera_store_evictions_total{{kind=\"patch\"}} {}\n", s.patch_evictions);
}

// The cached KV under its one budget (cache/cached_pages.h): each pool page counted once in
// kamera_cached_kv_pages; by holder, a page both hold is in prefix, segment and shared.
void render_cached_kv(std::string& out, const ServerMetrics& m) {
  const double page_bytes = double(m.cached_page_bytes.load());
  gauge(out, "kamera_cached_kv_budget_pages",
        "pool pages prefix entries and segment occurrences may hold together",
        double(m.cached_budget_pages.load()));
  gauge(out, "kamera_cached_kv_budget_bytes", "the same budget in bytes",
        double(m.cached_budget_pages.load()) * page_bytes);
  gauge(out, "kamera_cached_kv_pages",
        "pool pages the cached KV holds, each once (with the patches' bytes as pages)",
        double(m.cached_pages.load()));
  out += "# HELP kamera_cached_kv_holder_pages pool pages held, by holder\n";
  out += "# TYPE kamera_cached_kv_holder_pages gauge\n";
  for (auto [k, v] : {std::pair{"prefix", &m.cached_prefix_pages},
                      {"segment", &m.cached_segment_pages},
                      {"shared", &m.cached_shared_pages},
                      {"patch", &m.cached_patch_pages}})
    out += fmt::format("kamera_cached_kv_holder_pages{{holder=\"{}\"}} {}\n", k, v->load());
  counter(out, "kamera_cached_kv_evictions_total",
          "prefix entries and segment occurrences evicted whole",
          double(m.cached_evictions.load()));
}

void render_tiers(std::string& out, const ChunkStore& store, const ChunkStore::Stats& s) {
  out += "# HELP kamera_store_bytes bytes held per tier\n# TYPE kamera_store_bytes gauge\n";
  out += fmt::format("kamera_store_bytes{{tier=\"memory\"}} {}\n", s.bytes_held());
  out +=
      "# HELP kamera_store_budget_bytes the memory tier's byte budget (--store-mb less the "
      "segments' share)\n# TYPE kamera_store_budget_bytes gauge\n";
  out += fmt::format("kamera_store_budget_bytes {}\n", s.byte_budget);
  std::string lines;
  for (const auto& t : store.tiers()) {
    const StoreTier::Stats ts = t->stats();
    const std::string n = t->name();
    out += fmt::format("kamera_store_bytes{{tier=\"{}\"}} {}\n", n, ts.bytes);
    for (auto [what, v] : {std::pair{"hits", ts.hits},
                           {"misses", ts.misses},
                           {"errors", ts.errors},
                           {"discarded", ts.discarded},
                           {"forged", ts.forged},
                           {"evictions", ts.evictions}})
      lines += fmt::format("kamera_tier_{}_total{{tier=\"{}\"}} {}\n", what, n, v);
    if (const auto* r = dynamic_cast<const RedisTier*>(t.get())) {
      // what its batched fetches cost (the fetch-or-recompute break-even's inputs)
      const StoreTier::FetchCost c = r->fetch_cost();
      lines += fmt::format("kamera_tier_read_bytes_total{{tier=\"{}\"}} {}\n", n, r->read_bytes());
      lines += fmt::format("kamera_tier_fetch_rtt_us{{tier=\"{}\"}} {:.1f}\n", n, c.rtt_us);
      lines += fmt::format("kamera_tier_fetch_us_per_kib{{tier=\"{}\"}} {:.3f}\n", n, c.us_per_kib);
    }
  }
  if (!lines.empty())
    out +=
        "# HELP kamera_tier_hits_total slower-tier lookups (disk, redis)\n# TYPE "
        "kamera_tier_hits_total counter\n" +
        lines;
}

}  // namespace

std::string render_metrics(const ServerMetrics& m, const ChunkStore& store, int64_t queued) {
  std::string out;
  render_requests(out, m);
  render_generation(out, m);
  render_images(out, m);
  const ChunkStore::Stats s = store.stats();
  render_store(out, s);
  render_tiers(out, store, s);
  counter(out, "kamera_store_bytes_saved_total",
          "KV bytes served from the store instead of a forward", double(s.bytes_saved));
  render_cached_kv(out, m);
  gauge(out, "kamera_queue_depth", "requests waiting for the scheduler", double(queued));
  gauge(out, "kamera_kv_pages_used", "KV pool pages held", double(m.kv_pages_used.load()));
  gauge(out, "kamera_kv_pages_used_max", "the most KV pool pages held at once since the start",
        double(m.kv_pages_used_max.load()));
  gauge(out, "kamera_kv_page_bytes", "bytes of one KV pool page", double(m.kv_page_bytes.load()));
  return out;
}

}  // namespace kamera
