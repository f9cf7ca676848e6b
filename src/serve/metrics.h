// Counters and histograms of the server: written by the scheduler and the HTTP side, rendered in
// the Prometheus text format by server/prometheus.h (a histogram renders its own lines).
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "cache/reuse_counters.h"

namespace kamera {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t n_ = 0;
};

struct ServerMetrics {
  std::atomic<int64_t> requests_completions{0}, requests_chat{0}, requests_chunks{0},
      requests_windows{0}, requests_embeddings{0}, requests_other{0}, requests_responses{0},
      requests_messages{0};
  std::atomic<int64_t> responses_4xx{0}, responses_5xx{0}, rejected_busy{0}, rejected_quota{0};
  std::atomic<int64_t> tokens_generated{0}, prompt_tokens{0}, tokens_reused{0},
      tokens_recomputed{0};
  // Prompt spans served, by where their KV came from, and the caches' background work: the
  // context's assembler's counters (set by the scheduler; null before).
  const ReuseCounters* seg = nullptr;
  // Generations that waited in the queue for an admission computing tokens they share
  // (SchedulerOptions::hold_shared_tokens), each counted once.
  std::atomic<int64_t> admissions_held{0};
  std::atomic<int64_t> decode_steps{0}, decode_rows{0};
  // Speculative decoding: draft tokens checked, accepted, and decode rows that carried a draft.
  // spec_forced: of the drafted, the tokens a constraint forced.
  std::atomic<int64_t> spec_drafted{0}, spec_accepted{0}, spec_rows{0}, spec_forced{0};
  // times a sliced task (an admission, an upload, a window edit) used up an engine step's prefill
  // budget and let a decode step run before its next slice
  std::atomic<int64_t> prefill_pauses{0};
  std::atomic<double> decode_tokens_per_s{0};
  // The prefill speed the scheduler measured (Scheduler::note_prefill_speed); 0: not yet.
  std::atomic<double> prefill_tokens_per_s{0};
  // KV pool pages held now, the most held at once since the start, and the bytes of one page
  std::atomic<int64_t> kv_pages_used{0}, kv_pages_used_max{0}, kv_page_bytes{0}, kv_pages{0};
  // The pool's bytes (all arenas), and the sliding-window layers' page space when the pool bounds
  // it (0 pages otherwise): its pages, those held now and the most held at once.
  std::atomic<int64_t> kv_bytes{0}, kv_window_pages{0}, kv_window_pages_used{0},
      kv_window_pages_used_max{0};
  // The scheduler's caches, published after every step (GET /v1/stats): the exact-prefix index
  // (entries, tokens held, of those in approximate tails, budget, evictions) and the segment index
  // (occurrences, bytes held, budget, evictions, occurrences that keep a patch instead of their
  // rows).
  std::atomic<int64_t> prefix_entries{0}, prefix_tokens{0}, prefix_approximate_tokens{0},
      prefix_budget{0}, prefix_evictions{0};
  std::atomic<int64_t> segment_occurrences{0}, segment_bytes{0}, segment_budget{0},
      segment_evictions{0}, segment_compacted{0};
  // Both under their one budget of pool pages (cache/cached_pages.h), each page counted once:
  // the budget, the pages held in all (with the patches'), by prefix entries, by segment
  // occurrences, by both, by patches, and the entries and occurrences evicted whole.
  std::atomic<int64_t> cached_budget_pages{0}, cached_page_bytes{0}, cached_pages{0},
      cached_prefix_pages{0}, cached_segment_pages{0}, cached_shared_pages{0},
      cached_patch_pages{0}, cached_evictions{0};
  Histogram ttft_seconds{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  // images and video parts (server/media_parts.h): tower runs, embeddings found in the image
  // cache, image segments served from stored KV, and the tower's time per encode
  std::atomic<int64_t> images_encoded{0}, image_embedding_hits{0}, image_chunk_hits{0};
  Histogram vision_encode_seconds{{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
};

}  // namespace kamera
