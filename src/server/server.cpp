// The HTTP adapter: routes of the OpenAI-compatible API and of the chunk and window APIs, on
// cpp-httplib. Parsing and validation run on the HTTP threads; engine work is queued to the
// scheduler (src/server/scheduler.h).
#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>
#include <future>
#include <thread>

#include "core/log.h"
#include "reuse/disk_tier.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/redis_tier.h"
#include "server/scheduler.h"
#include "server/window_ops.h"

namespace kamera {

struct Server::Impl {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;

  std::shared_ptr<const Model> model_ptr;
  const Model& model;
  ServerOptions opts;
  ServerMetrics metrics;
  httplib::Server http;
  std::thread http_thread;
  int bound_port = 0;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<WindowRegistry> windows;
  std::unique_ptr<Scheduler> scheduler;
  std::atomic<bool> stopped{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;

  Impl(std::shared_ptr<const Model> m, const ServerOptions& o)
      : model_ptr(std::move(m)), model(*model_ptr), opts(o) {}

  Status open_context();
  Status bind();
  void routes();
  void chunk_routes();
  void window_routes();
  void generate(Req req, Res res, bool chat, const std::string& window);
  void answer_whole(Res res, Channel& out, const CompletionMeta& meta);
  void answer_stream(Res res, std::shared_ptr<Channel> out,
                     std::shared_ptr<std::atomic<bool>> cancelled, const CompletionMeta& meta);

  void reply(Res res, const json& body, int status = 200) {
    res.status = status;
    metrics.responses_4xx += status >= 400 && status < 500;
    metrics.responses_5xx += status >= 500;
    res.set_content(dump(body), "application/json");
  }
  void reply_error(Res res, const HttpError& e) {
    if (e.status == 429) res.set_header("Retry-After", "1");
    reply(res, error_body(e), e.status);
  }
  static HttpError busy_error() {
    return {429, "the server is busy: too many queued requests", "rate_limit_error"};
  }

  bool authorized(Req req, Res res) {
    if (opts.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opts.api_key) return true;
    reply_error(
        res, {401, "missing or wrong API key (Authorization: Bearer KEY)", "authentication_error"});
    return false;
  }

  // An authenticated route whose exceptions become a 500 (never cross the handler).
  template <class F>
  httplib::Server::Handler guarded(F fn) {
    return [this, fn](Req req, Res res) {
      if (!authorized(req, res)) return;
      try {
        fn(req, res);
      } catch (const std::exception& e) {
        reply_error(res, {500, std::string("internal error: ") + e.what(), "server_error"});
      }
    };
  }

  // Runs fn on the scheduler thread and answers with its result (`ok` status on success; on
  // failure the error's status, or `error_status` when set); 429 when the queue is full.
  void on_scheduler(Res res, std::function<Result<json>()> fn, int ok = 200, int error_status = 0) {
    auto promise = std::make_shared<std::promise<Result<json>>>();
    auto fut = promise->get_future();
    const bool queued = scheduler->post([promise, fn](bool run) {
      promise->set_value(
          run ? fn() : Result<json>(make_error(ErrorCode::OutOfMemory, "the server is stopping")));
    });
    if (!queued) return reply_error(res, busy_error());
    Result<json> r = fut.get();
    if (r.ok()) return reply(res, *r, ok);
    HttpError e = http_error(r.error());
    if (error_status) e = {error_status, e.message, error_status < 500 ? e.type : "server_error"};
    reply_error(res, e);
  }
};

// Completions (plain, chat, or after a window), streamed as SSE or answered at the end.
void Server::Impl::generate(Req req, Res res, bool chat, const std::string& window) {
  (chat ? metrics.requests_chat : metrics.requests_completions)++;
  auto body = parse_body(req.body);
  if (!body.ok()) return reply_error(res, {400, body.message()});
  auto r = gen_request(*body, chat, opts, model.cfg);
  if (!r.ok()) return reply_error(res, {400, r.message()});
  r->window_id = window;
  const bool stream =
      body->contains("stream") && (*body)["stream"].is_boolean() && (*body)["stream"].get<bool>();
  auto g = std::make_unique<Generation>();
  g->req = std::move(r.value());
  g->out = std::make_shared<Channel>();
  g->cancelled = std::make_shared<std::atomic<bool>>(false);
  g->t_submit = now_s();
  auto out = g->out;
  auto cancelled = g->cancelled;
  if (!scheduler->submit(std::move(g))) return reply_error(res, busy_error());
  const CompletionMeta meta{fmt::format("cmpl-{:x}", uint64_t(now_s() * 1e6)), opts.model_name,
                            int64_t(std::time(nullptr)), chat};
  if (!stream) return answer_whole(res, *out, meta);
  answer_stream(res, out, cancelled, meta);
}

void Server::Impl::answer_whole(Res res, Channel& out, const CompletionMeta& meta) {
  std::string text;
  for (;;) {
    Event e = out.pop();
    if (e.kind == Event::Text) {
      text += e.text;
      continue;
    }
    if (e.kind == Event::Error) return reply(res, e.info, e.status);
    return reply(res, completion_body(meta, text, e.info));
  }
}

void Server::Impl::answer_stream(Res res, std::shared_ptr<Channel> out,
                                 std::shared_ptr<std::atomic<bool>> cancelled,
                                 const CompletionMeta& meta) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [out, cancelled, meta](size_t, httplib::DataSink& sink) {
        Event e = out->pop();
        auto send = [&](const json& j) {
          const std::string line = "data: " + dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (e.kind == Event::Text) {
          const bool ok = send(stream_piece(meta, e.text, nullptr, nullptr));
          if (!ok) cancelled->store(true);  // the client went away: stop decoding for it
          return ok;
        }
        send(e.kind == Event::Error
                 ? e.info
                 : stream_piece(meta, "", e.info["finish_reason"], &e.info["usage"]));
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      },
      [cancelled](bool success) {
        if (!success) cancelled->store(true);
      });
}

void Server::Impl::routes() {
  http.Get("/health", [this](Req, Res res) {
    reply(res, {{"status", "ok"},
                {"model", opts.model_name},
                {"arch", arch_name(model.cfg.arch)},
                {"ctx_len", model.cfg.ctx_len}});
  });
  http.Get("/metrics", guarded([this](Req, Res res) {
             res.set_content(render_metrics(metrics, ctx->store(), scheduler->queued()),
                             "text/plain; version=0.0.4");
           }));
  http.Post("/v1/completions", guarded([this](Req q, Res r) { generate(q, r, false, ""); }));
  http.Post("/v1/chat/completions", guarded([this](Req q, Res r) { generate(q, r, true, ""); }));
  http.Post(R"(/v1/windows/(w[0-9]+)/completions)", guarded([this](Req q, Res r) {
              ++metrics.requests_windows;
              generate(q, r, false, q.matches[1].str());
            }));
  chunk_routes();
  window_routes();
}

void Server::Impl::chunk_routes() {
  http.Post("/v1/chunks", guarded([this](Req req, Res res) {
              ++metrics.requests_chunks;
              auto body = parse_body(req.body);
              if (!body.ok()) return reply_error(res, {400, body.message()});
              auto content = chunk_content(*body, model, opts.max_chunk_tokens);
              if (!content.ok()) return reply_error(res, {400, content.message()});
              on_scheduler(
                  res,
                  [this, c = std::move(content.value())]() -> Result<json> {
                    bool formed = false;
                    KAMERA_ASSIGN_OR_RETURN(auto e, ctx->cache().canonical(c, DType::F32, &formed));
                    json j = chunk_json(*e);
                    j["formed"] = formed;
                    return j;
                  },
                  201, 400);
            }));
  http.Get(R"(/v1/chunks/([0-9a-fA-F]+))", guarded([this](Req req, Res res) {
             ++metrics.requests_chunks;
             auto id = ChunkId::from_hex(req.matches[1].str());
             if (!id) return reply_error(res, {400, "a chunk id is 32 hex digits"});
             auto e = ctx->store().find_canonical(*id);
             if (!e)
               return reply_error(res, {404, "unknown chunk id " + id->hex(), "not_found_error"});
             reply(res, chunk_json(*e));
           }));
  http.Delete(
      R"(/v1/chunks/([0-9a-fA-F]+))", guarded([this](Req req, Res res) {
        ++metrics.requests_chunks;
        auto id = ChunkId::from_hex(req.matches[1].str());
        if (!id) return reply_error(res, {400, "a chunk id is 32 hex digits"});
        const bool had = ctx->store().find_canonical(*id) != nullptr;
        ctx->store().erase_canonical(*id);
        if (!had)
          return reply_error(res, {404, "unknown chunk id " + id->hex(), "not_found_error"});
        reply(res, {{"id", id->hex()}, {"object", "chunk"}, {"deleted", true}});
      }));
}

void Server::Impl::window_routes() {
  auto body_or_empty = [](Req req) {
    return req.body.empty() ? Result<json>(json::object()) : parse_body(req.body);
  };
  http.Post("/v1/windows", guarded([this, body_or_empty](Req req, Res res) {
              ++metrics.requests_windows;
              auto body = body_or_empty(req);
              if (!body.ok()) return reply_error(res, {400, body.message()});
              auto pol = window_policy(*body);
              if (!pol.ok()) return reply_error(res, {400, pol.message()});
              on_scheduler(
                  res, [this, p = *pol] { return windows->create(p); }, 201, 503);
            }));
  http.Get(R"(/v1/windows/(w[0-9]+))", guarded([this](Req req, Res res) {
             ++metrics.requests_windows;
             on_scheduler(res, [this, id = req.matches[1].str()] { return windows->describe(id); });
           }));
  http.Delete(R"(/v1/windows/(w[0-9]+))", guarded([this](Req req, Res res) {
                ++metrics.requests_windows;
                on_scheduler(res, [this, id = req.matches[1].str()] { return windows->erase(id); });
              }));
  http.Post(R"(/v1/windows/(w[0-9]+)/(append|evict|recall|reorder|fork|refresh))",
            guarded([this, body_or_empty](Req req, Res res) {
              ++metrics.requests_windows;
              const std::string id = req.matches[1].str(), op = req.matches[2].str();
              auto body = body_or_empty(req);
              if (!body.ok()) return reply_error(res, {400, body.message()});
              on_scheduler(
                  res, [this, id, op, b = *body] { return windows->edit(id, op, b); },
                  op == "fork" ? 201 : 200);
            }));
}

Status Server::Impl::open_context() {
  const ModelConfig& c = model.cfg;
  if (!model.tokenizer)
    log().warn("serve: the model has no tokenizer; prompts must use token chunks");
  ContextOptions co;
  co.n_threads = opts.threads;
  const int64_t tokens = opts.pool_tokens > 0 ? opts.pool_tokens : 8 * int64_t(c.ctx_len);
  co.kv_tokens = tokens + 16 * int64_t(opts.max_active + 8);  // a partial page per sequence
  co.store_bytes = opts.store_bytes;
  if (!opts.store_dir.empty()) {
    KAMERA_ASSIGN_OR_RETURN(auto disk,
                            DiskTier::open(opts.store_dir, model.fingerprint, model.kv_layout()));
    co.tiers.push_back(disk);
  }
  if (!opts.redis_url.empty()) {
    KAMERA_ASSIGN_OR_RETURN(
        auto redis, RedisTier::open(opts.redis_url, model.fingerprint, model.kv_layout(), {}));
    co.tiers.push_back(redis);
  }
  KAMERA_ASSIGN_OR_RETURN(ctx, Context::create(model_ptr, co));
  windows = std::make_unique<WindowRegistry>(
      *ctx, [this](const json& b) { return chunk_content(b, model, opts.max_chunk_tokens); });
  scheduler = std::make_unique<Scheduler>(*ctx, *windows, metrics,
                                          SchedulerOptions{opts.max_queue, opts.max_active});
  return Status::Ok();
}

Status Server::Impl::bind() {
  http.new_task_queue = [n = opts.http_threads] {
    return new httplib::ThreadPool(size_t(std::max(2, n)));
  };
  http.set_payload_max_length(opts.max_body_bytes);
  http.set_error_handler([](Req, Res res) {
    if (res.body.empty()) {
      const std::string msg = res.status == 413   ? "request body too large"
                              : res.status == 404 ? "no such endpoint"
                                                  : "request failed";
      res.set_content(dump(error_body({res.status, msg})), "application/json");
    }
  });
  routes();
  if (opts.port == 0) {
    bound_port = http.bind_to_any_port(opts.host);
    if (bound_port <= 0)
      return make_error(ErrorCode::InvalidArgument, "serve: cannot bind {}:(any port)", opts.host);
    return Status::Ok();
  }
  if (!http.bind_to_port(opts.host, opts.port))
    return make_error(ErrorCode::InvalidArgument,
                      "serve: cannot bind {}:{} (in use, or not allowed)", opts.host, opts.port);
  bound_port = opts.port;
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
  KAMERA_TRY(s.bind());
  s.scheduler->start();
  s.http_thread = std::thread([&s] { s.http.listen_after_bind(); });
  while (!s.http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

int Server::port() const {
  return impl_->bound_port;
}

void Server::wait() {
  std::unique_lock<std::mutex> lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [this] { return impl_->stopped.load(); });
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  // Scheduler first: waiting handlers get answers (errors for queued work), then HTTP can drain.
  if (s.scheduler) s.scheduler->stop();
  s.http.stop();
  if (s.http_thread.joinable()) s.http_thread.join();
  if (s.windows) s.windows->clear();
  std::lock_guard<std::mutex> lock(s.stop_mu);
  s.stop_cv.notify_all();
}

}  // namespace kamera
