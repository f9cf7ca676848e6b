// kamera route: one OpenAI-compatible front for several kamera servers, sending each completion
// to the server that holds most of its prompt (src/route/router.h).
#include <cstdio>
#include <cstdlib>

#include "route/router.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct RouteArgs {
  std::string model, tokenizer;
  RouterOptions opts;
  std::string api_key_env = "KAMERA_API_KEY", backend_key_env = "KAMERA_BACKEND_KEY";
  bool as_json = false;
  int max_reply_mb = 64;
};

int run_route(RouteArgs a) {
  if (const char* k = std::getenv(a.api_key_env.c_str()); k && *k) a.opts.api_keys.push_back(k);
  if (const char* k = std::getenv(a.backend_key_env.c_str()); k && *k) a.opts.backend_key = k;
  a.opts.max_reply_bytes = size_t(a.max_reply_mb) << 20;
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.error(), a.as_json);
  auto router = Router::create(*loaded, a.opts);
  if (!router.ok()) return fail(router.error(), a.as_json);
  if (Status st = (*router)->start(); !st.ok()) return fail(st.message(), a.as_json);
  std::fprintf(stderr, "kamera: routing on http://%s:%d to %zu backends (%s)\n",
               a.opts.host.c_str(), (*router)->port(), a.opts.backends.size(),
               a.opts.policy.c_str());
  if (a.as_json) {
    std::printf("%s\n", json{{"port", (*router)->port()},
                             {"host", a.opts.host},
                             {"policy", a.opts.policy},
                             {"backends", a.opts.backends}}
                            .dump()
                            .c_str());
    std::fflush(stdout);
  }
  wait_for_stop_signal();
  (*router)->stop();
  return 0;
}

}  // namespace

Runner add_route(CLI::App& app) {
  auto a = std::make_shared<RouteArgs>();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin")
      ->check(CLI::ExistingFile);
  app.add_option("--backend", a->opts.backends,
                 "A kamera serve to route to: http://HOST:PORT (repeat; as it advertises itself "
                 "in its events, --advertise)")
      ->required();
  app.add_option("--host", a->opts.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", a->opts.port, "Port (0: any free port, printed at start)")
      ->capture_default_str();
  app.add_option("--policy", a->opts.policy,
                 "score (the segments each backend holds, less a load penalty), round-robin or "
                 "least-loaded")
      ->check(CLI::IsMember({"score", "round-robin", "least-loaded"}))
      ->capture_default_str();
  app.add_option("--load-penalty", a->opts.load_penalty,
                 "score: one request in flight on a backend costs this many times the work "
                 "of a recent request (the bytes it recomputed)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  app.add_option("--redis", a->opts.redis_url,
                 "The servers' store (redis[s]://..., as given to serve --redis): their events "
                 "(what each holds, its load) are read there");
  app.add_option("--redis-ca", a->opts.redis_tls.ca_file, "PEM CA bundle for rediss://")
      ->check(CLI::ExistingFile);
  app.add_option("--chat-template", a->opts.segmentation.chat_template,
                 "The servers' --chat-template (requests are cut as they cut them)");
  app.add_flag("--control-tokens-in-text", a->opts.segmentation.control_tokens_in_text,
               "The servers' --control-tokens-in-text");
  app.add_option("--api-key-env", a->api_key_env,
                 "Environment variable holding the key clients must send (unset: none)")
      ->capture_default_str();
  app.add_option("--backend-key-env", a->backend_key_env,
                 "Environment variable holding the key sent to the backends (unset: the "
                 "client's Authorization is passed on)")
      ->capture_default_str();
  app.add_option("--health-ms", a->opts.health_ms, "Health check interval (ms)")
      ->check(CLI::Range(50, 600000))
      ->capture_default_str();
  app.add_option("--backend-timeout-s", a->opts.backend_timeout_s,
                 "The longest a backend may stay silent (before its answer, between two bytes): "
                 "then it is marked down and the request goes to another (a non-streamed "
                 "completion is sent whole when done: raise this for long ones, or stream)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--down-hold-s", a->opts.down_hold_s,
                 "A backend that timed out stays down this long, whatever its health check says")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--max-reply-mb", a->max_reply_mb,
                 "The largest non-streamed answer taken from a backend (held to be checked as "
                 "JSON; a larger one is answered 502 bad_gateway)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--workers", a->opts.workers, "Requests forwarded at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_flag("--json", a->as_json, "Print {\"port\", ...} on stdout once listening");
  return [a] { return run_route(*a); };
}

}  // namespace kamera::cli
