// kamera serve: the OpenAI-compatible server with chunk and window APIs (src/server/server.h).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "server/server.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

struct ServeArgs {
  std::string model, tokenizer;
  ServerOptions opts;
  double store_mb = 1024;
};

int run_serve(ServeArgs a) {
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), false);
  a.opts.store_bytes = size_t(a.store_mb * 1024 * 1024);
  if (a.opts.model_name == "kamera") {
    const auto slash = a.model.find_last_of('/');
    a.opts.model_name = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  }
  Server server(*loaded, a.opts);
  Status st = server.start();
  if (!st.ok()) return fail(st.message(), false);
  std::fprintf(stderr, "kamera: serving %s on http://%s:%d (%s%s%s)\n", a.opts.model_name.c_str(),
               a.opts.host.c_str(), server.port(),
               a.opts.store_dir.empty() ? "memory store" : "disk store",
               a.opts.redis_url.empty() ? "" : " + redis",
               a.opts.api_key.empty() ? "" : ", API key required");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
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
      "Shared tier: redis://HOST[:PORT][/DB]; servers sharing it reuse each other's chunks");
  app.add_option("--api-key", a->opts.api_key,
                 "Require 'Authorization: Bearer KEY' on /v1/* and /metrics");
  app.add_option("--store-mb", a->store_mb, "Memory tier budget (MiB)")->capture_default_str();
  app.add_option("--max-queue", a->opts.max_queue, "Queued requests before answering 429")
      ->capture_default_str();
  app.add_option("--max-active", a->opts.max_active, "Generations decoded together")
      ->capture_default_str();
  app.add_option("--max-body-bytes", a->opts.max_body_bytes, "Largest request body (bytes)")
      ->capture_default_str();
  app.add_option("--max-tokens", a->opts.default_max_tokens, "Default max_tokens of a completion")
      ->capture_default_str();
  app.add_option("--pool-tokens", a->opts.pool_tokens,
                 "KV pool capacity in tokens (0: 8 x context)")
      ->capture_default_str();
  app.add_option("--http-threads", a->opts.http_threads, "HTTP worker threads")
      ->capture_default_str();
  app.add_option("--name", a->opts.model_name,
                 "Model name reported by the API (default: the file name)");
  add_threads_option(app, a->opts.threads);
  return [a] { return run_serve(*a); };
}

}  // namespace kamera::cli
