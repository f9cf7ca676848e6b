// The server's life: the context (model, pool, store tiers), the windows, the scheduler and the
// HTTP front, started and stopped in order.
#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "core/log.h"
#include "server/request_segments.h"
#include "server/rerank.h"
#include "server/server_impl.h"
#include "store/disk_tier.h"
#include "store/redis_tier.h"
#include "toolcall/reasoning.h"

namespace kamera {

Server::Impl::Impl(std::shared_ptr<const Model> m, const ServerOptions& o)
    : model_ptr(std::move(m)), model(*model_ptr), opts(o) {
  keys = opts.api_keys;
  if (!opts.api_key.empty()) keys.push_back(opts.api_key);
  max_prompt_bytes = kamera::max_prompt_bytes(model);
  const int chunk_tokens = opts.max_chunk_tokens > 0 ? opts.max_chunk_tokens : model.cfg.ctx_len;
  max_chunk_bytes = size_t(chunk_tokens) * longest_piece_bytes(model);
  json_limits = {opts.max_json_depth, opts.max_json_values};
  responses_store = std::make_shared<ResponseStore>(opts.responses_store_bytes);
  completion_salt = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ uint64_t(now_s() * 1e9);
}

namespace {

// --spec draft / --model-draft: the draft model, loaded and checked against the target's
// vocabulary, into the scheduler's options.
Status open_draft(const Model& model, const ServerOptions& opts, int64_t kv_tokens,
                  SchedulerOptions& so) {
  const bool draft = opts.spec == "draft" || (opts.spec == "none" && !opts.model_draft.empty());
  if (!draft && !opts.model_draft.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "--model-draft {} with --spec {}: a draft model drafts with --spec draft",
                      opts.model_draft, opts.spec);
  if (!draft) return Status::Ok();
  if (opts.model_draft.empty())
    return make_error(ErrorCode::InvalidArgument, "--spec draft needs --model-draft FILE");
  DraftOptions d;
  d.max = opts.spec_draft_max;
  d.min = opts.spec_draft_min;
  d.p_min = opts.spec_draft_p_min;
  d.n_threads = opts.draft_threads;
  d.kv_tokens = kv_tokens;
  d.tokenizer_path = opts.draft_tokenizer;
  KAMERA_ASSIGN_OR_RETURN(so.draft, DraftModel::load(opts.model_draft, model, d));
  so.spec = SchedulerOptions::Spec::Draft;
  log().info("serve: draft model {} ({} layers, dim {}), up to {} tokens a step, p-min {}",
             opts.model_draft, so.draft->model().cfg.n_layers, so.draft->model().cfg.dim, d.max,
             d.p_min);
  return Status::Ok();
}

}  // namespace

Status Server::Impl::open_context() {
  const ModelConfig& c = model.cfg;
  if (!model.tokenizer)
    log().warn("serve: the model has no tokenizer; prompts must use token chunks");
  KAMERA_ASSIGN_OR_RETURN(chat_template, chat_template_for(model, opts));
  if (chat_template) tool_format = toolcall::detect_format(chat_template->source());
  reasoning = chat_template && opts.reasoning_format == "parsed" &&
              (toolcall::has_reasoning_markers(chat_template->source()) ||
               tool_format == toolcall::Format::Harmony);
  KAMERA_ASSIGN_OR_RETURN(reranker, rerank_info(model));
  ContextOptions co;
  co.n_threads = opts.threads;
  co.kv_type = opts.kv_type;
  co.swa_full = opts.swa_full;
  co.swa_sequences = opts.max_active + 2;  // the decoding ones, a background canonical, a window
  const int64_t tokens = opts.pool_tokens > 0 ? opts.pool_tokens : 8 * int64_t(c.ctx_len);
  co.kv_tokens = tokens + 16 * int64_t(opts.max_active + 8);  // a partial page per sequence
  // The segments' KV lives in the KV pool (cache/segment_index.h), beside the prefixes', not in
  // the memory tier: --store-mb is the store's whole.
  co.store_bytes = opts.store_bytes;
  KAMERA_ASSIGN_OR_RETURN(co.tiers, open_tiers());
  co.reuse.prefix_cache_tokens = opts.prefix_cache_tokens;
  co.reuse.segment_cache_bytes = opts.segment_cache_bytes;
  co.reuse.compact_tokens = opts.segment_compact_tokens;
  co.reuse.compact_rank = opts.segment_patch_rank;
  co.reuse.idle_repair = opts.idle_repair;
  if (opts.store_fetch == "always")
    co.reuse.fetch = AssemblerOptions::Fetch::Always;
  else if (opts.store_fetch == "never")
    co.reuse.fetch = AssemblerOptions::Fetch::Never;
  else if (opts.store_fetch != "auto")
    return make_error(ErrorCode::InvalidArgument,
                      "--store-fetch: expected auto, always or never, not \"{}\"",
                      opts.store_fetch);
  KAMERA_ASSIGN_OR_RETURN(ctx, Context::create(model_ptr, co));
  if (!opts.mmproj.empty()) {
    const MediaOptions mo{opts.allow_local_media, opts.max_image_bytes,
                          opts.max_image_pixels,  opts.max_images,
                          opts.max_image_rows,    opts.max_image_rgb_mb << 20};
    KAMERA_ASSIGN_OR_RETURN(media,
                            ServerMedia::load(opts.mmproj, model, mo, opts.threads, &ctx->store()));
    if (media->word_prompt()) {
      if (chat_template)
        return make_error(ErrorCode::InvalidArgument,
                          "--mmproj {} is the mini-VL's tower: its prompt is its own (frames, then "
                          "the question's words), not a chat template",
                          opts.mmproj);
      words.emplace(*model.tokenizer);
    }
  }
  const int64_t pages = ctx->pool().n_pages();
  WindowQuota q;
  q.max_windows = opts.max_windows;
  q.ttl_s = opts.window_ttl_s;
  q.client_pages = int64_t(opts.client_pool_share * double(pages));
  q.total_pages = int64_t(opts.window_pool_share * double(pages));
  windows = std::make_unique<WindowRegistry>(*ctx, q);
  SchedulerOptions so{opts.max_queue, opts.max_active, opts.prefill_slice_tokens,
                      opts.prefill_share, opts.control_tokens_in_text};
  so.hold_shared_tokens = opts.hold_shared_tokens;
  so.compact_while_decoding = opts.segment_compact_while_decoding;
  so.spec = opts.spec == "ngram" ? SchedulerOptions::Spec::Ngram : SchedulerOptions::Spec::None;
  so.spec_draft_max = opts.spec_draft_max;
  so.spec_forced = opts.spec_forced == "off"    ? SchedulerOptions::Forced::Off
                   : opts.spec_forced == "text" ? SchedulerOptions::Forced::Text
                                                : SchedulerOptions::Forced::On;
  KAMERA_TRY(open_draft(model, opts, co.kv_tokens, so));
  scheduler = std::make_unique<Scheduler>(*ctx, *windows, metrics, so);
  answers = std::make_unique<AnswerThreads>(std::max(1, opts.http_threads / 4));
  return Status::Ok();
}

Result<std::vector<std::shared_ptr<StoreTier>>> Server::Impl::open_tiers() {
  std::vector<std::shared_ptr<StoreTier>> tiers;
  if (!opts.store_key.empty() && opts.store_key.size() < 16)
    return make_error(ErrorCode::InvalidArgument, "the store key has {} bytes; at least 16",
                      opts.store_key.size());
  // the largest entry this model can produce: a file or value past it is refused unread
  const size_t entry_limit =
      entry_size_limit(model.kv_layout(), std::max(model.cfg.ctx_len, opts.max_chunk_tokens),
                       model.cfg.input_width());
  if (!opts.store_dir.empty()) {
    DiskTier::Options d{opts.store_key, opts.store_dir_bytes, entry_limit};
    KAMERA_ASSIGN_OR_RETURN(
        auto disk, DiskTier::open(opts.store_dir, model.fingerprint, model.kv_layout(), d));
    tiers.push_back(disk);
  }
  if (!opts.redis_url.empty()) {
    RedisTier::Options r;
    r.key = opts.store_key;
    r.ttl_s = opts.redis_ttl_s;
    r.max_entry_bytes = entry_limit;
    r.tls = opts.redis_tls;
    r.read_replicas = opts.redis_read_replicas;
    r.wait_replicas = opts.redis_wait_replicas;
    KAMERA_ASSIGN_OR_RETURN(
        auto redis, RedisTier::open(opts.redis_url, model.fingerprint, model.kv_layout(), r));
    tiers.push_back(redis);
  }
  return tiers;
}

Status Server::Impl::open_front() {
  FrontOptions f;
  f.host = opts.host;
  f.port = opts.port;
  f.max_connections = opts.max_connections;
  f.workers = opts.http_threads;
  f.max_pending = std::max(64, 4 * opts.max_queue);
  f.head_timeout_ms = opts.head_timeout_ms;
  f.body_timeout_ms = opts.body_timeout_ms;
  f.write_timeout_ms = opts.write_timeout_ms;
  f.max_body_bytes = opts.max_body_bytes;
  f.max_peer_connections = opts.max_peer_connections > 0 ? opts.max_peer_connections
                                                         : std::max(1, f.max_connections / 4);
  f.max_client_inflight =
      opts.max_client_inflight > 0 ? opts.max_client_inflight : std::max(1, f.max_pending / 2);
  f.on_own_answer = [this](int status) {
    metrics.responses_4xx += status >= 400 && status < 500;
    metrics.responses_5xx += status >= 500;
  };
  add_routes();
  KAMERA_ASSIGN_OR_RETURN(
      front, HttpFront::bind(
                 f, [this](HttpRequest& h) { return inspect(h); },
                 [this](HttpRequest r, Out o) { dispatch(std::move(r), std::move(o)); }));
  return Status::Ok();
}

Status Server::Impl::open_events() {
  if (opts.redis_url.empty() || !opts.events) return Status::Ok();
  RedisLink::Options lo;
  KAMERA_ASSIGN_OR_RETURN(auto seeds, RedisLink::parse_url(opts.redis_url, lo));
  lo.tls_opts = opts.redis_tls;
  const std::string url = !opts.advertise_url.empty()
                              ? opts.advertise_url
                              : fmt::format("http://{}:{}", opts.host, front->port());
  events = std::make_unique<ClusterEvents>(
      std::make_unique<RedisLink>(std::move(seeds), lo), events_channel(model.fingerprint), url,
      [this] {
        int64_t n = 0;
        std::lock_guard<std::mutex> lock(inflight_mu);
        for (const auto& [client, held] : inflight) n += held;
        return json{{"inflight", n}, {"queued", scheduler->queued()}};
      });
  scheduler->observe_segments([e = events.get()](const ChunkId& id, int64_t bytes, bool stored) {
    e->segment(id, bytes, stored);
  });
  return Status::Ok();
}

Server::Server(std::shared_ptr<const Model> model, const ServerOptions& opts)
    : impl_(std::make_unique<Impl>(std::move(model), opts)) {}

Server::~Server() {
  stop();
}

Status Server::start() {
  Impl& s = *impl_;
  KAMERA_TRY(s.open_context());
  KAMERA_TRY(s.open_front());
  KAMERA_TRY(s.open_events());
  s.scheduler->start();
  s.front->start();
  return Status::Ok();
}

int Server::port() const {
  return impl_->front ? impl_->front->port() : 0;
}

void Server::wait() {
  std::unique_lock<std::mutex> lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [this] { return impl_->stopped.load(); });
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  // The scheduler first: queued work is answered (errors) while the front can still send; then
  // the answer threads finish what it handed them.
  if (s.scheduler) s.scheduler->stop();
  if (s.answers) s.answers->join();
  if (s.front) s.front->stop();
  s.events.reset();
  if (s.windows) s.windows->clear();
  std::lock_guard<std::mutex> lock(s.stop_mu);
  s.stop_cv.notify_all();
}

}  // namespace kamera
