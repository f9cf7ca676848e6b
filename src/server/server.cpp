#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "model/forward.h"
#include "model/sampler.h"
#include "reuse/chunk_cache.h"
#include "reuse/disk_tier.h"
#include "server/metrics.h"
#include "server/redis_tier.h"
#include "window/window.h"

namespace kamera {

using json = nlohmann::json;

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// An HTTP-level failure: status code and message, answered as {"error": {...}}.
struct HttpError {
  int status;
  std::string message;
  std::string type = "invalid_request_error";
};

// The HTTP status of a failed operation, from its error code.
int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::CorruptData:
      return 400;
    case ErrorCode::NotFound:
      return 404;
    case ErrorCode::Unsupported:
      return 501;
    case ErrorCode::OutOfMemory:
      return 503;
    case ErrorCode::Internal:
    case ErrorCode::Io:
      return 500;
  }
  return 500;
}

HttpError http_error(const Error& e) {
  const int status = http_status(e.code);
  return {status, e.message,
          status == 404  ? "not_found_error"
          : status < 500 ? "invalid_request_error"
                         : "server_error"};
}

json error_body(const HttpError& e) {
  return json{{"error", {{"message", e.message}, {"type", e.type}, {"code", e.status}}}};
}

// One piece of a prompt: text, or a reference to a cached chunk.
struct PromptPart {
  bool is_chunk = false;
  std::string text;
  ChunkId id;
};

// What the HTTP side learns about a generation, event by event.
struct Event {
  enum Kind { Text, Done, Error } kind;
  std::string text;
  json info;  // Done: usage and finish reason; Error: error body
  int status = 200;
};

class Channel {
 public:
  void push(Event e) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(e));
    cv_.notify_all();
  }
  Event pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !q_.empty(); });
    Event e = std::move(q_.front());
    q_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> q_;
};

struct GenRequest {
  std::vector<PromptPart> parts;  // the last one is the query (text)
  int max_tokens = 64;
  SamplerParams sampling;
  ServePolicy policy = ServePolicy::Patch;
  int rank = 32;
  bool deep_half = false;
  std::string window_id;  // non-empty: generate after this window's content (on a fork)
};

// A generation being decoded by the scheduler.
struct Generation {
  GenRequest req;
  std::shared_ptr<Channel> out;
  std::shared_ptr<std::atomic<bool>> cancelled;
  SeqId seq = -1;
  std::unique_ptr<Window> window_fork;  // keeps the forked sequence alive
  std::unique_ptr<Sampler> sampler;
  int32_t last = 0;
  int32_t next_pos = 0;
  int generated = 0;
  json usage;
  double t_submit = 0, t_first = 0;
};

// Work for the scheduler thread: an admission of a generation, or an operation on the engine.
struct Job {
  std::unique_ptr<Generation> gen;   // when set: a generation to admit
  std::function<void(bool run)> op;  // otherwise: run (true) or cancel (false) on shutdown
};

}  // namespace

struct Server::Impl {
  std::shared_ptr<const Model> model_ptr;
  const Model& model;
  ServerOptions opts;
  ServerMetrics metrics;
  httplib::Server http;
  std::thread http_thread, sched_thread;
  int bound_port = 0;

  // Owned by the scheduler thread once started.
  // The model's engine, KV pool, chunk store and cache (built by start()); the pointers below
  // are views into it.
  std::unique_ptr<Context> ctx;
  KvPool* pool = nullptr;
  Engine* engine = nullptr;
  ChunkStore* store = nullptr;
  ChunkCache* cache = nullptr;
  std::map<std::string, std::unique_ptr<Window>> windows;
  int window_counter = 0;
  std::vector<std::unique_ptr<Generation>> active;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool stopping = false;
  std::atomic<int> queued{0};
  std::atomic<bool> stopped{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;

  Impl(std::shared_ptr<const Model> m, const ServerOptions& o)
      : model_ptr(std::move(m)), model(*model_ptr), opts(o) {}

  // ---- scheduler side ------------------------------------------------------------------

  void scheduler_loop() {
    for (;;) {
      std::vector<Job> batch;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty() || !active.empty(); });
        if (stopping) break;
        // Operations always; admissions while there is room to decode them.
        while (!queue.empty()) {
          if (queue.front().gen && int(active.size() + batch.size()) >= opts.max_active) break;
          batch.push_back(std::move(queue.front()));
          queue.pop_front();
        }
        queued = int(queue.size());
      }
      for (Job& j : batch) {
        if (j.gen) {
          admit(std::move(j.gen));
        } else {
          j.op(true);
        }
      }
      if (!active.empty()) decode_step();
    }
    for (auto& g : active) finish(*g, "abort");
    active.clear();
  }

  // Builds the chunk list of a prompt (all parts but the query) and the query content.
  Result<std::pair<std::vector<ChunkContent>, ChunkContent>> resolve(const GenRequest& r) {
    std::vector<ChunkContent> chunks;
    const Tokenizer* tok = model.tokenizer ? &*model.tokenizer : nullptr;
    auto text_content = [&](const std::string& text, bool first) -> Result<ChunkContent> {
      if (!tok)
        return make_error(ErrorCode::InvalidArgument,
                          "this model has no tokenizer: send token chunks");
      auto ids = first ? tok->encode(text, false) : tok->encode_raw(text);
      if (ids.empty())
        return make_error(ErrorCode::InvalidArgument, "a text part is empty after tokenization");
      return ChunkContent::from_tokens(std::move(ids));
    };
    for (size_t i = 0; i + 1 < r.parts.size(); ++i) {
      const PromptPart& p = r.parts[i];
      if (p.is_chunk) {
        auto e = store->find_canonical(p.id);
        if (!e) return make_error(ErrorCode::NotFound, "unknown chunk id {}", p.id.hex());
        chunks.push_back(e->content);
      } else {
        auto c = text_content(p.text, i == 0);
        if (!c.ok()) return c.error();
        chunks.push_back(std::move(c.value()));
      }
    }
    auto q = text_content(r.parts.back().text, r.parts.size() == 1);
    if (!q.ok()) return q.error();
    return std::make_pair(std::move(chunks), std::move(q.value()));
  }

  void fail_gen(Generation& g, int status, const std::string& msg) {
    g.out->push({Event::Error, "",
                 error_body({status, msg, status < 500 ? "invalid_request_error" : "server_error"}),
                 status});
  }

  void admit(std::unique_ptr<Generation> gp) {
    Generation& g = *gp;
    if (g.cancelled->load()) return;
    const int32_t ctx = model.cfg.ctx_len;
    json segments = json::array();
    int64_t reused = 0, recomputed = 0, prompt_tokens = 1;
    int32_t pos = 0;
    ChunkContent query;
    if (!g.req.window_id.empty()) {
      auto it = windows.find(g.req.window_id);
      if (it == windows.end()) return fail_gen(g, 404, "unknown window " + g.req.window_id);
      auto f = it->second->fork();
      if (!f.ok()) return fail_gen(g, 503, f.message());
      g.window_fork = std::move(f.value());
      g.seq = g.window_fork->sequence();
      for (const WindowSlot& s : g.window_fork->slots()) {
        const char* src = s.clean    ? "clean-view"
                          : !s.patch ? (s.conditioned ? "canonical" : "blind")
                          : s.orbit  ? "patch-orbit"
                                     : "patch";
        segments.push_back({{"id", s.id.hex()},
                            {"tokens", s.n_tokens()},
                            {"position", s.position},
                            {"source", src}});
        reused += s.n_tokens();
        metrics.seg_patch_orbit += s.orbit;
      }
      pos = g.window_fork->next_position();
      auto tok = model.tokenizer;
      if (!tok) return fail_gen(g, 400, "this model has no tokenizer");
      auto ids = tok->encode_raw(g.req.parts.back().text);
      if (ids.empty()) return fail_gen(g, 400, "the prompt is empty after tokenization");
      query = ChunkContent::from_tokens(std::move(ids));
    } else {
      auto res = resolve(g.req);
      if (!res.ok()) return fail_gen(g, http_status(res.code()), res.message());
      auto& [chunks, q] = *res;
      int64_t end = cache->anchor_extent() + q.extent() + g.req.max_tokens;
      for (const auto& c : chunks) end += c.extent();
      if (end > ctx)
        return fail_gen(g, 400,
                        fmt::format("the prompt ({} positions) plus max_tokens ({}) exceeds "
                                    "the model's context of {}",
                                    end - g.req.max_tokens, g.req.max_tokens, ctx));
      g.seq = pool->create_sequence();
      ServeOptions so;
      so.policy = g.req.policy;
      so.patch.rank = g.req.rank;
      so.patch.cap_rank = true;
      if (g.req.deep_half) so.patch.layers.kind = LayerSet::Kind::DeepHalf;
      auto rep = cache->assemble(g.seq, chunks, so);
      if (!rep.ok()) {
        pool->free_sequence(g.seq);
        g.seq = -1;
        return fail_gen(g, 503, rep.message());
      }
      for (const SegmentReport& s : rep->segments) {
        segments.push_back({{"id", s.id.hex()},
                            {"tokens", s.n_tokens},
                            {"position", s.position},
                            {"source", segment_source_name(s.source)}});
        switch (s.source) {
          case SegmentSource::Canonical:
            ++metrics.seg_canonical;
            break;
          case SegmentSource::PatchHit:
            ++metrics.seg_patch_exact;
            break;
          case SegmentSource::PatchFormed:
            ++metrics.seg_patch_formed;
            break;
          case SegmentSource::Blind:
            ++metrics.seg_blind;
            break;
          case SegmentSource::Reprefilled:
            ++metrics.seg_reprefilled;
            break;
        }
      }
      reused = rep->tokens_reused;
      recomputed = rep->tokens_computed;
      pos = rep->next_position;
      query = std::move(q);
    }
    for (const auto& s : segments) prompt_tokens += s["tokens"].get<int64_t>();
    if (pos + query.extent() + g.req.max_tokens > ctx)
      return fail_gen(
          g, 400, fmt::format("the prompt plus max_tokens exceeds the model's context of {}", ctx));
    auto logits = cache->forward_chunk(g.seq, query, pos, LogitsMode::Last);
    if (!logits.ok()) {
      if (!g.window_fork) pool->free_sequence(g.seq);
      g.window_fork.reset();
      return fail_gen(g, 503, logits.message());
    }
    recomputed += query.n();
    prompt_tokens += query.n();
    g.next_pos = pos + query.extent();
    g.sampler = std::make_unique<Sampler>(g.req.sampling);
    g.usage = {{"prompt_tokens", prompt_tokens},
               {"kamera",
                {{"reused_tokens", reused},
                 {"recomputed_tokens", recomputed},
                 {"policy", g.req.policy == ServePolicy::Patch   ? "patch"
                            : g.req.policy == ServePolicy::Blind ? "blind"
                                                                 : "reprefill"},
                 {"segments", segments}}}};
    metrics.prompt_tokens += prompt_tokens;
    metrics.tokens_reused += reused;
    metrics.tokens_recomputed += recomputed;
    if (emit(g, g.sampler->sample(*logits))) active.push_back(std::move(gp));
  }

  // Sends one sampled token; returns false when the generation ended.
  bool emit(Generation& g, int32_t token) {
    const Tokenizer* tok = model.tokenizer ? &*model.tokenizer : nullptr;
    if (g.generated == 0) {
      g.t_first = now_s();
      metrics.ttft_seconds.observe(g.t_first - g.t_submit);
    }
    const bool eos = tok && (token == tok->eos() || token == tok->bos());
    if (!eos) {
      g.out->push(
          {Event::Text, tok ? tok->decode(g.last, token) : fmt::format("<{}>", token), {}, 200});
      ++g.generated;
      ++metrics.tokens_generated;
      g.last = token;
    }
    if (eos) return finish(g, "stop"), false;
    if (g.generated >= g.req.max_tokens) return finish(g, "length"), false;
    if (g.cancelled->load()) return finish(g, "cancelled"), false;
    return true;
  }

  void finish(Generation& g, const char* reason) {
    g.usage["completion_tokens"] = g.generated;
    g.usage["total_tokens"] = g.usage["prompt_tokens"].get<int64_t>() + g.generated;
    g.out->push({Event::Done, "", {{"usage", g.usage}, {"finish_reason", reason}}, 200});
    if (g.window_fork) {
      g.window_fork.reset();  // frees the fork's sequence
    } else if (g.seq >= 0) {
      pool->free_sequence(g.seq);
    }
    g.seq = -1;
  }

  void decode_step() {
    std::vector<Engine::DecodeRow> rows;
    for (auto& g : active) rows.push_back({g->seq, g->last, Pos::linear(g->next_pos)});
    const double t0 = now_s();
    auto logits = engine->decode(*pool, rows);
    const double dt = now_s() - t0;
    if (!logits.ok()) {  // the pool is full: end the newest generation and retry next step
      Generation& g = *active.back();
      fail_gen(g, 503, "KV pool full: " + logits.message());
      finish(g, "error");
      active.pop_back();
      return;
    }
    ++metrics.decode_steps;
    metrics.decode_rows += int64_t(rows.size());
    if (dt > 0) metrics.decode_tokens_per_s = double(rows.size()) / dt;
    const int V = model.cfg.n_vocab;
    std::vector<std::unique_ptr<Generation>> keep;
    for (size_t i = 0; i < active.size(); ++i) {
      Generation& g = *active[i];
      ++g.next_pos;
      const int32_t t = g.sampler->sample(std::span<const float>(*logits).subspan(i * V, V));
      if (emit(g, t)) keep.push_back(std::move(active[i]));
    }
    active = std::move(keep);
  }

  // ---- handler side -----------------------------------------------------------------------

  // Runs fn on the scheduler thread and returns its result; 429 when the queue is full.
  Result<json> on_scheduler(std::function<Result<json>()> fn, HttpError* busy) {
    auto promise = std::make_shared<std::promise<Result<json>>>();
    auto fut = promise->get_future();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return make_error(ErrorCode::InvalidArgument, "the server is stopping");
      if (int(queue.size()) >= opts.max_queue) {
        *busy = {429, "the server is busy: too many queued requests", "rate_limit_error"};
        ++metrics.rejected_busy;
        return make_error(ErrorCode::InvalidArgument, "busy");
      }
      Job j;
      j.op = [promise, fn](bool run) {
        promise->set_value(
            run ? fn()
                : Result<json>(make_error(ErrorCode::InvalidArgument, "the server is stopping")));
      };
      queue.push_back(std::move(j));
      queued = int(queue.size());
    }
    cv.notify_one();
    return fut.get();
  }

  bool submit(std::unique_ptr<Generation> g, HttpError* busy) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping || int(queue.size()) >= opts.max_queue) {
        *busy = {429, "the server is busy: too many queued requests", "rate_limit_error"};
        ++metrics.rejected_busy;
        return false;
      }
      Job j;
      j.gen = std::move(g);
      queue.push_back(std::move(j));
      queued = int(queue.size());
    }
    cv.notify_one();
    return true;
  }

  void reply(httplib::Response& res, const json& body, int status = 200) {
    res.status = status;
    metrics.responses_4xx += status >= 400 && status < 500;
    metrics.responses_5xx += status >= 500;
    res.set_content(dump(body), "application/json");
  }
  void reply_error(httplib::Response& res, const HttpError& e) {
    if (e.status == 429) res.set_header("Retry-After", "1");
    reply(res, error_body(e), e.status);
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (opts.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opts.api_key) return true;
    reply_error(
        res, {401, "missing or wrong API key (Authorization: Bearer KEY)", "authentication_error"});
    return false;
  }

  static Result<json> parse_body(const httplib::Request& req) {
    try {
      json j = json::parse(req.body);
      if (!j.is_object())
        return make_error(ErrorCode::InvalidArgument, "the request body must be a JSON object");
      return j;
    } catch (const std::exception& e) {
      return make_error(ErrorCode::CorruptData, "malformed JSON: {}", e.what());
    }
  }

  // Reads "prompt" (string or parts array) of /v1/completions, or "messages" of chat.
  static Result<std::vector<PromptPart>> prompt_parts(const json& body, bool chat) {
    std::vector<PromptPart> parts;
    auto add_text = [&](const std::string& t) {
      if (!parts.empty() && !parts.back().is_chunk) {
        parts.back().text += t;
      } else {
        parts.push_back({false, t, {}});
      }
    };
    auto add_items = [&](const json& items) -> Status {
      if (items.is_string()) {
        add_text(items.get<std::string>());
        return Status::Ok();
      }
      if (!items.is_array())
        return make_error(ErrorCode::InvalidArgument,
                          "content must be a string or an array of parts");
      for (const json& it : items) {
        if (it.is_string()) {
          add_text(it.get<std::string>());
          continue;
        }
        if (!it.is_object() || !it.contains("type") || !it["type"].is_string())
          return make_error(ErrorCode::InvalidArgument,
                            "each part must be a string or an object with a \"type\"");
        const std::string type = it["type"].get<std::string>();
        if (type == "text") {
          if (!it.contains("text") || !it["text"].is_string())
            return make_error(ErrorCode::InvalidArgument, "a text part needs \"text\"");
          add_text(it["text"].get<std::string>());
        } else if (type == "chunk") {
          if (!it.contains("id") || !it["id"].is_string())
            return make_error(ErrorCode::InvalidArgument, "a chunk part needs \"id\"");
          auto id = ChunkId::from_hex(it["id"].get<std::string>());
          if (!id)
            return make_error(ErrorCode::InvalidArgument, "chunk id '{}' is not 32 hex digits",
                              it["id"].get<std::string>());
          parts.push_back({true, "", *id});
        } else {
          return make_error(ErrorCode::InvalidArgument, "unknown part type '{}' (text, chunk)",
                            type);
        }
      }
      return Status::Ok();
    };
    if (chat) {
      if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        return make_error(ErrorCode::InvalidArgument, "\"messages\" must be a non-empty array");
      for (const json& m : body["messages"]) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
            !m.contains("content"))
          return make_error(ErrorCode::InvalidArgument,
                            "each message needs \"role\" and \"content\"");
        add_text(m["role"].get<std::string>() + ": ");
        KAMERA_TRY(add_items(m["content"]));
        add_text("\n");
      }
      add_text("assistant:");
    } else {
      if (!body.contains("prompt"))
        return make_error(ErrorCode::InvalidArgument, "missing \"prompt\"");
      KAMERA_TRY(add_items(body["prompt"]));
    }
    if (parts.empty() || parts.back().is_chunk || parts.back().text.empty())
      return make_error(ErrorCode::InvalidArgument, "the prompt must end with text (the query)");
    return parts;
  }

  Result<GenRequest> gen_request(const json& body, bool chat) {
    GenRequest r;
    auto parts = prompt_parts(body, chat);
    if (!parts.ok()) return parts.error();
    r.parts = std::move(parts.value());
    auto num = [&](const char* key, double dflt, double lo, double hi) -> Result<double> {
      if (!body.contains(key) || body[key].is_null()) return dflt;
      if (!body[key].is_number())
        return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a number", key);
      const double v = body[key].get<double>();
      if (!(v >= lo && v <= hi))
        return make_error(ErrorCode::InvalidArgument, "\"{}\" = {} is outside [{}, {}]", key, v, lo,
                          hi);
      return v;
    };
    auto mt = num("max_tokens", opts.default_max_tokens, 1, model.cfg.ctx_len);
    auto temp = num("temperature", 0.0, 0.0, 100.0);
    auto top_p = num("top_p", 1.0, 0.0, 1.0);
    auto top_k = num("top_k", 0, 0, 1e6);
    auto seed = num("seed", 0, 0, 9e15);
    auto rank = num("rank", 32, 1, 1e6);
    for (const auto* x : {&mt, &temp, &top_p, &top_k, &seed, &rank})
      if (!x->ok()) return x->error();
    r.max_tokens = int(*mt);
    r.sampling.temperature = float(*temp);
    r.sampling.top_p = float(*top_p);
    r.sampling.top_k = int(*top_k);
    r.sampling.seed = uint64_t(*seed);
    r.rank = int(*rank);
    if (body.contains("reuse")) {
      const json& p = body["reuse"];
      const std::string s = p.is_string() ? p.get<std::string>() : "";
      if (s == "patch")
        r.policy = ServePolicy::Patch;
      else if (s == "blind")
        r.policy = ServePolicy::Blind;
      else if (s == "reprefill")
        r.policy = ServePolicy::Reprefill;
      else
        return make_error(ErrorCode::InvalidArgument,
                          "\"reuse\" must be patch, blind or reprefill");
    }
    if (body.contains("deep_half"))
      r.deep_half = body["deep_half"].is_boolean() && body["deep_half"].get<bool>();
    return r;
  }

  // Completions (plain, chat, or after a window), streamed as SSE or answered at the end.
  void generate(const httplib::Request& req, httplib::Response& res, bool chat,
                const std::string& window) {
    (chat ? metrics.requests_chat : metrics.requests_completions)++;
    auto body = parse_body(req);
    if (!body.ok()) return reply_error(res, {400, body.message()});
    auto r = gen_request(*body, chat);
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
    HttpError busy{0, ""};
    if (!submit(std::move(g), &busy)) return reply_error(res, busy);
    const std::string id = fmt::format("cmpl-{:x}", uint64_t(now_s() * 1e6));
    const int64_t created = int64_t(std::time(nullptr));
    const std::string object = chat ? "chat.completion" : "text_completion";
    auto choice_piece = [chat](const std::string& text, const json& finish) {
      return chat ? json{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", finish}}
                  : json{{"index", 0}, {"text", text}, {"finish_reason", finish}};
    };
    if (!stream) {
      std::string text;
      for (;;) {
        Event e = out->pop();
        if (e.kind == Event::Text) {
          text += e.text;
          continue;
        }
        if (e.kind == Event::Error) return reply(res, e.info, e.status);
        json choice =
            chat ? json{{"index", 0},
                        {"message", {{"role", "assistant"}, {"content", text}}},
                        {"finish_reason", e.info["finish_reason"]}}
                 : json{{"index", 0}, {"text", text}, {"finish_reason", e.info["finish_reason"]}};
        return reply(res, {{"id", id},
                           {"object", object},
                           {"created", created},
                           {"model", opts.model_name},
                           {"choices", json::array({choice})},
                           {"usage", e.info["usage"]}});
      }
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, out, cancelled, id, created, chat, choice_piece](size_t, httplib::DataSink& sink) {
          Event e = out->pop();
          const std::string obj = chat ? "chat.completion.chunk" : "text_completion";
          auto send = [&](const json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          bool ok = true;
          if (e.kind == Event::Text) {
            ok = send({{"id", id},
                       {"object", obj},
                       {"created", created},
                       {"model", opts.model_name},
                       {"choices", json::array({choice_piece(e.text, nullptr)})}});
          } else if (e.kind == Event::Error) {
            send(e.info);
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
            return true;
          } else {
            send({{"id", id},
                  {"object", obj},
                  {"created", created},
                  {"model", opts.model_name},
                  {"choices", json::array({choice_piece("", e.info["finish_reason"])})},
                  {"usage", e.info["usage"]}});
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
            return true;
          }
          if (!ok) cancelled->store(true);  // the client went away: stop decoding for it
          return ok;
        },
        [cancelled](bool success) {
          if (!success) cancelled->store(true);
        });
  }

  // ---- chunks -----------------------------------------------------------------------------

  Result<ChunkContent> chunk_content(const json& b) {
    const ModelConfig& c = model.cfg;
    const int max_tokens = opts.max_chunk_tokens > 0 ? opts.max_chunk_tokens : c.ctx_len;
    ChunkContent cc;
    const int kinds =
        int(b.contains("text")) + int(b.contains("tokens")) + int(b.contains("embeddings"));
    if (kinds != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "give exactly one of \"text\", \"tokens\", \"embeddings\"");
    if (b.contains("text")) {
      if (!b["text"].is_string())
        return make_error(ErrorCode::InvalidArgument, "\"text\" must be a string");
      if (!model.tokenizer)
        return make_error(ErrorCode::InvalidArgument,
                          "this model has no tokenizer: send \"tokens\"");
      auto ids = model.tokenizer->encode_raw(b["text"].get<std::string>());
      if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "the text is empty");
      cc = ChunkContent::from_tokens(std::move(ids));
    } else if (b.contains("tokens")) {
      if (!b["tokens"].is_array() || b["tokens"].empty())
        return make_error(ErrorCode::InvalidArgument, "\"tokens\" must be a non-empty array");
      std::vector<int32_t> ids;
      for (const json& t : b["tokens"]) {
        if (!t.is_number_integer())
          return make_error(ErrorCode::InvalidArgument, "\"tokens\" must hold integers");
        const int64_t v = t.get<int64_t>();
        if (v < 0 || v >= c.n_vocab)
          return make_error(ErrorCode::InvalidArgument,
                            "token id {} is outside the vocabulary [0, {})", v, c.n_vocab);
        ids.push_back(int32_t(v));
      }
      cc = ChunkContent::from_tokens(std::move(ids));
    } else {
      const json& e = b["embeddings"];
      if (!e.is_array() || e.empty())
        return make_error(ErrorCode::InvalidArgument,
                          "\"embeddings\" must be a non-empty array of rows");
      if (int(e.size()) > max_tokens)
        return make_error(ErrorCode::InvalidArgument,
                          "{} embedding rows exceed the chunk limit of {}", e.size(), max_tokens);
      cc.dim = c.dim;
      cc.embeddings.reserve(e.size() * size_t(c.dim));
      for (size_t r = 0; r < e.size(); ++r) {
        if (!e[r].is_array() || int(e[r].size()) != c.dim)
          return make_error(ErrorCode::InvalidArgument,
                            "embedding row {} must be an array of {} numbers (the model's width)",
                            r, c.dim);
        for (const json& x : e[r]) {
          if (!x.is_number())
            return make_error(ErrorCode::InvalidArgument, "embedding row {} holds a non-number", r);
          const double v = x.get<double>();
          if (!std::isfinite(v))
            return make_error(ErrorCode::InvalidArgument,
                              "embedding row {} holds a non-finite value", r);
          cc.embeddings.push_back(float(v));
        }
      }
      if (b.contains("positions")) {
        const json& p = b["positions"];
        if (!p.is_array() || p.size() != e.size())
          return make_error(ErrorCode::InvalidArgument,
                            "\"positions\" must hold one [t, h, w] per embedding row ({})",
                            e.size());
        for (const json& q : p) {
          if (!q.is_array() || q.size() != 3 || !q[0].is_number_integer() ||
              !q[1].is_number_integer() || !q[2].is_number_integer())
            return make_error(ErrorCode::InvalidArgument,
                              "each position must be [t, h, w] integers");
          cc.layout.push_back({q[0].get<int32_t>(), q[1].get<int32_t>(), q[2].get<int32_t>()});
        }
      } else {
        for (size_t r = 0; r < e.size(); ++r) cc.layout.push_back(Pos::linear(int32_t(r)));
      }
    }
    if (cc.n() > max_tokens)
      return make_error(ErrorCode::InvalidArgument, "the chunk has {} tokens, over the limit of {}",
                        cc.n(), max_tokens);
    KAMERA_TRY(cc.validate(c.n_vocab, c.dim));
    if (1 + cc.extent() > c.ctx_len)
      return make_error(ErrorCode::InvalidArgument,
                        "the chunk's positions reach {}, past the model's context of {}",
                        cc.extent(), c.ctx_len);
    return cc;
  }

  static json chunk_json(const CanonicalEntry& e) {
    return {{"id", e.id.hex()},
            {"object", "chunk"},
            {"n_tokens", e.content.n()},
            {"extent", e.content.extent()},
            {"kind", e.content.is_tokens() ? "tokens" : "embeddings"},
            {"bytes", e.kv.bytes()}};
  }

  // ---- windows ------------------------------------------------------------------------------

  Result<Window*> window(const std::string& id) {
    auto it = windows.find(id);
    if (it == windows.end()) return make_error(ErrorCode::NotFound, "unknown window {}", id);
    return it->second.get();
  }

  json window_json(const std::string& id, const Window& w) {
    json slots = json::array();
    const auto stale = w.stale_slots();
    for (size_t i = 0; i < w.slots().size(); ++i) {
      const WindowSlot& s = w.slots()[i];
      slots.push_back({{"index", i},
                       {"id", s.id.hex()},
                       {"position", s.position},
                       {"n_tokens", s.n_tokens()},
                       {"conditioned", s.conditioned},
                       {"orbit", s.orbit},
                       {"clean", s.clean},
                       {"stale", std::find(stale.begin(), stale.end(), int(i)) != stale.end()}});
    }
    return {
        {"id", id}, {"object", "window"}, {"slots", slots}, {"next_position", w.next_position()}};
  }

  Result<WindowPolicy> window_policy(const json& b) {
    WindowPolicy p;
    if (b.contains("rank")) {
      if (!b["rank"].is_number_integer() || b["rank"].get<int>() < 1)
        return make_error(ErrorCode::InvalidArgument, "\"rank\" must be a positive integer");
      p.rank = b["rank"].get<int>();
    }
    if (b.contains("deep_half"))
      p.deep_half = b["deep_half"].is_boolean() && b["deep_half"].get<bool>();
    if (b.contains("form_on_miss"))
      p.form_on_miss = !b["form_on_miss"].is_boolean() || b["form_on_miss"].get<bool>();
    if (b.contains("patch_byte_budget")) {
      if (!b["patch_byte_budget"].is_number_unsigned())
        return make_error(ErrorCode::InvalidArgument, "\"patch_byte_budget\" must be a byte count");
      p.patch_byte_budget = b["patch_byte_budget"].get<size_t>();
    }
    return p;
  }

  // Runs one window edit; the body was parsed on the handler thread.
  Result<json> window_op(const std::string& id, const std::string& op, const json& b) {
    auto w = window(id);
    if (!w.ok()) return w.error();
    Window& win = **w;
    auto slot_of = [&](const char* key) -> Result<int> {
      if (!b.contains(key) || !b[key].is_number_integer())
        return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a slot index", key);
      return b[key].get<int>();
    };
    if (op == "append") {
      Result<ChunkContent> c =
          make_error(ErrorCode::InvalidArgument, "give \"chunk\" (an id) or the chunk's content");
      if (b.contains("chunk")) {
        auto cid = b["chunk"].is_string() ? ChunkId::from_hex(b["chunk"].get<std::string>())
                                          : std::nullopt;
        if (!cid)
          return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
        auto e = store->find_canonical(*cid);
        if (!e) return make_error(ErrorCode::NotFound, "unknown chunk id {}", cid->hex());
        c = e->content;
      } else {
        c = chunk_content(b);
      }
      if (!c.ok()) return c.error();
      const bool front = b.contains("front") && b["front"].is_boolean() && b["front"].get<bool>();
      KAMERA_TRY(front ? win.admit_front(*c) : win.admit_back(*c));
    } else if (op == "evict") {
      if (b.contains("end") && b["end"].is_string()) {
        const std::string end = b["end"].get<std::string>();
        if (win.slots().empty())
          return make_error(ErrorCode::InvalidArgument, "the window is empty");
        KAMERA_TRY(end == "front"  ? win.evict_front()
                   : end == "back" ? win.evict_back()
                                   : Status(make_error(ErrorCode::InvalidArgument,
                                                       "\"end\" must be front or back")));
      } else {
        auto s = slot_of("slot");
        if (!s.ok()) return s.error();
        KAMERA_TRY(win.evict(*s));
      }
    } else if (op == "recall") {
      auto cid = b.contains("chunk") && b["chunk"].is_string()
                     ? ChunkId::from_hex(b["chunk"].get<std::string>())
                     : std::nullopt;
      if (!cid)
        return make_error(ErrorCode::InvalidArgument, "\"chunk\" must be a 32-hex-digit id");
      const int at = b.contains("at") && b["at"].is_number_integer() ? b["at"].get<int>()
                                                                     : int(win.slots().size());
      const std::string mode =
          b.contains("mode") && b["mode"].is_string() ? b["mode"].get<std::string>() : "fresh";
      if (mode != "fresh" && mode != "stale" && mode != "blind")
        return make_error(ErrorCode::InvalidArgument, "\"mode\" must be fresh, stale or blind");
      KAMERA_TRY(win.recall(*cid, at,
                            mode == "fresh"   ? RecallMode::Fresh
                            : mode == "stale" ? RecallMode::Stale
                                              : RecallMode::Blind));
    } else if (op == "reorder") {
      if (!b.contains("order") || !b["order"].is_array())
        return make_error(ErrorCode::InvalidArgument, "\"order\" must be an array of slot indices");
      std::vector<int> order;
      for (const json& x : b["order"]) {
        if (!x.is_number_integer())
          return make_error(ErrorCode::InvalidArgument, "\"order\" must hold integers");
        order.push_back(x.get<int>());
      }
      const std::string mode =
          b.contains("mode") && b["mode"].is_string() ? b["mode"].get<std::string>() : "orbit";
      const ReorderMode m = mode == "transfer" ? ReorderMode::Transfer
                            : mode == "exact"  ? ReorderMode::Exact
                            : mode == "blind"  ? ReorderMode::Blind
                                               : ReorderMode::Orbit;
      if (mode != "transfer" && mode != "exact" && mode != "orbit" && mode != "blind")
        return make_error(ErrorCode::InvalidArgument,
                          "\"mode\" must be transfer, exact, orbit or blind");
      KAMERA_TRY(win.reorder(order, m));
    } else if (op == "refresh") {
      for (int s : win.stale_slots()) KAMERA_TRY(win.refresh(s));
    } else if (op == "fork") {
      auto f = win.fork();
      if (!f.ok()) return f.error();
      const std::string fid = fmt::format("w{}", ++window_counter);
      json j = window_json(fid, **f);
      windows[fid] = std::move(f.value());
      return j;
    } else {
      return make_error(ErrorCode::InvalidArgument, "unknown window operation '{}'", op);
    }
    return window_json(id, win);
  }

  // ---- metrics ------------------------------------------------------------------------------

  std::string render_metrics() {
    std::string out;
    auto counter = [&](const std::string& name, const std::string& help, const std::string& labels,
                       double v) {
      out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{} {}\n", name, help, name, name,
                         labels, v);
    };
    auto gauge = [&](const std::string& name, const std::string& help, double v) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
    };
    out +=
        "# HELP kamera_requests_total HTTP requests by endpoint\n# TYPE kamera_requests_total "
        "counter\n";
    out += fmt::format("kamera_requests_total{{endpoint=\"completions\"}} {}\n",
                       metrics.requests_completions.load());
    out += fmt::format("kamera_requests_total{{endpoint=\"chat\"}} {}\n",
                       metrics.requests_chat.load());
    out += fmt::format("kamera_requests_total{{endpoint=\"chunks\"}} {}\n",
                       metrics.requests_chunks.load());
    out += fmt::format("kamera_requests_total{{endpoint=\"windows\"}} {}\n",
                       metrics.requests_windows.load());
    counter("kamera_responses_4xx_total", "client errors answered", "",
            double(metrics.responses_4xx));
    counter("kamera_responses_5xx_total", "server errors answered", "",
            double(metrics.responses_5xx));
    counter("kamera_rejected_busy_total", "requests refused with 429 (queue full)", "",
            double(metrics.rejected_busy));
    out += metrics.ttft_seconds.render("kamera_ttft_seconds", "time to first token");
    counter("kamera_tokens_generated_total", "completion tokens", "",
            double(metrics.tokens_generated));
    counter("kamera_prompt_tokens_total", "prompt tokens", "", double(metrics.prompt_tokens));
    counter("kamera_tokens_reused_total", "prompt tokens served from the chunk store", "",
            double(metrics.tokens_reused));
    counter("kamera_tokens_recomputed_total", "prompt tokens that went through a forward", "",
            double(metrics.tokens_recomputed));
    gauge("kamera_decode_tokens_per_second", "tokens per second of the last batched decode step",
          metrics.decode_tokens_per_s.load());
    counter("kamera_decode_steps_total", "batched decode steps", "", double(metrics.decode_steps));
    counter("kamera_decode_rows_total",
            "sequences decoded, summed over steps (rows / steps = batch size)", "",
            double(metrics.decode_rows));
    out +=
        "# HELP kamera_segments_total chunk segments served, by source\n# TYPE "
        "kamera_segments_total counter\n";
    for (auto [k, v] : {std::pair{"canonical", &metrics.seg_canonical},
                        {"patch_exact", &metrics.seg_patch_exact},
                        {"patch_orbit", &metrics.seg_patch_orbit},
                        {"patch_formed", &metrics.seg_patch_formed},
                        {"blind", &metrics.seg_blind},
                        {"reprefilled", &metrics.seg_reprefilled}})
      out += fmt::format("kamera_segments_total{{source=\"{}\"}} {}\n", k, v->load());
    const ChunkStore::Stats s = store->stats();
    out +=
        "# HELP kamera_store_lookups_total memory-tier lookups\n# TYPE kamera_store_lookups_total "
        "counter\n";
    out += fmt::format("kamera_store_lookups_total{{kind=\"canonical\",result=\"hit\"}} {}\n",
                       s.canonical_hits);
    out += fmt::format("kamera_store_lookups_total{{kind=\"canonical\",result=\"miss\"}} {}\n",
                       s.canonical_misses);
    out += fmt::format("kamera_store_lookups_total{{kind=\"patch\",result=\"hit\"}} {}\n",
                       s.patch_hits);
    out += fmt::format("kamera_store_lookups_total{{kind=\"patch\",result=\"miss\"}} {}\n",
                       s.patch_misses);
    out +=
        "# HELP kamera_store_evictions_total memory-tier evictions\n# TYPE "
        "kamera_store_evictions_total counter\n";
    out += fmt::format("kamera_store_evictions_total{{kind=\"canonical\"}} {}\n",
                       s.canonical_evictions);
    out += fmt::format("kamera_store_evictions_total{{kind=\"patch\"}} {}\n", s.patch_evictions);
    out += "# HELP kamera_store_bytes bytes held per tier\n# TYPE kamera_store_bytes gauge\n";
    out += fmt::format("kamera_store_bytes{{tier=\"memory\"}} {}\n", s.bytes_held());
    std::string tier_lines;
    for (const auto& t : store->tiers()) {
      const StoreTier::Stats ts = t->stats();
      out += fmt::format("kamera_store_bytes{{tier=\"{}\"}} {}\n", t->name(), ts.bytes);
      tier_lines += fmt::format(
          "kamera_tier_hits_total{{tier=\"{}\"}} {}\nkamera_tier_misses_total{{tier=\"{}\"}} {}\n"
          "kamera_tier_errors_total{{tier=\"{}\"}} {}\nkamera_tier_discarded_total{{tier=\"{}\"}} "
          "{}\n",
          t->name(), ts.hits, t->name(), ts.misses, t->name(), ts.errors, t->name(), ts.discarded);
    }
    if (!tier_lines.empty())
      out +=
          "# HELP kamera_tier_hits_total slower-tier lookups (disk, redis)\n# TYPE "
          "kamera_tier_hits_total counter\n" +
          tier_lines;
    counter("kamera_store_bytes_saved_total", "KV bytes served from the store instead of a forward",
            "", double(s.bytes_saved));
    gauge("kamera_queue_depth", "requests waiting for the scheduler", queued.load());
    return out;
  }

  void routes() {
    auto guarded = [this](auto fn) {
      return [this, fn](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        try {
          fn(req, res);
        } catch (const std::exception& e) {  // never let an exception cross the handler
          reply_error(res, {500, std::string("internal error: ") + e.what(), "server_error"});
        }
      };
    };
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      reply(res, {{"status", "ok"},
                  {"model", opts.model_name},
                  {"arch", arch_name(model.cfg.arch)},
                  {"ctx_len", model.cfg.ctx_len}});
    });
    http.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
               res.set_content(render_metrics(), "text/plain; version=0.0.4");
             }));
    http.Post("/v1/completions", guarded([this](const httplib::Request& q, httplib::Response& r) {
                generate(q, r, false, "");
              }));
    http.Post("/v1/chat/completions",
              guarded([this](const httplib::Request& q, httplib::Response& r) {
                generate(q, r, true, "");
              }));
    http.Post("/v1/chunks", guarded([this](const httplib::Request& req, httplib::Response& res) {
                ++metrics.requests_chunks;
                auto body = parse_body(req);
                if (!body.ok()) return reply_error(res, {400, body.message()});
                auto content = chunk_content(*body);
                if (!content.ok()) return reply_error(res, {400, content.message()});
                HttpError busy{0, ""};
                auto r = on_scheduler(
                    [this, c = std::move(content.value())]() -> Result<json> {
                      bool formed = false;
                      auto e = cache->canonical(c, DType::F32, &formed);
                      if (!e.ok()) return e.error();
                      json j = chunk_json(**e);
                      j["formed"] = formed;
                      return j;
                    },
                    &busy);
                if (busy.status) return reply_error(res, busy);
                if (!r.ok()) return reply_error(res, {400, r.message()});
                reply(res, *r, 201);
              }));
    http.Get(R"(/v1/chunks/([0-9a-fA-F]+))",
             guarded([this](const httplib::Request& req, httplib::Response& res) {
               ++metrics.requests_chunks;
               auto id = ChunkId::from_hex(req.matches[1].str());
               if (!id) return reply_error(res, {400, "a chunk id is 32 hex digits"});
               auto e = store->find_canonical(*id);
               if (!e)
                 return reply_error(res, {404, "unknown chunk id " + id->hex(), "not_found_error"});
               reply(res, chunk_json(*e));
             }));
    http.Delete(
        R"(/v1/chunks/([0-9a-fA-F]+))",
        guarded([this](const httplib::Request& req, httplib::Response& res) {
          ++metrics.requests_chunks;
          auto id = ChunkId::from_hex(req.matches[1].str());
          if (!id) return reply_error(res, {400, "a chunk id is 32 hex digits"});
          const bool had = store->find_canonical(*id) != nullptr;
          store->erase_canonical(*id);
          if (!had)
            return reply_error(res, {404, "unknown chunk id " + id->hex(), "not_found_error"});
          reply(res, {{"id", id->hex()}, {"object", "chunk"}, {"deleted", true}});
        }));
    http.Post("/v1/windows", guarded([this](const httplib::Request& req, httplib::Response& res) {
                ++metrics.requests_windows;
                auto body = req.body.empty() ? Result<json>(json::object()) : parse_body(req);
                if (!body.ok()) return reply_error(res, {400, body.message()});
                auto pol = window_policy(*body);
                if (!pol.ok()) return reply_error(res, {400, pol.message()});
                HttpError busy{0, ""};
                auto r = on_scheduler(
                    [this, p = *pol]() -> Result<json> {
                      auto w = Window::create(*ctx, p);
                      if (!w.ok()) return w.error();
                      const std::string id = fmt::format("w{}", ++window_counter);
                      json j = window_json(id, **w);
                      windows[id] = std::move(w.value());
                      return j;
                    },
                    &busy);
                if (busy.status) return reply_error(res, busy);
                if (!r.ok()) return reply_error(res, {503, r.message(), "server_error"});
                reply(res, *r, 201);
              }));
    http.Get(R"(/v1/windows/(w[0-9]+))",
             guarded([this](const httplib::Request& req, httplib::Response& res) {
               ++metrics.requests_windows;
               const std::string id = req.matches[1].str();
               HttpError busy{0, ""};
               auto r = on_scheduler(
                   [this, id]() -> Result<json> {
                     auto w = window(id);
                     if (!w.ok()) return w.error();
                     return window_json(id, **w);
                   },
                   &busy);
               if (busy.status) return reply_error(res, busy);
               if (!r.ok()) return reply_error(res, {404, r.message(), "not_found_error"});
               reply(res, *r);
             }));
    http.Delete(R"(/v1/windows/(w[0-9]+))",
                guarded([this](const httplib::Request& req, httplib::Response& res) {
                  ++metrics.requests_windows;
                  const std::string id = req.matches[1].str();
                  HttpError busy{0, ""};
                  auto r = on_scheduler(
                      [this, id]() -> Result<json> {
                        if (!windows.erase(id))
                          return make_error(ErrorCode::NotFound, "unknown window {}", id);
                        return json{{"id", id}, {"deleted", true}};
                      },
                      &busy);
                  if (busy.status) return reply_error(res, busy);
                  if (!r.ok()) return reply_error(res, {404, r.message(), "not_found_error"});
                  reply(res, *r);
                }));
    http.Post(R"(/v1/windows/(w[0-9]+)/completions)",
              guarded([this](const httplib::Request& q, httplib::Response& r) {
                ++metrics.requests_windows;
                generate(q, r, false, q.matches[1].str());
              }));
    http.Post(R"(/v1/windows/(w[0-9]+)/(append|evict|recall|reorder|fork|refresh))",
              guarded([this](const httplib::Request& req, httplib::Response& res) {
                ++metrics.requests_windows;
                const std::string id = req.matches[1].str(), op = req.matches[2].str();
                auto body = req.body.empty() ? Result<json>(json::object()) : parse_body(req);
                if (!body.ok()) return reply_error(res, {400, body.message()});
                HttpError busy{0, ""};
                auto r = on_scheduler([this, id, op, b = *body]() { return window_op(id, op, b); },
                                      &busy);
                if (busy.status) return reply_error(res, busy);
                if (!r.ok()) return reply_error(res, http_error(r.error()));
                reply(res, *r, op == "fork" ? 201 : 200);
              }));
  }
};

Server::Server(std::shared_ptr<const Model> model, const ServerOptions& opts)
    : impl_(std::make_unique<Impl>(std::move(model), opts)) {}

Server::~Server() {
  stop();
}

Status Server::start() {
  Impl& s = *impl_;
  const ModelConfig& c = s.model.cfg;
  if (!s.model.tokenizer)
    log().warn("serve: the model has no tokenizer; prompts must use token chunks");
  ContextOptions co;
  co.n_threads = s.opts.threads;
  const int64_t tokens = s.opts.pool_tokens > 0 ? s.opts.pool_tokens : 8 * int64_t(c.ctx_len);
  co.kv_tokens = tokens + 16 * int64_t(s.opts.max_active + 8);  // a partial page per sequence
  co.store_bytes = s.opts.store_bytes;
  if (!s.opts.store_dir.empty()) {
    auto disk = DiskTier::open(s.opts.store_dir, s.model.fingerprint, s.model.kv_layout());
    if (!disk.ok()) return disk.error();
    co.tiers.push_back(*disk);
  }
  if (!s.opts.redis_url.empty()) {
    auto redis = RedisTier::open(s.opts.redis_url, s.model.fingerprint, s.model.kv_layout(), {});
    if (!redis.ok()) return redis.error();
    co.tiers.push_back(*redis);
  }
  KAMERA_ASSIGN_OR_RETURN(s.ctx, Context::create(s.model_ptr, co));
  s.pool = &s.ctx->pool();
  s.engine = &s.ctx->engine();
  s.store = &s.ctx->store();
  s.cache = &s.ctx->cache();
  s.http.new_task_queue = [n = s.opts.http_threads] {
    return new httplib::ThreadPool(size_t(std::max(2, n)));
  };
  s.http.set_payload_max_length(s.opts.max_body_bytes);
  s.http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      const std::string msg = res.status == 413   ? "request body too large"
                              : res.status == 404 ? "no such endpoint"
                                                  : "request failed";
      res.set_content(dump(error_body({res.status, msg})), "application/json");
    }
  });
  s.routes();
  if (s.opts.port == 0) {
    s.bound_port = s.http.bind_to_any_port(s.opts.host);
    if (s.bound_port <= 0)
      return make_error(ErrorCode::InvalidArgument, "serve: cannot bind {}:(any port)",
                        s.opts.host);
  } else {
    if (!s.http.bind_to_port(s.opts.host, s.opts.port))
      return make_error(ErrorCode::InvalidArgument,
                        "serve: cannot bind {}:{} (in use, or not allowed)", s.opts.host,
                        s.opts.port);
    s.bound_port = s.opts.port;
  }
  s.sched_thread = std::thread([&s] { s.scheduler_loop(); });
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
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = true;
    for (Job& j : s.queue) {
      if (j.gen) {
        j.gen->out->push(
            {Event::Error, "", error_body({503, "the server is stopping", "server_error"}), 503});
      } else {
        j.op(false);
      }
    }
    s.queue.clear();
  }
  s.cv.notify_all();
  if (s.sched_thread.joinable()) s.sched_thread.join();
  s.http.stop();
  if (s.http_thread.joinable()) s.http_thread.join();
  s.windows.clear();
  std::lock_guard<std::mutex> lock(s.stop_mu);
  s.stop_cv.notify_all();
}

}  // namespace kamera
