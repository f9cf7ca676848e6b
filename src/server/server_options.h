// What `kamera serve` is told: its address, store tiers, limits, quotas and reuse policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/reuse_policy.h"
#include "core/dtype.h"
#include "store/tls_tunnel.h"

namespace kamera {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (see Server::port())
  std::string store_dir;  // disk tier; empty: none
  std::string redis_url;  // redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB]; empty: none
  // When set, /v1/* and /metrics require "Authorization: Bearer KEY" with one of these keys;
  // each key is its own client for the quotas. api_key is one more key (kept for callers).
  std::string api_key;
  std::vector<std::string> api_keys;
  std::string model_name = "kamera";
  // Chat messages: this template (a built-in's name or a Jinja file); empty: the GGUF's
  // tokenizer.chat_template when it has one, else "role: content" lines.
  std::string chat_template;
  int threads = 2;  // engine threads
  // workers parsing and validating requests; a quarter as many (at least one) write the answers
  int http_threads = 8;
  int max_queue = 64;   // requests waiting for the scheduler before 429
  int max_active = 16;  // generations decoding at once
  // Completions one client may have queued or decoding at once (more: 429 quota_exceeded);
  // 0: max_active + max_queue / 2, so one client never takes the whole queue.
  int max_client_requests = 0;
  size_t max_body_bytes = size_t(32) << 20;
  size_t store_bytes = size_t(1) << 30;  // memory tier budget
  int pool_tokens = 0;                   // KV pool capacity in tokens; 0: 8 x the model's context
  DType kv_type = DType::F32;            // KV pool storage: f32, f16 or bf16
  // Sliding-window layers keep every token's row (--swa-full); false: only their window, and no
  // prefix or segment cache on such a model (ContextOptions::swa_full).
  bool swa_full = false;
  int default_max_tokens =
      0;  // a completion that names no max_tokens: at most this many (0: to the end of the context)
  int max_chunk_tokens = 0;  // 0: the model's context

  // Request bodies: nesting of arrays and objects, and values (scalars, containers, keys), both
  // enforced while a body is parsed; past them: 400 json_too_deep / json_too_many_values.
  int max_json_depth = 64;
  int64_t max_json_values = int64_t(1) << 21;

  // The grammars of response_format and tools (grammar/budget.h): one request's compile may build
  // this many automaton states and spend this many CPU seconds (past either: 400
  // grammar_budget_exceeded, naming the field); compiled grammars are kept under this many bytes.
  size_t grammar_states = 300000;
  double grammar_seconds = 3.0;
  size_t grammar_cache_bytes = size_t(128) << 20;

  // Control tokens (<|im_start|>, ...) written in client text (message contents, prompts, chunk
  // and window texts, /tokenize) are read as control tokens only with this opt-in; by default
  // that text is literal and only the chat template's own structure yields control tokens.
  bool control_tokens_in_text = false;
  // A thinking model's reasoning (the <think> blocks its chat template writes): "parsed" splits it
  // out of chat answers (message.reasoning_content, delta.reasoning_content), "none" leaves it in
  // the content.
  std::string reasoning_format = "parsed";
  // The Responses API's stored responses (store: true, its default), kept for
  // previous_response_id and GET /v1/responses/{id} under this many bytes of their JSON, the least
  // recently used out first (0: none kept).
  size_t responses_store_bytes = size_t(64) << 20;
  // Tokens of text prompts (and their replies) kept for exact prefix reuse: a repeated or extended
  // prompt is served from their KV pages (usage.prompt_tokens_details.cached_tokens); -1: a
  // quarter of the KV pool, 0: off.
  int64_t prefix_cache_tokens = -1;
  // Past the prefix, segments (messages, paragraphs) seen before are served from their
  // conditioned KV (cache/segment_index.h), held in KV pool pages: this many bytes of pages, at
  // most a quarter of the pool (-1: that quarter, 0: no segment reuse). It adds to the prefix's
  // share: prefixes and segments are one budget of pool pages (the two shares together), evicted
  // least recently used first whichever kind; and the policy of a request that names no "reuse".
  int64_t segment_cache_bytes = -1;
  ReusePolicy reuse = ReusePolicy::Patch;
  // The repair budget of a patch request that names no "reuse_budget": the share of the tokens it
  // would serve from another context that may be recomputed in context instead
  // (cache/repair_plan.h; docs/SERVER.md says how the default was chosen).
  double reuse_budget = 0;
  // Segments of at least this many tokens get their canonical formed off the request path;
  // then each context they were seen in keeps a patch of this rank instead of its rows, where the
  // patch is smaller (0: never).
  int segment_compact_tokens = 64;
  int segment_patch_rank = 32;
  // Formed when the engine has been idle 0.3 s; with this, also while generations decode and
  // nothing is being admitted (the canonical's forward then waits for any admission): under steady
  // load the shared tiers still receive them, for the cost of those forwards.
  bool segment_compact_while_decoding = false;
  // Idle-time repair (cache/idle_repair.h), run as the canonicals are: a prompt served with
  // segments from another context is prefilled cold when idle and kept exact, so the same context
  // is served exact next time; a segment seen behind several orderings of one antecedent set gets
  // the mean of their rows, served to an ordering not seen (source context-orbit).
  bool idle_repair = true;
  // A queued request sharing at least this many prompt tokens (not yet cached) with a request
  // being admitted waits for that admission and reuses them (SchedulerOptions; 0: never waits).
  int hold_shared_tokens = 64;

  // Fairness: prompt, chunk and window forwards run in slices of at most this many tokens,
  // batched with the decode steps, so one client's prefill holds others' streams for one slice at
  // most; while generations decode, slices take at most prefill_share of the decoding's time, or
  // the ratio of admissions in flight to decoding rows where larger (0: a slice every step).
  int prefill_slice_tokens = 64;
  double prefill_share = 0.5;

  // Speculative decoding (SchedulerOptions::spec): "ngram" drafts each step's next tokens from
  // the request's own prompt and output (prompt lookup) and checks them in the step's forward,
  // up to spec_draft_max a step; "none" decodes a token a step. Outputs are the same either way
  // (greedy: token for token; sampled: the same distribution).
  std::string spec = "none";
  int spec_draft_max = 8;
  // Forced drafting (SchedulerOptions::spec_forced), with any `spec`: "on" drafts a constrained
  // request's tokens that its grammar leaves no choice for; "text" also guesses the tokens of
  // text the grammar fixes; "off" (--spec-forced).
  std::string spec_forced = "on";
  // "draft" (implied by model_draft): a draft model of the target's vocabulary (checked at start,
  // refused by name) proposes up to spec_draft_max tokens a step greedily, stopping at a token it
  // gives less than spec_draft_p_min; drafts shorter than spec_draft_min are dropped
  // (serve/draft_model.h). llama-server's -md, --draft-max, --draft-min, --draft-p-min.
  std::string model_draft;
  std::string draft_tokenizer;  // a llama2.c draft's tokenizer.bin
  int draft_threads = 1;        // the draft's engine threads (llama-server's -td)
  int spec_draft_min = 0;
  float spec_draft_p_min = 0.75f;

  // HTTP front: connection cap and deadlines (a request head, a body, each write).
  int max_connections = 1024;
  // Under the cap, per peer: open connections of one remote address, and of one client (an API
  // key, or the address without keys), and requests of one client being handled at once.
  // 0: a quarter of max_connections (connections), half of the workers' queue (requests).
  int max_peer_connections = 0;
  int max_client_inflight = 0;
  int head_timeout_ms = 10000;
  int body_timeout_ms = 60000;
  int write_timeout_ms = 30000;

  // Quotas on what outlives a request (windows and the KV pages they hold), per client: an API
  // key, or the peer address when auth is off.
  int max_windows = 16;             // per client
  double window_ttl_s = 600;        // a window unused this long is deleted (0: never)
  double client_pool_share = 0.25;  // of the KV pool, held by one client's windows
  double window_pool_share = 0.5;   // of the KV pool, held by all windows: the rest is reserved
                                    // for completions

  // Shared and persistent tiers: the MAC key of their entries (see store/entry_codec.h). Required
  // with redis_url; with store_dir alone, a key is made once and kept in the directory.
  std::string store_key;
  size_t store_dir_bytes = 0;  // disk tier cap, least recently used files go first (0: none)
  int redis_ttl_s = 0;         // expiry of Redis entries (0: none)
  TlsOptions redis_tls;        // CA / client certificate for rediss:// URLs
  // A Redis Cluster (the URL names one node or several; told apart at connect time): loads may
  // read replicas; a write counts once this many replicas hold it (WAIT).
  bool redis_read_replicas = false;
  int redis_wait_replicas = 0;
  // Prompt segments the memory misses, fetched from the tiers when another server stored them:
  // "auto" when fetching is estimated cheaper than recomputing (measured), "always", "never".
  std::string store_fetch = "auto";
  // With redis_url: what this server holds and its load are published for routers
  // (server/cluster_events.h) under this URL (empty: http://HOST:PORT as bound); events = false:
  // nothing published.
  std::string advertise_url;
  bool events = true;

  // Images in chat messages (server/media_parts.h): the vision tower (llama.cpp's mmproj GGUF;
  // empty: image parts are refused), the directory local paths are confined to (empty: refused),
  // and the limits checked before decoding.
  std::string mmproj;
  std::string allow_local_media;
  size_t max_image_bytes = size_t(20) << 20;  // encoded bytes of one picture
  int64_t max_image_pixels = 16'000'000;      // declared width x height of one picture
  int max_images = 16;                        // pictures per request, video frames included
  // What a request's pictures may cost, from their headers before any is decoded: the rows the
  // vision tower makes of them (prompt tokens, and the tower's work), and their decoded RGB.
  int64_t max_image_rows = 4096;
  int64_t max_image_rgb_mb = 192;
};

}  // namespace kamera
