// Server::Impl, shared by the files of the server: server.cpp (start and stop), http_api.cpp
// (routing, authentication, refusals before the body), completions.cpp (completion requests and
// their answers), chunk_api.cpp (chunk and window routes), tokenize_api.cpp (/tokenize and
// /detokenize).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <variant>
#include <vector>

#include "context/context.h"
#include "grammar/grammar_cache.h"
#include "server/cluster_events.h"
#include "server/http_front.h"
#include "server/media_parts.h"
#include "server/openai.h"
#include "server/prometheus.h"
#include "server/scheduler.h"
#include "server/server.h"
#include "server/window_ops.h"
#include "toolcall/request.h"

namespace kamera {

struct Server::Impl {
  using Out = std::shared_ptr<Responder>;
  // A route's handler, on a worker thread: the request, its path's matches, the client.
  using Handler = void (Impl::*)(const HttpRequest&, const std::smatch&, const std::string&, Out);
  struct Route {
    std::string method;
    std::regex path;
    Handler handler = nullptr;
    bool open = false;  // no API key needed (/health)
  };

  std::shared_ptr<const Model> model_ptr;
  const Model& model;
  ServerOptions opts;
  ServerMetrics metrics;
  std::vector<std::string> keys;  // accepted API keys
  size_t max_prompt_bytes = 0;    // longer prompt text cannot fit the context
  size_t max_chunk_bytes = 0;     // longer chunk text cannot fit the chunk limit
  JsonLimits json_limits;         // bodies are refused while parsed past these
  std::atomic<uint64_t> completion_counter{0};
  uint64_t completion_salt = 0;
  std::mutex inflight_mu;
  std::map<std::string, int> inflight;  // completions queued or decoding, per client
  std::vector<Route> routes;
  std::optional<ChatTemplate> chat_template;    // renders chat messages; none: "role: content"
  std::optional<toolcall::Format> tool_format;  // the template's tool-call format (none: no tools)
  std::once_flag grammars_once;
  std::unique_ptr<grammar::GrammarCache> grammars;  // compiled on first use, shared by requests
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ServerMedia> media;  // --mmproj: images in chat messages
  std::optional<WordVocab> words;      // the mini-VL pair: its word prompt (server/prompt_parts.h)
  std::unique_ptr<WindowRegistry> windows;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HttpFront> front;
  std::unique_ptr<ClusterEvents> events;  // with --redis: what this server holds, for routers
  std::atomic<bool> stopped{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;

  Impl(std::shared_ptr<const Model> m, const ServerOptions& o);

  // server.cpp
  Status open_context();
  Result<std::vector<std::shared_ptr<StoreTier>>> open_tiers();
  Status open_front();
  Status open_events();  // after the front is bound (its URL names this server)

  // http_api.cpp
  void add_routes();
  std::optional<HttpResponse> inspect(HttpRequest& head);  // names head.client
  void dispatch(HttpRequest req, Out out);
  // The client a request speaks for ("key:N" or "ip:ADDR"), or the refusal of its credentials.
  Result<std::string> client_of(const HttpRequest& req) const;
  // The body bounded by json_limits; an empty body is {} (routes whose fields are optional).
  std::optional<HttpError> parse_optional_body(const HttpRequest& req, json& out) const {
    return req.body.empty() ? std::nullopt : parse_body(req.body, json_limits, out);
  }
  HttpResponse json_response(int status, const json& body);
  HttpResponse error_response(const HttpError& e);
  void respond(const Out& out, int status, const json& body) {
    out->reply(json_response(status, body));
  }
  void respond_error(const Out& out, const HttpError& e) { out->reply(error_response(e)); }
  // Runs fn on the scheduler thread and answers with its result (`ok` on success), unless
  // `refuse` (run there first) gives a refusal.
  void on_scheduler(const Out& out, std::function<Result<json>()> fn, int ok = 200,
                    std::function<std::optional<HttpError>()> refuse = nullptr);
  std::optional<HttpResponse> inline_route(const HttpRequest& head);
  HttpResponse web_response(const HttpRequest& head);  // web_routes.cpp: GET /, /ui/NAME

  // completions.cpp
  void completions(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void chat(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void window_completions(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void generate(const HttpRequest& req, const std::string& client, const std::string& window,
                bool chat, const Out& out);
  std::optional<std::vector<GenRequest>> parse_generation(const json& body, std::string_view raw,
                                                          const std::string& window, bool chat,
                                                          const Out& out);
  Status check_prompt_size(const GenRequest& r) const;
  std::optional<HttpError> prepare_media(json& body, bool chat, RequestMedia& out);
  // tool_requests.cpp: what response_format, tools, tool_choice and parallel_tool_calls ask of
  // decoding (the raw body keeps the schemas' property order), refused with the field named;
  // then the plan's grammar, compiled once per key, on each request.
  // The compile is cancelled when the client leaves or the server stops.
  std::variant<toolcall::DecodePlan, HttpError> plan_chat(const json& body, std::string_view raw,
                                                          const Out& out);
  std::optional<HttpError> apply_plan(const toolcall::DecodePlan& plan,
                                      std::vector<GenRequest>& reqs);
  // A hold on one of the client's request slots (released when dropped), or none past its cap.
  std::shared_ptr<void> client_slot(const std::string& client);

  // model_routes.cpp: /v1/embeddings, and the body of /v1/models
  void embeddings(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  json models_body() const;
  json stats_body() const;  // stats_route.cpp: GET /v1/stats

  // chunk_api.cpp
  void post_chunk(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void get_chunk(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void delete_chunk(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void post_window(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void get_window(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void delete_window(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void edit_window(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void window_op(const Out& out, const std::string& client, const std::string& id,
                 const std::string& op, std::shared_ptr<const json> body,
                 std::function<Result<json>()> fn, int ok);

  // tokenize_api.cpp
  void tokenize_route(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
  void detokenize_route(const HttpRequest& r, const std::smatch& m, const std::string& c, Out o);
};

}  // namespace kamera
