// kamera serve: an OpenAI-compatible HTTP server whose prompts may reference cached chunks.
//
//   POST /v1/completions, /v1/chat/completions   (SSE streaming with "stream": true)
//   POST /v1/embeddings
//   POST /v1/chunks, GET|DELETE /v1/chunks/{id}
//   POST /v1/windows, GET|DELETE /v1/windows/{id},
//        POST /v1/windows/{id}/{append,evict,recall,reorder,fork,completions}
//   GET  /v1/models, /health, /metrics (Prometheus text)
//
// One scheduler thread owns the engine, the KV pool and the windows: HTTP handler threads parse
// and validate requests, then hand them over through a bounded queue (a full queue answers 429
// with Retry-After). Generations are decoded together, one batched forward per step (continuous
// batching). The chunk store has a memory tier, optionally a disk tier (--store-dir) and a Redis
// tier (--redis) shared between servers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "server/server_options.h"

namespace kamera {

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
