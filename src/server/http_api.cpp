// Routing and the refusals decided from a request head alone: unknown routes (404), wrong
// methods (405 with Allow), credentials (400 for several Authorization headers, 401), declared
// sizes (413) and content types (415). Cheap routes are answered on the I/O thread.
#include <ctime>

#include "server/messages_api.h"
#include "server/server_impl.h"

namespace kamera {

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

namespace {

bool is_json_type(std::string_view type) {
  const std::string_view base = type.substr(0, type.find(';'));
  std::string t;
  for (char c : base)
    if (c != ' ' && c != '\t') t += char(std::tolower(static_cast<unsigned char>(c)));
  return t == "application/json";
}

// A path no route serves: the APIs this server speaks, so that a client of another API (or
// another provider's path) knows where to go.
HttpError no_route() {
  return {404,
          "no such endpoint. kamera serves OpenAI's POST /v1/chat/completions, /v1/completions, "
          "/v1/responses (GET and DELETE /v1/responses/{id}), /v1/embeddings and GET /v1/models; "
          "llama-server's POST /v1/rerank (on a reranker); "
          "Anthropic's POST /v1/messages and "
          "/v1/messages/count_tokens; its own /v1/chunks, /v1/windows, "
          "/v1/stats, /tokenize, /detokenize, /metrics, /health (docs/SERVER.md)",
          "not_found_error", "no_route"};
}

}  // namespace

void Server::Impl::add_routes() {
  const std::string id = "([0-9a-fA-F]{32})", win = "(w[0-9]{1,9})";
  auto add = [&](const char* method, const std::string& path, Handler h) {
    routes.push_back({method, std::regex(path), h, false});
  };
  routes.push_back({"GET", std::regex("/health"), nullptr, true});
  routes.push_back({"GET", std::regex("/|/ui/[a-z0-9_-]{1,32}\\.[a-z]{1,8}"), nullptr, true});
  add("GET", "/metrics", nullptr);
  add("GET", "/v1/stats", nullptr);
  add("GET", "/v1/models", nullptr);
  add("POST", "/v1/completions", &Impl::completions);
  add("POST", "/v1/chat/completions", &Impl::chat);
  add("POST", "/v1/responses", &Impl::responses);
  add("GET", "/v1/responses/([A-Za-z0-9_-]{1,128})", &Impl::get_response);
  add("DELETE", "/v1/responses/([A-Za-z0-9_-]{1,128})", &Impl::delete_response);
  add("POST", "/v1/messages", &Impl::messages);
  add("POST", "/v1/messages/count_tokens", &Impl::count_tokens);
  add("POST", "/v1/embeddings", &Impl::embeddings);
  add("POST", "(/v1)?/(rerank|reranking)", &Impl::rerank);  // llama-server's four paths
  add("POST", "/v1/chunks", &Impl::post_chunk);
  add("GET", "/v1/chunks/" + id, &Impl::get_chunk);
  add("DELETE", "/v1/chunks/" + id, &Impl::delete_chunk);
  add("POST", "/v1/windows", &Impl::post_window);
  add("GET", "/v1/windows/" + win, &Impl::get_window);
  add("DELETE", "/v1/windows/" + win, &Impl::delete_window);
  add("POST", "/v1/windows/" + win + "/completions", &Impl::window_completions);
  add("POST", "/v1/windows/" + win + "/(append|evict|recall|reorder|fork|refresh)",
      &Impl::edit_window);
  add("POST", "/tokenize", &Impl::tokenize_route);
  add("POST", "/detokenize", &Impl::detokenize_route);
}

HttpResponse Server::Impl::json_response(int status, const json& body) {
  return text_response(status, dump(body));
}

HttpResponse Server::Impl::text_response(int status, std::string body) {
  metrics.responses_4xx += status >= 400 && status < 500;
  metrics.responses_5xx += status >= 500;
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  if (status == 429 || status == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

void Server::Impl::respond_in_order(const Out& out, int status,
                                    const nlohmann::ordered_json& body) {
  out->reply(text_response(status, dump(body)));
}

HttpResponse Server::Impl::error_response(const HttpError& e) {
  return json_response(e.status, error_body(e));
}

Result<std::string> Server::Impl::client_of(const HttpRequest& req) const {
  if (req.count("authorization") > 1)
    return make_error(ErrorCode::InvalidArgument, "several Authorization headers");
  if (keys.empty()) return "ip:" + req.peer;
  const std::string raw = req.raw_authorization.empty() ? "" : req.raw_authorization[0];
  const std::string x_api_key = req.header("x-api-key");  // Anthropic's clients send it
  int found = -1;
  for (size_t i = 0; i < keys.size(); ++i)
    if (same_secret(raw, "Bearer " + keys[i]) ||
        (!x_api_key.empty() && same_secret(x_api_key, keys[i])))
      found = int(i);
  if (found < 0)
    return make_error(ErrorCode::NotFound,
                      "missing or wrong API key (Authorization: Bearer KEY, or x-api-key: KEY)");
  return fmt::format("key:{}", found);
}

// Anthropic's routes answer their head's refusals in its shape too.
std::optional<HttpResponse> Server::Impl::inspect(HttpRequest& head) {
  auto r = inspect_head(head);
  if (r && r->status >= 400 && head.path.starts_with("/v1/messages"))
    r->body = anthropic_error_body(r->status, r->body);
  return r;
}

std::optional<HttpResponse> Server::Impl::inspect_head(HttpRequest& head) {
  const std::string method = head.method == "HEAD" ? "GET" : head.method;
  const Route* route = nullptr;
  std::string allow;
  for (const Route& r : routes) {
    std::smatch m;
    if (!std::regex_match(head.path, m, r.path)) continue;
    if (r.method == method && !route) {
      route = &r;
      head.route = int(&r - routes.data());
      head.params.assign(m.begin(), m.end());
    }
    allow += (allow.empty() ? "" : ", ") + r.method + (r.method == "GET" ? ", HEAD" : "");
  }
  if (allow.empty()) return error_response(no_route());
  if (!route) {
    HttpResponse r = error_response({405, fmt::format("{} is not allowed here", head.method),
                                     "invalid_request_error", "method_not_allowed"});
    r.headers.push_back({"Allow", allow});
    return r;
  }
  if (!route->open) {
    auto client = client_of(head);
    if (!client.ok() && client.code() == ErrorCode::InvalidArgument)
      return error_response({400, client.message(), "invalid_request_error", "duplicate_header"});
    if (!client.ok()) {
      HttpResponse r =
          error_response({401, client.message(), "authentication_error", "invalid_api_key"});
      r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return r;
    }
    head.client = *client;  // the front's per-client shares
  }
  if (head.content_length > int64_t(opts.max_body_bytes))
    return error_response({413,
                           fmt::format("the request body exceeds {} bytes", opts.max_body_bytes),
                           "invalid_request_error", "body_too_large"});
  if (head.has_body && !is_json_type(head.header("content-type")))
    return error_response({415, "the body must be JSON (Content-Type: application/json)",
                           "invalid_request_error", "unsupported_media_type"});
  if (!route->handler) return inline_route(head);
  return std::nullopt;
}

std::optional<HttpResponse> Server::Impl::inline_route(const HttpRequest& head) {
  if (head.path == "/health")
    return json_response(200, {{"status", "ok"},
                               {"model", opts.model_name},
                               {"arch", arch_name(model.cfg.arch)},
                               {"ctx_len", model.cfg.ctx_len}});
  if (head.path == "/v1/models") return json_response(200, models_body());
  if (head.path == "/v1/stats") return json_response(200, stats_body());
  if (head.path == "/" || head.path.starts_with("/ui/")) return web_response(head);
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = render_metrics(metrics, ctx->store(), scheduler->queued());
  return r;
}

// The route and the client were found by inspect(), on the I/O thread, from the same head.
void Server::Impl::dispatch(HttpRequest req, Out out) {
  if (req.route < 0 || !routes[size_t(req.route)].handler) return respond_error(out, no_route());
  const Route& r = routes[size_t(req.route)];
  try {
    (this->*r.handler)(req, req.params, req.client, out);
  } catch (const std::exception& e) {  // never let an exception cross the handler
    respond_error(out,
                  {500, std::string("internal error: ") + e.what(), "server_error", "internal"});
  }
}

}  // namespace kamera
