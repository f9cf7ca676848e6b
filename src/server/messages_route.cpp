// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, translated into the
// chat request every API shares (server/messages_api.h) and answered from the typed events
// (server/messages_sink.h); every error on these routes in Anthropic's shape.
#include "server/messages_api.h"
#include "server/messages_sink.h"
#include "server/prompt_tokens.h"
#include "server/server_impl.h"

namespace kamera {

namespace {

// A Responder that answers errors in Anthropic's shape ({"type": "error", "error": ...}).
class AnthropicErrors : public Responder {
 public:
  explicit AnthropicErrors(std::shared_ptr<Responder> in) : in_(std::move(in)) {}
  void reply(HttpResponse r) override {
    if (r.status >= 400) r.body = anthropic_error_body(r.status, r.body);
    in_->reply(std::move(r));
  }
  void begin_stream(int status, const std::string& type, HttpHeaders headers) override {
    in_->begin_stream(status, type, std::move(headers));
  }
  void write(std::string data) override { in_->write(std::move(data)); }
  void end() override { in_->end(); }
  bool gone() const override { return in_->gone(); }
  void on_gone(std::function<void()> fn) override { in_->on_gone(std::move(fn)); }

 private:
  std::shared_ptr<Responder> in_;
};

}  // namespace

// The request's chat body (in the request's order: schemas' property order), or nullopt when
// refused (answered). The body is parsed once, under the limits.
std::optional<nlohmann::ordered_json> Server::Impl::messages_body(const HttpRequest& req,
                                                                  bool count_only, const Out& out,
                                                                  MessagePlaces& places) {
  nlohmann::ordered_json body;
  if (auto bad = parse_body(req.body, json_limits, body)) {
    respond_error(out, *bad);
    return std::nullopt;
  }
  std::string param;
  auto r = messages_request(body, count_only, &param, &places);
  if (!r.ok()) {  // the request's fault: 400, naming the field
    const bool unsupported = r.code() == ErrorCode::Unsupported;
    respond_error(out, {400, r.message(), "invalid_request_error",
                        unsupported ? "unsupported_field" : "invalid_value", param});
    return std::nullopt;
  }
  return std::move(r.value());
}

void Server::Impl::messages(const HttpRequest& req, const PathParams&, const std::string& client,
                            Out plain) {
  ++metrics.requests_messages;
  Out out = std::make_shared<AnthropicErrors>(std::move(plain));
  MessagePlaces places;
  auto chat = messages_body(req, false, out, places);
  if (!chat) return;
  auto make_sink = [&](const std::vector<GenRequest>& reqs, const std::shared_ptr<RequestMedia>&,
                       std::shared_ptr<std::atomic<bool>> cancelled) {
    MessagesMeta meta;
    meta.id = fmt::format("msg_{:016x}{:08x}", completion_salt, ++completion_counter);
    meta.model = opts.model_name;
    meta.stream = reqs.front().stream;
    meta.tool_calls = reqs.front().tool_calls;
    meta.reasoning = reqs.front().reasoning;
    auto sink = std::make_shared<MessagesSink>(
        meta, out,
        [this, out](int status, const nlohmann::ordered_json& b) {
          respond_in_order(out, status, b);
        },
        std::move(cancelled), answers->serial());
    return sink->sink();
  };
  auto rename = [&places](const std::string& p) { return places.rename(p); };
  serve_generation(*chat, client, "", true, out, make_sink, rename);
}

// The prompt's tokens as /v1/messages would count them (usage.input_tokens), nothing generated.
void Server::Impl::count_tokens(const HttpRequest& req, const PathParams&, const std::string&,
                                Out plain) {
  ++metrics.requests_messages;
  Out out = std::make_shared<AnthropicErrors>(std::move(plain));
  MessagePlaces places;
  auto chat = messages_body(req, true, out, places);
  if (!chat) return;
  ojson& body = *chat;
  auto images = std::make_shared<RequestMedia>();
  if (auto refused = prepare_media(body, true, *images, out)) {
    refused->param = places.rename(refused->param);
    return respond_error(out, *refused);
  }
  auto rename = [&places](const std::string& p) { return places.rename(p); };
  auto reqs = parse_generation(body, "", true, out, rename, images.get());
  if (!reqs) return;
  GenRequest& g = reqs->front();
  if (images->images > 0) g.media = images;
  const TokenizeOptions to{opts.control_tokens_in_text, opts.segment_cache_bytes != 0};
  if (Status st = tokenize_prompt(ctx->cache(), g, to); !st.ok()) {
    HttpError e = http_error(st.error());
    e.param = "messages";
    return respond_error(out, e);
  }
  respond(out, 200, {{"input_tokens", g.plan.ids.size()}});
}

}  // namespace kamera
