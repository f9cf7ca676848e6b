// kamera serve: the OpenAI-compatible server with chunk and window APIs (src/server/server.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/log.h"
#include "model/rerank.h"
#include "server/server.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

// A size in MiB: finite, at least `least` (-1 where the option has "-1: the default"), at most
// 2^30 MiB; NaN and infinities are refused by name rather than cast into a byte count.
CLI::Validator mebibytes(double least) {
  return CLI::Validator(
      [least](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v) || v > double(1 << 30) ||
            (v < 0 && v != least))
          return "a size in MiB: a finite number from 0 to 2^30" +
                 std::string(least < 0 ? " (or -1)" : "") + ", not " + s;
        return "";
      },
      "MiB");
}

struct ServeArgs {
  std::string model, tokenizer;
  ServerOptions opts;
  double store_mb = 1024, store_dir_mb = 0, segment_cache_mb = -1, grammar_cache_mb = 128;
  double responses_store_mb = 64;
  std::string reuse = "patch";
  std::string compact_when = "idle";
  std::string idle_repair = "on";
  std::optional<std::string> api_key;  // given on the command line (visible in ps)
  std::string api_key_file, store_key_file;
  bool rerank = false;  // llama-server's --rerank: here a check that the model is a reranker
};

// A whole file's bytes, with trailing newlines dropped.
Result<std::string> read_secret(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::NotFound, "{} {}: cannot read it", what, path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// API keys from --api-key-file (one per line), KAMERA_API_KEY, or --api-key; an empty key is an
// error (it would silently turn authentication off).
Status collect_api_keys(ServeArgs& a) {
  if (!a.api_key_file.empty()) {
    KAMERA_ASSIGN_OR_RETURN(std::string all, read_secret(a.api_key_file, "--api-key-file"));
    std::istringstream lines(all);
    for (std::string k; std::getline(lines, k);) {
      if (!k.empty() && k.back() == '\r') k.pop_back();  // a file written on Windows
      if (!k.empty()) a.opts.api_keys.push_back(k);
    }
    if (a.opts.api_keys.empty())
      return make_error(ErrorCode::InvalidArgument, "--api-key-file {} holds no key",
                        a.api_key_file);
  }
  if (const char* env = std::getenv("KAMERA_API_KEY")) {
    if (!*env) return make_error(ErrorCode::InvalidArgument, "KAMERA_API_KEY is set but empty");
    a.opts.api_keys.push_back(env);
  }
  if (a.api_key) {
    if (a.api_key->empty())
      return make_error(ErrorCode::InvalidArgument,
                        "--api-key '' would turn authentication off; omit it instead");
    log().warn(
        "serve: --api-key is visible to other users in the process list; prefer "
        "--api-key-file or KAMERA_API_KEY");
    a.opts.api_keys.push_back(*a.api_key);
  }
  for (const auto& k : a.opts.api_keys)
    if (k.find_first_of(" \t") != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "an API key may not hold spaces or tabs");
  return Status::Ok();
}

int run_serve(ServeArgs a) {
  if (Status st = collect_api_keys(a); !st.ok()) return fail(st.message(), false);
  if (!a.store_key_file.empty()) {
    auto key = read_secret(a.store_key_file, "--store-key-file");
    if (!key.ok()) return fail(key.error(), false);
    a.opts.store_key = *key;
  }
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), false);
  a.opts.draft_tokenizer = a.tokenizer;
  a.opts.store_bytes = size_t(a.store_mb * 1024 * 1024);
  a.opts.store_dir_bytes = size_t(a.store_dir_mb * 1024 * 1024);
  a.opts.grammar_cache_bytes = size_t(a.grammar_cache_mb * 1024 * 1024);
  a.opts.responses_store_bytes = size_t(a.responses_store_mb * 1024 * 1024);
  a.opts.segment_cache_bytes =
      a.segment_cache_mb < 0 ? -1 : int64_t(a.segment_cache_mb * 1024 * 1024);
  a.opts.reuse = *reuse_policy_named(a.reuse);  // checked by the option's validator
  if (a.opts.reuse_budget > 0 && a.opts.reuse != ReusePolicy::Patch)
    return fail(fmt::format("--reuse-budget {} needs --reuse patch ({} has no repair)",
                            a.opts.reuse_budget, a.reuse),
                false);
  a.opts.segment_compact_while_decoding = a.compact_when == "decoding";
  a.opts.idle_repair = a.idle_repair == "on";
  if (a.opts.model_name == "kamera") {
    const auto slash = a.model.find_last_of('/');
    a.opts.model_name = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  }
  a.opts.kv_type = kv_type_option();
  a.opts.swa_full = swa_full_option();
  if (a.rerank) {  // as llama-server --rerank: refused at start on a model that cannot rank
    auto info = read_rerank_file(a.model);
    if (!info.ok()) return fail(info.error(), false);
    if (!info->head)
      return fail(fmt::format("--rerank: {} is not a reranker: {}", a.model, info->why_not), false);
  }
  Server server(*loaded, a.opts);
  Status st = server.start();
  if (!st.ok()) return fail(st.message(), false);
  std::fprintf(stderr, "kamera: serving %s on http://%s:%d (%s%s%s)\n", a.opts.model_name.c_str(),
               a.opts.host.c_str(), server.port(),
               a.opts.store_dir.empty() ? "memory store" : "disk store",
               a.opts.redis_url.empty() ? "" : " + redis",
               a.opts.api_keys.empty() ? "" : ", API key required");
  std::fprintf(stderr,
               "kamera: the chat page is at http://%s:%d/ (docs/SERVER.md, \"The web page\")\n",
               a.opts.host.c_str(), server.port());
  wait_for_stop_signal();
  std::fprintf(stderr, "kamera: stopping\n");
  server.stop();
  return 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  a->opts.threads = default_threads();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin")
      ->check(CLI::ExistingFile);
  app.add_option("--host", a->opts.host, "Address to listen on (loopback by default)")
      ->capture_default_str();
  app.add_option("--port", a->opts.port, "Port (0: any free port, printed at start)")
      ->capture_default_str();
  app.add_option("--store-dir", a->opts.store_dir,
                 "Disk tier of the chunk store: entries survive restarts (crash-safe writes, "
                 "checksummed, tied to this model)");
  app.add_option(
      "--redis", a->opts.redis_url,
      "Shared tier: redis://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB], or rediss://... "
      "over TLS; several nodes, or a node of a Redis Cluster: cluster mode (hash slots, "
      "redirects); servers sharing it reuse each other's chunks and segments");
  app.add_flag("--redis-read-replicas", a->opts.redis_read_replicas,
               "Redis Cluster: loads may read a replica (stale by the replication lag)");
  app.add_option("--redis-wait-replicas", a->opts.redis_wait_replicas,
                 "A Redis write counts once this many replicas hold it (WAIT; 0: at once)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--store-fetch", a->opts.store_fetch,
                 "Prompt segments stored by another server: fetch them when fetching is "
                 "estimated cheaper than recomputing (auto, measured), always, or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--advertise", a->opts.advertise_url,
                 "With --redis: the URL routers reach this server at, in the events it publishes "
                 "(default: http://HOST:PORT)");
  app.add_flag("!--no-events", a->opts.events,
               "With --redis: publish nothing for routers (what this server holds, its load)");
  app.add_option("--redis-ca", a->opts.redis_tls.ca_file,
                 "PEM CA bundle the rediss:// server's certificate must chain to (default: the "
                 "system store); the host name is checked")
      ->check(CLI::ExistingFile);
  app.add_option("--redis-cert", a->opts.redis_tls.cert_file,
                 "Client certificate (PEM) for a rediss:// server that requires one")
      ->check(CLI::ExistingFile);
  app.add_option("--redis-key", a->opts.redis_tls.key_file, "Private key of --redis-cert (PEM)")
      ->check(CLI::ExistingFile);
  app.add_option("--api-key", a->api_key,
                 "Require 'Authorization: Bearer KEY' on /v1/* and /metrics (visible in the "
                 "process list: prefer --api-key-file or KAMERA_API_KEY)");
  app.add_option("--api-key-file", a->api_key_file,
                 "File of API keys, one per line; each key is its own client for the quotas")
      ->check(CLI::ExistingFile);
  app.add_option("--store-key-file", a->store_key_file,
                 "Secret (>= 16 bytes) whose HMAC authenticates disk and Redis entries; required "
                 "with --redis (servers sharing a Redis share the key); with --store-dir alone, "
                 "a key is made in the directory")
      ->check(CLI::ExistingFile);
  app.add_option("--store-dir-mb", a->store_dir_mb,
                 "Disk tier cap (MiB; least recently used files go first; 0: none)")
      ->check(mebibytes(0))
      ->capture_default_str();
  app.add_option("--redis-ttl", a->opts.redis_ttl_s, "Expiry of Redis entries (s; 0: none)")
      ->capture_default_str();
  app.add_option("--max-windows", a->opts.max_windows, "Windows one client may hold")
      ->capture_default_str();
  app.add_option("--window-ttl", a->opts.window_ttl_s,
                 "Seconds after which an unused window is deleted (0: never)")
      ->capture_default_str();
  app.add_option("--client-pool-share", a->opts.client_pool_share,
                 "Share of the KV pool one client's windows may hold")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--window-pool-share", a->opts.window_pool_share,
                 "Share of the KV pool all windows may hold (the rest is kept for completions)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--max-connections", a->opts.max_connections,
                 "Open connections; more are answered 503 and closed")
      ->capture_default_str();
  app.add_option("--max-peer-connections", a->opts.max_peer_connections,
                 "Open connections of one remote address, and of one API key (0: a quarter of "
                 "--max-connections); more are answered 503 and closed")
      ->capture_default_str();
  app.add_option("--max-client-inflight", a->opts.max_client_inflight,
                 "Requests of one client (API key, or address without keys) handled at once, "
                 "every route (0: half of the workers' queue); more get 429")
      ->capture_default_str();
  app.add_option("--prefill-slice-tokens", a->opts.prefill_slice_tokens,
                 "Prompt, chunk and window forwards run in slices of at most this many tokens, "
                 "batched with the decode steps, so one client's prefill delays others' streams "
                 "by one slice at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--prefill-share", a->opts.prefill_share,
                 "While generations decode, prefill slices take at most this share of the "
                 "decoding's time (0.5: a third of the engine), or the ratio of requests waiting "
                 "for their first token to those decoding where that is larger (each waiting "
                 "request weighs as much as a decoding one); 0: a slice every decode step")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--prefix-cache-tokens", a->opts.prefix_cache_tokens,
                 "Tokens of text prompts and replies kept for exact prefix reuse (a repeated or "
                 "extended prompt is served from their KV: usage.prompt_tokens_details."
                 "cached_tokens); -1: a quarter of the KV pool, 0: off. With "
                 "--segment-cache-mb's share it makes one budget of KV pool pages, evicted least "
                 "recently used first across prefixes and segments")
      ->check(CLI::Range(int64_t(-1), int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--segment-cache-mb", a->segment_cache_mb,
                 "Conditioned KV of prompt segments (messages, paragraphs, images) kept for reuse "
                 "past the prefix, at any position (MiB of KV pool pages, at most a quarter of "
                 "the pool, added to --prefix-cache-tokens' share: one budget; -1: a quarter of "
                 "the pool, 0: none). No longer carved out of --store-mb")
      ->check(mebibytes(-1))
      ->capture_default_str();
  app.add_option("--segment-compact-tokens", a->opts.segment_compact_tokens,
                 "Segments of at least this many tokens get their canonical formed off the "
                 "request path (and stored to the tiers); each context they were seen in then "
                 "keeps a patch instead of its rows where that is smaller (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--segment-compact-when", a->compact_when,
                 "When those canonicals are formed: idle (after 0.3 s with nothing to do) or "
                 "decoding (also while generations decode and no request is being admitted, the "
                 "forward waiting for any admission: a loaded server still stores its segments "
                 "to the shared tiers, at the cost of those forwards)")
      ->check(CLI::IsMember({"decoding", "idle"}))
      ->capture_default_str();
  app.add_option("--idle-repair", a->idle_repair,
                 "Idle-time repair, run when the canonicals are: a prompt served with segments "
                 "from another context is prefilled cold and kept exact (the same context is "
                 "then served exact), and a segment seen behind several orderings of one "
                 "antecedent set gets the mean of their rows (served to an unseen ordering as "
                 "context-orbit); all within the cached-KV budget")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option(
         "--segment-patch-rank", a->opts.segment_patch_rank,
         "Rank of those patches (top singular vectors of the deficit per layer and channel)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--hold-shared-tokens", a->opts.hold_shared_tokens,
                 "A queued request that shares at least this many prompt tokens (a prefix, or "
                 "segments) not yet cached with a request being admitted waits for that admission, "
                 "then reuses them instead of computing them beside it (0: never waits)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--reuse", a->reuse,
                 "Reuse policy of requests that name none (\"reuse\"): patch (prefix, then seen "
                 "segments from their nearest context), keep (prefix, then segments' latest KV as "
                 "is: llama.cpp --cache-reuse), prefix (exact prefix only: vLLM, SGLang), blind, "
                 "reprefill")
      ->check(CLI::IsMember({"patch", "keep", "prefix", "blind", "reprefill"}))
      ->capture_default_str();
  app.add_option("--reuse-budget", a->opts.reuse_budget,
                 "Repair budget of patch requests that name no \"reuse_budget\": the share (0 to "
                 "1) of the prompt tokens that would be served from another context (a segment's "
                 "rows from the nearest context, a canonical plus another context's patch) that "
                 "may be recomputed in context instead, the segments whose context differs most "
                 "first (0: none, reuse as is; 1: every such segment, a re-prefill's logits)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--max-json-depth", a->opts.max_json_depth,
                 "Deepest nesting of arrays and objects in a request body (checked while parsing)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--max-json-values", a->opts.max_json_values,
                 "Most values (scalars, arrays, objects, keys) in a request body (checked while "
                 "parsing)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--grammar-states", a->opts.grammar_states,
                 "Most automaton states one request's response_format or tools grammars may "
                 "build while compiling (past it: 400 grammar_budget_exceeded)")
      ->check(CLI::Range(size_t(1000), size_t(1) << 32))
      ->capture_default_str();
  app.add_option("--grammar-seconds", a->opts.grammar_seconds,
                 "Most CPU seconds one request's grammar compile may take (past it: 400 "
                 "grammar_budget_exceeded)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--grammar-cache-mb", a->grammar_cache_mb,
                 "Compiled grammars (and the token masks their generations filled) kept for "
                 "requests with the same response_format or tools, in MiB (least recently used "
                 "out first)")
      ->check(mebibytes(0))
      ->capture_default_str();
  app.add_option("--spec", a->opts.spec,
                 "Speculative decoding: ngram drafts each step's next tokens from the request's "
                 "own prompt and output (prompt lookup) and checks them in the step's forward "
                 "(the same outputs: greedy token for token, sampled in distribution; "
                 "usage.kamera.speculative); draft: a draft model (--model-draft) proposes "
                 "them; none: a token a step")
      ->check(CLI::IsMember({"none", "ngram", "draft"}))
      ->capture_default_str();
  app.add_option("--spec-forced", a->opts.spec_forced,
                 "Speculative decoding of a constrained request (response_format, a forced or "
                 "strict tool call), with any --spec: on: the tokens its grammar leaves no choice "
                 "for are drafted, always accepted (usage.kamera.speculative.forced); text: also "
                 "the longest token where the grammar fixes the next text but not its tokens (a "
                 "guess, checked); off")
      ->check(CLI::IsMember({"on", "text", "off"}))
      ->capture_default_str();
  app.add_option("--spec-draft-max,--draft-max", a->opts.spec_draft_max,
                 "Speculative decoding: draft tokens checked per step at most (ngram: the draft "
                 "length adapts to the acceptance below it)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--model-draft", a->opts.model_draft,
                 "Speculative decoding's draft model (-md; GGUF or llama2.c, the target's "
                 "vocabulary: refused otherwise); implies --spec draft")
      ->check(CLI::ExistingFile);
  app.add_option("--threads-draft", a->opts.draft_threads,
                 "Draft model: its engine's threads (-td; its own pool: threads of both "
                 "engines spin while the other runs)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--spec-draft-min,--draft-min", a->opts.spec_draft_min,
                 "Draft model: a draft of fewer tokens is not checked")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--spec-draft-p-min,--draft-p-min", a->opts.spec_draft_p_min,
                 "Draft model: drafting stops at a token the draft gives less probability than "
                 "this (greedy)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--reasoning-format", a->opts.reasoning_format,
                 "A thinking model's <think> blocks (read off its chat template): parsed into "
                 "reasoning_content (and Responses' reasoning items, Messages' thinking blocks), "
                 "or none: left in the answer's text")
      ->check(CLI::IsMember({"parsed", "none"}))
      ->capture_default_str();
  app.add_option("--responses-store-mb", a->responses_store_mb,
                 "Responses API: stored responses (\"store\": true, the default) kept for "
                 "previous_response_id and GET /v1/responses/{id}, in MiB of their JSON (least "
                 "recently used out first; 0: none kept)")
      ->check(mebibytes(0))
      ->capture_default_str();
  app.add_flag("--control-tokens-in-text", a->opts.control_tokens_in_text,
               "Read control tokens (<|im_start|>, ...) written in client text (messages, "
               "prompts, chunk texts, /tokenize) as control tokens; by default that text is "
               "literal and only the chat template's own structure yields them (this opt-in lets "
               "a user message open a system turn)");
  app.add_flag("--rerank,--reranking", a->rerank,
               "Refuse to start unless the model is a reranker (as llama-server --rerank; "
               "kamera serves POST /v1/rerank whenever the model is one, and its other routes "
               "too)");
  app.add_option("--head-timeout-ms", a->opts.head_timeout_ms,
                 "Deadline for a request's head, idle keep-alive wait included")
      ->capture_default_str();
  app.add_option("--body-timeout-ms", a->opts.body_timeout_ms, "Deadline for a request's body")
      ->capture_default_str();
  app.add_option("--write-timeout-ms", a->opts.write_timeout_ms,
                 "Deadline for each write to a client")
      ->capture_default_str();
  app.add_option("--store-mb", a->store_mb, "Memory tier budget (MiB)")
      ->check(mebibytes(0))
      ->capture_default_str();
  app.add_option("--max-queue", a->opts.max_queue, "Queued requests before answering 429")
      ->capture_default_str();
  app.add_option("--max-active", a->opts.max_active, "Generations decoded together")
      ->capture_default_str();
  app.add_option("--max-client-requests", a->opts.max_client_requests,
                 "Completions one client may have queued or decoding (0: max-active + "
                 "max-queue / 2); more get 429")
      ->capture_default_str();
  app.add_option("--max-body-bytes", a->opts.max_body_bytes, "Largest request body (bytes)")
      ->capture_default_str();
  app.add_option("--max-tokens", a->opts.default_max_tokens,
                 "Most tokens of a completion that names no max_tokens (0: to the end of the "
                 "context, as OpenAI and llama-server)")
      ->capture_default_str();
  app.add_option("--pool-tokens", a->opts.pool_tokens,
                 "KV pool capacity in tokens (0: 8 x context)")
      ->capture_default_str();
  app.add_option("--http-threads", a->opts.http_threads,
                 "Worker threads parsing and validating requests")
      ->capture_default_str();
  app.add_option("--name", a->opts.model_name,
                 "Model name reported by the API (default: the file name)");
  app.add_option("--chat-template", a->opts.chat_template,
                 "Template of /v1/chat/completions: a built-in (chatml, llama3, deepseek2, "
                 "deepseek3) or a Jinja file (default: the GGUF's tokenizer.chat_template; a model "
                 "without one gets 'role: content' lines)");
  add_serve_media_options(app, a->opts);
  add_threads_option(app, a->opts.threads);
  return [a] { return run_serve(*a); };
}

}  // namespace kamera::cli
