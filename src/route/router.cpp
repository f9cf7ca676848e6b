#include "route/router.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <regex>
#include <thread>
#include <unordered_map>
#include <variant>

#include "core/log.h"
#include "route/upstream.h"
#include "server/cluster_events.h"
#include "server/http_front.h"
#include "store/redis_link.h"

namespace kamera {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Segments predicted held per backend before they are forgotten (a snapshot replaces them).
constexpr size_t kMaxPredicted = 200000;
// The least work a request in a queue is counted for (tokens), whatever recent requests cost.
constexpr int64_t kMinWorkTokens = 32;

struct Backend {
  std::string url, host;
  int port = 0;
  bool up = true;
  int inflight = 0;      // this router's requests there now
  int64_t reported = 0;  // its own count of completions in flight (events)
  Clock::time_point reported_at{};
  int64_t requests = 0, failures = 0, snapshots = 0, timeouts = 0, bad_replies = 0;
  Clock::time_point held_down{};  // down until then, whatever the health check says
  int64_t hot_bytes_routed = 0;   // sum of hot_bytes over the requests sent there
  std::unordered_map<ChunkId, int64_t, ChunkIdHash> held;       // from its events
  std::unordered_map<ChunkId, int64_t, ChunkIdHash> predicted;  // from this router's sends
  bool hot(const ChunkId& id) const { return held.count(id) || predicted.count(id); }
  int64_t load() const {
    const bool fresh = Clock::now() - reported_at < std::chrono::seconds(2);
    return std::max<int64_t>(inflight, fresh ? reported : 0);
  }
};

// "http://HOST:PORT" into host and port.
bool parse_backend(const std::string& url, std::string& host, int& port) {
  static const std::regex re(R"(^http://([A-Za-z0-9.\-_]+|\[[0-9a-fA-F:]+\]):([0-9]{1,5})/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re)) return false;
  host = m[1].str();
  port = std::stoi(m[2].str());
  return port > 0 && port < 65536;
}

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

HttpResponse error_reply(int status, const std::string& message, const std::string& code,
                         const std::string& type = "invalid_request_error",
                         const std::string& param = "") {
  HttpResponse r;
  r.status = status;
  r.body = json{{"error",
                 {{"message", message},
                  {"type", type},
                  {"code", code},
                  {"param", param.empty() ? json(nullptr) : json(param)}}}}
               .dump();
  return r;
}

}  // namespace

struct Router::Impl {
  std::shared_ptr<const Model> model;
  RouterOptions opts;
  std::unique_ptr<RequestSegmenter> segmenter;
  mutable std::mutex mu;
  std::vector<Backend> backends;
  size_t next = 0;  // round robin
  int64_t routed_hot = 0, routed_cold = 0, events = 0, retries = 0, midstream_failures = 0;
  int64_t refused_too_long = 0;
  double work = 0;  // bytes recent requests recomputed where they went (moving average)
  std::unique_ptr<HttpFront> front;
  std::atomic<bool> stopping{false};
  std::thread health, listener;
  std::unique_ptr<RedisLink> events_link;

  // A backend for a request of these segments (index into backends), or -1 when none is up;
  // `tried` are left out. Counts the send (inflight, predicted segments).
  int pick(const std::vector<RequestSegmenter::Segment>& segs, const std::vector<int>& tried);
  // The end of a request sent to b: counted by how it went (a failure marks b down; a time-out
  // holds it down for down_hold_s).
  void done(int b, const Relayed& r);
  void forward(const HttpRequest& req, const std::shared_ptr<Responder>& out);
  // The segments of a completion body (empty where the server refuses it: its refusal is the
  // server's to answer, unless `strict`), or the router's own refusal: a prompt whose text cannot
  // fit the context, refused before it is tokenized, as the server refuses it.
  std::variant<std::vector<RequestSegmenter::Segment>, HttpResponse> cut(
      const nlohmann::ordered_json& body, bool chat, bool strict);
  // One attempt; false when the backend failed before anything reached the client.
  bool attempt(int b, const HttpRequest& req, const std::shared_ptr<Responder>& out, Relayed& last);
  std::optional<HttpResponse> inspect(HttpRequest& head);
  void check_health();
  void on_event(std::string_view payload);
  json state() const;
};

int Router::Impl::pick(const std::vector<RequestSegmenter::Segment>& segs,
                       const std::vector<int>& tried) {
  std::lock_guard<std::mutex> lock(mu);
  const size_t n = backends.size();
  const size_t start = next++ % n;
  const int64_t row = int64_t(segmenter->row_bytes());
  int64_t prompt = 0;
  for (const auto& s : segs) prompt += s.tokens * row;
  // One request ahead in a queue delays this one by about one request's work: the bytes recent
  // requests had to recompute where they went (at least kMinWorkTokens' worth).
  const double ahead = opts.load_penalty * std::max(work, double(kMinWorkTokens * row));
  int best = -1;
  double best_score = 0;
  int64_t best_hot = 0, best_load = 0;
  for (size_t k = 0; k < n; ++k) {
    const int i = int((start + k) % n);  // ties: the first from a rotating start
    const Backend& b = backends[size_t(i)];
    if (!b.up || std::find(tried.begin(), tried.end(), i) != tried.end()) continue;
    int64_t hot = 0;
    for (const auto& s : segs) hot += b.hot(s.id) ? s.tokens * row : 0;
    const int64_t load = b.load();
    const double score = opts.policy == "score" ? double(hot) - ahead * double(load) : 0.0;
    const bool better = best < 0 || (opts.policy == "round-robin" ? false
                                     : score != best_score        ? score > best_score
                                                                  : load < best_load);
    if (better) best = i, best_score = score, best_hot = hot, best_load = load;
  }
  if (best < 0) return -1;
  Backend& b = backends[size_t(best)];
  ++b.inflight;
  ++b.requests;
  b.hot_bytes_routed += best_hot;
  ++(best_hot > 0 ? routed_hot : routed_cold);
  if (!segs.empty()) work = 0.9 * work + 0.1 * double(prompt - best_hot);
  if (opts.policy == "score") {
    if (b.predicted.size() > kMaxPredicted) b.predicted.clear();
    for (const auto& s : segs) b.predicted.emplace(s.id, s.tokens * row);
  }
  return best;
}

void Router::Impl::done(int b, const Relayed& r) {
  using O = Relayed::Outcome;
  std::lock_guard<std::mutex> lock(mu);
  Backend& be = backends[size_t(b)];
  --be.inflight;
  be.bad_replies += r.outcome == O::BadReply;
  if (r.outcome == O::BadReply) log().warn("route: backend {}: {}", be.url, r.why);
  if (r.outcome != O::Unreachable && r.outcome != O::TimedOut && r.outcome != O::MidStream) return;
  ++be.failures;
  midstream_failures += r.outcome == O::MidStream;
  if (r.timed_out) {
    ++be.timeouts;
    be.held_down = Clock::now() + std::chrono::seconds(opts.down_hold_s);
  }
  if (be.up) log().warn("route: backend {} failed ({}); marked down", be.url, r.why);
  be.up = false;
}

bool Router::Impl::attempt(int b, const HttpRequest& req, const std::shared_ptr<Responder>& out,
                           Relayed& last) {
  UpstreamTarget to;
  {
    std::lock_guard<std::mutex> lock(mu);
    to = {backends[size_t(b)].host, backends[size_t(b)].url, backends[size_t(b)].port};
  }
  HttpHeaders headers;
  for (const auto& [k, v] : req.headers)
    if (k == "content-type" || k == "accept" || k == "x-session-id" || k == "anthropic-version" ||
        k == "anthropic-beta")
      headers.emplace_back(k, v);
  if (!opts.backend_key.empty()) {
    headers.emplace_back("Authorization", "Bearer " + opts.backend_key);
  } else {  // the client's credentials, either form (Anthropic's clients send x-api-key)
    if (!req.raw_authorization.empty())
      headers.emplace_back("Authorization", req.raw_authorization[0]);
    if (const std::string key = req.header("x-api-key"); !key.empty())
      headers.emplace_back("x-api-key", key);
  }
  const UpstreamLimits limits{opts.connect_timeout_ms, opts.backend_timeout_s,
                              opts.max_reply_bytes};
  last = relay(to, req, headers, limits, out, [&](const Relayed& r) { done(b, r); });
  return last.outcome != Relayed::Outcome::Unreachable &&
         last.outcome != Relayed::Outcome::TimedOut;
}

std::variant<std::vector<RequestSegmenter::Segment>, HttpResponse> Router::Impl::cut(
    const nlohmann::ordered_json& body, bool chat, bool strict) {
  auto reqs = segmenter->requests(body, chat);
  if (!reqs.ok()) {
    if (strict) return error_reply(400, reqs.message(), "invalid_value");
    return std::vector<RequestSegmenter::Segment>{};
  }
  const size_t limit = max_prompt_bytes(*model);
  for (const GenRequest& g : *reqs) {
    size_t bytes = 0;
    for (const PromptPart& p : g.parts) bytes += p.text.size();
    if (bytes <= limit) continue;
    std::lock_guard<std::mutex> lock(mu);
    ++refused_too_long;
    return error_reply(400,
                       fmt::format("the prompt text ({} bytes) cannot fit the model's context of "
                                   "{} tokens",
                                   bytes, model->cfg.ctx_len),
                       "context_length_exceeded", "invalid_request_error",
                       chat ? "messages" : "prompt");
  }
  auto s = segmenter->segments_of(*reqs);
  if (!s.ok() && strict) return error_reply(400, s.message(), "invalid_value");
  return s.ok() ? std::move(*s) : std::vector<RequestSegmenter::Segment>{};
}

void Router::Impl::forward(const HttpRequest& req, const std::shared_ptr<Responder>& out) {
  std::vector<RequestSegmenter::Segment> segs;
  const bool chat = req.path == "/v1/chat/completions" || req.path == "/router/segments";
  if (req.path == "/router/segments") {  // what the router sees of a chat body (no forward)
    nlohmann::ordered_json body;         // in its order, as the servers parse it
    if (auto bad = parse_body(req.body, JsonLimits{}, body))
      return out->reply(error_reply(bad->status, bad->message, bad->code));
    auto c = cut(body, true, true);
    if (auto* refusal = std::get_if<HttpResponse>(&c)) return out->reply(std::move(*refusal));
    json list = json::array();
    for (const auto& x : std::get<0>(c)) list.push_back({{"id", x.id.hex()}, {"tokens", x.tokens}});
    HttpResponse r;
    r.body = json{{"segments", list}, {"row_bytes", segmenter->row_bytes()}}.dump();
    return out->reply(std::move(r));
  }
  if (req.method == "POST" && (chat || req.path == "/v1/completions")) {
    nlohmann::ordered_json body;  // under the servers' limits; a refusal is theirs to answer
    if (!parse_body(req.body, JsonLimits{}, body) && body.is_object()) {
      auto c = cut(body, chat, false);
      if (auto* refusal = std::get_if<HttpResponse>(&c)) return out->reply(std::move(*refusal));
      segs = std::move(std::get<0>(c));
    }
  }
  std::vector<int> tried;
  Relayed last;
  for (;;) {
    const int b = pick(segs, tried);
    if (b < 0 && last.timed_out)
      return out->reply(
          error_reply(504,
                      fmt::format("no backend answered: the last one sent none for {} s",
                                  opts.backend_timeout_s),
                      "backend_timeout", "server_error"));
    if (b < 0)
      return out->reply(error_reply(503, "no backend is up", "no_backend", "server_error"));
    if (attempt(b, req, out, last)) return;
    tried.push_back(b);
    std::lock_guard<std::mutex> lock(mu);
    ++retries;
  }
}

std::optional<HttpResponse> Router::Impl::inspect(HttpRequest& head) {
  if (head.path == "/health") {
    HttpResponse r;
    int up = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Backend& b : backends) up += b.up;
    }
    r.status = up > 0 ? 200 : 503;
    r.body = json{{"status", up > 0 ? "ok" : "no backend up"}, {"backends_up", up}}.dump();
    return r;
  }
  if (!opts.api_keys.empty()) {
    const std::string raw = head.raw_authorization.empty() ? "" : head.raw_authorization[0];
    const std::string x_api_key = head.header("x-api-key");
    int found = -1;
    for (size_t i = 0; i < opts.api_keys.size(); ++i)
      if (same_secret(raw, "Bearer " + opts.api_keys[i]) ||
          (!x_api_key.empty() && same_secret(x_api_key, opts.api_keys[i])))
        found = int(i);
    if (head.count("authorization") > 1 || found < 0) {
      HttpResponse r = error_reply(
          401, "missing or wrong API key (Authorization: Bearer KEY, or x-api-key: KEY)",
          "invalid_api_key", "authentication_error");
      r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return r;
    }
    head.client = fmt::format("key:{}", found);
  }
  if (head.path == "/router/state") {
    HttpResponse r;
    r.body = state().dump();
    return r;
  }
  if (head.path.rfind("/v1/", 0) != 0 && head.path != "/tokenize" && head.path != "/metrics" &&
      head.path != "/router/segments")
    return error_reply(404, "no such endpoint", "no_route", "not_found_error");
  if (head.content_length > int64_t(opts.max_body_bytes))
    return error_reply(413, fmt::format("the request body exceeds {} bytes", opts.max_body_bytes),
                       "body_too_large");
  return std::nullopt;
}

void Router::Impl::check_health() {
  while (!stopping) {
    std::vector<std::pair<std::string, int>> targets;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Backend& b : backends) targets.emplace_back(b.host, b.port);
    }
    for (size_t i = 0; i < targets.size() && !stopping; ++i) {
      httplib::Client cli(targets[i].first, targets[i].second);
      cli.set_connection_timeout(0, 300000);
      cli.set_read_timeout(1, 0);
      auto r = cli.Get("/health");
      std::lock_guard<std::mutex> lock(mu);
      Backend& b = backends[i];
      const bool up = r && r->status == 200 && Clock::now() >= b.held_down;
      if (up != b.up) log().info("route: backend {} is {}", b.url, up ? "up" : "down");
      b.up = up;
    }
    for (int t = 0; t < opts.health_ms / 50 && !stopping; ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Router::Impl::on_event(std::string_view payload) {
  const json e = json::parse(payload, nullptr, false);
  if (!e.is_object() || !e.contains("server") || !e["server"].is_string()) return;
  const std::string server = trim_slash(e["server"].get<std::string>());
  std::lock_guard<std::mutex> lock(mu);
  ++events;
  for (Backend& b : backends) {
    if (b.url != server) continue;
    if (e.value("reset", false)) {
      ++b.snapshots;
      b.held.clear();
      b.predicted.clear();  // the snapshot says what is there
    }
    auto apply = [&](const char* key, bool stored) {
      if (!e.contains(key) || !e[key].is_array()) return;
      for (const json& s : e[key]) {
        if (!s.is_object() || !s.contains("id") || !s["id"].is_string()) continue;
        auto id = ChunkId::from_hex(s["id"].get<std::string>());
        if (!id) continue;
        const int64_t bytes = s.value("bytes", int64_t(0));
        int64_t& held = b.held[*id];
        held += stored ? bytes : -bytes;
        if (held <= 0) b.held.erase(*id), b.predicted.erase(*id);
      }
    };
    apply("stored", true);
    apply("evicted", false);
    if (e.contains("load") && e["load"].is_object()) {
      b.reported = e["load"].value("inflight", int64_t(0));
      b.reported_at = Clock::now();
    }
  }
}

json Router::Impl::state() const {
  std::lock_guard<std::mutex> lock(mu);
  json bs = json::array();
  for (const Backend& b : backends)
    bs.push_back({{"url", b.url},
                  {"up", b.up},
                  {"inflight", b.inflight},
                  {"reported_inflight", b.reported},
                  {"requests", b.requests},
                  {"failures", b.failures},
                  {"timeouts", b.timeouts},
                  {"bad_replies", b.bad_replies},
                  {"hot_bytes_routed", b.hot_bytes_routed},
                  {"held_segments", b.held.size()},
                  {"snapshots", b.snapshots},
                  {"predicted_segments", b.predicted.size()}});
  return {{"policy", opts.policy},
          {"load_penalty", opts.load_penalty},
          {"work_bytes", work},
          {"backends", bs},
          {"routed_hot", routed_hot},
          {"routed_cold", routed_cold},
          {"events", events},
          {"retries", retries},
          {"midstream_failures", midstream_failures},
          {"refused_too_long", refused_too_long}};
}

Result<std::unique_ptr<Router>> Router::create(std::shared_ptr<const Model> model,
                                               const RouterOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  if (opts.backends.empty())
    return make_error(ErrorCode::InvalidArgument, "route: give at least one --backend");
  if (opts.policy != "score" && opts.policy != "round-robin" && opts.policy != "least-loaded")
    return make_error(ErrorCode::InvalidArgument,
                      "--policy: expected score, round-robin or least-loaded, not \"{}\"",
                      opts.policy);
  if (opts.backend_timeout_s < 1 || opts.down_hold_s < 0 || opts.max_reply_bytes == 0)
    return make_error(ErrorCode::InvalidArgument,
                      "route: the backend timeout (s) and the reply bound need at least 1");
  if (!(opts.load_penalty >= 0))
    return make_error(ErrorCode::InvalidArgument, "--load-penalty: a number >= 0");
  for (const std::string& u : opts.backends) {
    Backend b;
    b.url = trim_slash(u);
    if (!parse_backend(b.url, b.host, b.port))
      return make_error(ErrorCode::InvalidArgument, "--backend {}: expected http://HOST:PORT", u);
    impl->backends.push_back(std::move(b));
  }
  KAMERA_ASSIGN_OR_RETURN(impl->segmenter, RequestSegmenter::create(model, opts.segmentation));
  if (!opts.redis_url.empty()) {
    RedisLink::Options lo;
    KAMERA_ASSIGN_OR_RETURN(auto seeds, RedisLink::parse_url(opts.redis_url, lo));
    lo.tls_opts = opts.redis_tls;
    impl->events_link = std::make_unique<RedisLink>(std::move(seeds), lo);
  }
  impl->model = std::move(model);
  return std::unique_ptr<Router>(new Router(std::move(impl)));
}

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() {
  stop();
}

Status Router::start() {
  Impl& s = *impl_;
  FrontOptions f;
  f.host = s.opts.host;
  f.port = s.opts.port;
  f.workers = s.opts.workers;
  f.max_pending = 4 * s.opts.workers;
  f.max_body_bytes = s.opts.max_body_bytes;
  f.body_timeout_ms = 60000;
  f.write_timeout_ms = 60000;
  KAMERA_ASSIGN_OR_RETURN(
      s.front, HttpFront::bind(
                   f, [&s](HttpRequest& h) { return s.inspect(h); },
                   [&s](HttpRequest r, std::shared_ptr<Responder> o) { s.forward(r, o); }));
  s.health = std::thread([&s] { s.check_health(); });
  if (s.events_link)
    s.listener = std::thread([&s] {
      s.events_link->listen(
          events_channel(s.model->fingerprint), [&s](std::string_view p) { s.on_event(p); },
          s.stopping);
    });
  s.front->start();
  return Status::Ok();
}

int Router::port() const {
  return impl_->front ? impl_->front->port() : 0;
}

void Router::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  if (s.front) s.front->stop();
  if (s.health.joinable()) s.health.join();
  if (s.listener.joinable()) s.listener.join();
}

json Router::state() const {
  return impl_->state();
}

}  // namespace kamera
