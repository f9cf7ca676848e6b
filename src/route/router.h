// kamera route: one OpenAI-compatible front for several `kamera serve` processes that share a
// store (a Redis Cluster). It answers on the servers' routes (/v1/*, streaming passed through as
// it arrives), asks clients for an API key when given some, and sends each completion to the
// backend that holds the most of its prompt in memory:
//
//   the request is cut into segments as the servers cut it (server/request_segments.h: the same
//   template, parsing and tokenization, so the same segment ids); each backend scores
//
//     score(b) = hot_bytes(b) - load_penalty * load(b) * work
//
//   hot_bytes: the KV bytes (tokens x one token's f32 rows) of the request's segments that b holds,
//   as b's events say (server/cluster_events.h: stored, evicted, snapshots) and, between two of
//   them, as this router's own sends predict; load(b): the completions in flight there (the most
//   of this router's own count and b's last reported count); work: what one request ahead in a
//   queue costs, in the same bytes: the moving average of what recent requests had to recompute
//   where they were sent (at least 32 tokens' worth). So a request waits behind another only to
//   save more than load_penalty times the work that one costs. The best score wins; ties go to
//   the least loaded, then round robin (so when nothing is hot anywhere, the least loaded wins).
//
// Backends are health-checked (GET /health every health_ms); one that fails a request (refused,
// reset) is marked down at once and the request goes to the next best before any byte reached the
// client; a backend that dies mid-stream ends the client's stream with an error event
// (data: {"error": ...}) and is marked down. A backend silent for backend_timeout_s (a hung one
// still answers /health from its I/O thread) is marked down for down_hold_s whatever its health
// check says, and the request goes to the next best (504 `backend_timeout` when none is left).
// Each exchange with a backend is route/upstream.h's: a client that leaves closes the backend's
// connection, and an answer a server would not give (a status outside 200..599, a foreign content
// type, a body that is not JSON or is over max_reply_bytes) is answered 502 `bad_gateway`.
// A prompt whose text cannot fit the model's context is refused (400 context_length_exceeded, the
// server's words) before the router tokenizes it: the servers' own limit,
// server/request_segments.h's max_prompt_bytes. Policies for comparison: round-robin,
// least-loaded.
// Every answer names its backend (header x-kamera-backend). POST /router/segments with a chat
// body answers the segments the router cuts it into ({"segments": [{"id", "tokens"}], ...}).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/request_segments.h"

namespace kamera {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 0;                       // 0: any free port
  std::vector<std::string> backends;  // http://HOST:PORT of each server
  std::vector<std::string> api_keys;  // clients send one of these (empty: none needed)
  // Sent to the backends as "Authorization: Bearer KEY" (empty: the client's Authorization and
  // x-api-key headers passed on). Clients authenticate either way (x-api-key: Anthropic's).
  std::string backend_key;
  std::string policy = "score";  // score | round-robin | least-loaded
  double load_penalty = 1.0;
  // The servers' store: their events are read there (empty: predictions from sends only).
  std::string redis_url;
  TlsOptions redis_tls;
  int health_ms = 500;
  int workers = 32;  // requests forwarded at once
  int connect_timeout_ms = 1000;
  // The longest a backend may stay silent: before its answer begins (a non-streamed completion
  // is sent whole when it is done: raise it for long ones, or stream) and between two bytes.
  int backend_timeout_s = 120;
  int down_hold_s = 30;  // a backend that timed out stays down this long, healthy or not
  size_t max_body_bytes = size_t(32) << 20;
  size_t max_reply_bytes = size_t(64) << 20;  // a non-streamed answer, held to be checked
  ServerOptions segmentation;                 // the servers' chat template and text options
};

class Router {
 public:
  // The model the servers run (its tokenizer, template and fingerprint: segment ids, events).
  static Result<std::unique_ptr<Router>> create(std::shared_ptr<const Model> model,
                                                const RouterOptions& opts);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  Status start();  // binds, starts the health checks and the event listener
  int port() const;
  void stop();
  // {"policy", "backends": [{"url", "up", "inflight", "requests", "hot_segments", ...}], ...}
  nlohmann::json state() const;

  struct Impl;

 private:
  explicit Router(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kamera
