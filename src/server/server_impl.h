// Server::Impl, shared by the files of the server: server.cpp (start and stop), http_api.cpp
// (routing, authentication, refusals before the body), completions.cpp (completion requests and
// their answers), chunk_routes.cpp (chunk and window routes), model_routes.cpp (/v1/embeddings,
// /v1/models), tokenize_routes.cpp (/tokenize and /detokenize), stats_route.cpp (/v1/stats),
// web_routes.cpp (the web page), tool_requests.cpp (response_format and tools).
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
#include "model/rerank.h"
#include "serve/scheduler.h"
#include "server/answer_threads.h"
#include "server/cluster_events.h"
#include "server/http_front.h"
#include "server/media_parts.h"
#include "server/openai.h"
#include "server/prometheus.h"
#include "server/response_store.h"
#include "server/server.h"
#include "server/window_ops.h"
#include "toolcall/request.h"

namespace kamera {
struct MessagePlaces;  // server/messages_api.h

struct Server::Impl {
  using Out = std::shared_ptr<Responder>;
  using PathParams = std::vector<std::string>;
  // A route's handler, on a worker thread: the request, its path's captures (params[1], ...),
  // the client (both found once, by inspect()).
  using Handler = void (Impl::*)(const HttpRequest&, const PathParams&, const std::string&, Out);
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
  bool reasoning = false;  // the template writes <think> blocks and --reasoning-format parsed
  RerankInfo reranker;     // the model's classifier head when it is a reranker (server/rerank.h)
  std::once_flag grammars_once;
  std::unique_ptr<grammar::GrammarCache> grammars;  // compiled on first use, shared by requests
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ServerMedia> media;  // --mmproj: images in chat messages
  std::optional<WordVocab> words;      // the mini-VL pair: its word prompt (server/prompt_parts.h)
  std::unique_ptr<WindowRegistry> windows;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<AnswerThreads> answers;  // JSON of answers is built there (never the engine's)
  std::unique_ptr<HttpFront> front;
  std::unique_ptr<ClusterEvents> events;  // with --redis: what this server holds, for routers
  std::shared_ptr<ResponseStore> responses_store;  // the Responses API's stored responses
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
  std::optional<HttpResponse> inspect(HttpRequest& head);       // names head.client
  std::optional<HttpResponse> inspect_head(HttpRequest& head);  // inspect's, in OpenAI's shape
  void dispatch(HttpRequest req, Out out);
  // The client a request speaks for ("key:N" or "ip:ADDR"), or the refusal of its credentials.
  Result<std::string> client_of(const HttpRequest& req) const;
  // The body bounded by json_limits; an empty body is {} (routes whose fields are optional).
  std::optional<HttpError> parse_optional_body(const HttpRequest& req, json& out) const {
    return req.body.empty() ? std::nullopt : parse_body(req.body, json_limits, out);
  }
  HttpResponse json_response(int status, const json& body);
  HttpResponse text_response(int status, std::string json_text);
  HttpResponse error_response(const HttpError& e);
  void respond(const Out& out, int status, const json& body) {
    out->reply(json_response(status, body));
  }
  // The same with the keys in their order (the Responses and Messages APIs' objects).
  void respond_in_order(const Out& out, int status, const nlohmann::ordered_json& body);
  void respond_error(const Out& out, const HttpError& e) { out->reply(error_response(e)); }
  // An error answered from the answer threads (from any thread, the scheduler's included).
  void answer_error(const Out& out, HttpError e) {
    answers->post([this, out, e = std::move(e)] { respond_error(out, e); });
  }
  // Runs fn (a Result<T>) on the scheduler thread, then answers on the answer threads with
  // to_json(T) and status `ok`, or with the error; unless `refuse` (run on the scheduler first)
  // gives a refusal. The engine side returns typed values: the JSON is built off its thread.
  template <class Fn, class ToJson>
  void on_scheduler(const Out& out, Fn fn, ToJson to_json, int ok = 200,
                    std::function<std::optional<HttpError>()> refuse = nullptr) {
    const bool queued = scheduler->post([this, out, fn, to_json, refuse, ok](bool run) {
      if (!run)
        return answer_error(out, {503, "the server is stopping", "server_error", "stopping"});
      try {
        if (refuse)
          if (auto e = refuse()) return answer_error(out, *e);
        auto r = fn();
        if (!r.ok()) return answer_error(out, http_error(r.error()));
        answers->post(
            [this, out, v = std::move(*r), to_json, ok] { respond(out, ok, to_json(v)); });
      } catch (const std::exception& e) {  // never let an exception end the scheduler thread
        answer_error(out,
                     {500, std::string("internal error: ") + e.what(), "server_error", "internal"});
      }
    });
    if (!queued)
      respond_error(out, {429, "the server is busy: too many queued requests", "rate_limit_error",
                          "queue_full"});
  }
  std::optional<HttpResponse> inline_route(const HttpRequest& head);
  HttpResponse web_response(const HttpRequest& head);  // web_routes.cpp: GET /, /ui/NAME

  // completions.cpp
  void completions(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void chat(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void window_completions(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void generate(const HttpRequest& req, const std::string& client, const std::string& window,
                bool chat, const Out& out);
  // The field of another API a chat field is (server/responses_api.h); null: the same.
  using ParamName = std::function<std::string(const std::string&)>;
  // The answer's event sink, from the request's generations, its images (null: none) and the
  // flag that cancels them.
  using MakeSink =
      std::function<EventSink(const std::vector<GenRequest>&, const std::shared_ptr<RequestMedia>&,
                              std::shared_ptr<std::atomic<bool>>)>;
  // A chat (or completions) body of any API: media prepared, parsed, tokenized on this worker
  // and queued, answered through make_sink's sink; refusals name rename(field). `body` is the
  // body as parsed (once, in its order: schemas' property order), which prepare_media reads
  // (media into RequestMedia by place, the body unchanged) and the prompt code renders.
  void serve_generation(ojson& body, const std::string& client, const std::string& window,
                        bool chat, const Out& out, const MakeSink& make_sink,
                        const ParamName& rename = nullptr);
  std::optional<std::vector<GenRequest>> parse_generation(const ojson& body,
                                                          const std::string& window, bool chat,
                                                          const Out& out,
                                                          const ParamName& rename = nullptr,
                                                          const RequestMedia* media = nullptr);
  // responses_route.cpp: POST /v1/responses (server/responses_api.h), GET and DELETE
  // /v1/responses/{id} (server/response_store.h)
  void responses(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void get_response(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void delete_response(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  // messages_route.cpp: POST /v1/messages, /v1/messages/count_tokens (server/messages_api.h)
  void messages(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void count_tokens(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  std::optional<nlohmann::ordered_json> messages_body(const HttpRequest& req, bool count_only,
                                                      const Out& out, MessagePlaces& places);
  Status check_prompt_size(const GenRequest& r) const;
  void mark_reasoning(GenRequest& r) const;
  std::optional<HttpError> prepare_media(const ojson& body, bool chat, RequestMedia& out,
                                         const Out& client);
  // tool_requests.cpp: what response_format, tools, tool_choice and parallel_tool_calls ask of
  // decoding (the body in its order: the schemas' property order), refused with the field named;
  // then the plan's grammar, compiled once per key, on each request.
  // The compile is cancelled when the client leaves or the server stops.
  std::variant<toolcall::DecodePlan, HttpError> plan_chat(const nlohmann::ordered_json& body,
                                                          const Out& out);
  std::optional<HttpError> apply_plan(const toolcall::DecodePlan& plan,
                                      std::vector<GenRequest>& reqs);
  // A hold on one of the client's request slots (released when dropped), or none past its cap.
  std::shared_ptr<void> client_slot(const std::string& client);

  // model_routes.cpp: /v1/embeddings, /v1/rerank (server/rerank.h), the body of /v1/models
  void embeddings(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void rerank(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  json models_body() const;
  json stats_body() const;  // stats_route.cpp: GET /v1/stats

  // chunk_routes.cpp
  void post_chunk(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void get_chunk(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void delete_chunk(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void post_window(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void get_window(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void delete_window(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void edit_window(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  // A window edit (e null: a create) on the scheduler thread, refused first past a quota.
  void window_op(const Out& out, const std::string& client, const std::string& id,
                 std::shared_ptr<const WindowEdit> e, std::function<Result<WindowView>()> fn,
                 int ok);

  // tokenize_routes.cpp
  void tokenize_route(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
  void detokenize_route(const HttpRequest& r, const PathParams& m, const std::string& c, Out o);
};

}  // namespace kamera
