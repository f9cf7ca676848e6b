// kamera serve: an OpenAI-compatible HTTP server whose prompts may reference cached chunks.
//
//   POST /v1/completions, /v1/chat/completions   (SSE streaming with "stream": true)
//   POST /v1/chunks, GET|DELETE /v1/chunks/{id}
//   POST /v1/windows, GET|DELETE /v1/windows/{id},
//        POST /v1/windows/{id}/{append,evict,recall,reorder,fork,completions}
//   GET  /health, /metrics (Prometheus text)
//
// One scheduler thread owns the engine, the KV pool and the windows: HTTP handler threads parse
// and validate requests, then hand them over through a bounded queue (a full queue answers 429
// with Retry-After). Generations are decoded together, one batched forward per step (continuous
// batching). The chunk store has a memory tier, optionally a disk tier (--store-dir) and a Redis
// tier (--redis) shared between servers.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "model/model.h"

namespace kamera {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (see Server::port())
  std::string store_dir;  // disk tier; empty: none
  std::string redis_url;  // redis://HOST[:PORT][/DB]; empty: none
  std::string api_key;    // when set, /v1/* and /metrics require "Authorization: Bearer KEY"
  std::string model_name = "kamera";
  int threads = 2;  // engine threads
  int http_threads = 8;
  int max_queue = 64;   // requests waiting for the scheduler before 429
  int max_active = 16;  // generations decoding at once
  size_t max_body_bytes = size_t(32) << 20;
  size_t store_bytes = size_t(1) << 30;  // memory tier budget
  int pool_tokens = 0;                   // KV pool capacity in tokens; 0: 8 x the model's context
  int default_max_tokens = 64;
  int max_chunk_tokens = 0;  // 0: the model's context
};

class Server {
 public:
  Server(std::shared_ptr<const Model> model, const ServerOptions& opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the store tiers, binds the socket and starts the scheduler and HTTP threads.
  Status start();
  // Port actually bound (useful with port 0).
  int port() const;
  // Blocks until stop() is called from another thread (or a signal handler's thread).
  void wait();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kamera
