// POST /v1/responses: OpenAI's Responses API, translated into the chat request every API shares
// (server/responses_api.h) and answered from the typed events (server/responses_sink.h).
#include <ctime>

#include "server/responses_api.h"
#include "server/responses_sink.h"
#include "server/server_impl.h"

namespace kamera {

void Server::Impl::responses(const HttpRequest& req, const PathParams&, const std::string& client,
                             Out out) {
  ++metrics.requests_responses;
  json checked;  // parsed under the limits first; then in its order (schemas' property order)
  if (auto bad = parse_body(req.body, json_limits, checked)) return respond_error(out, *bad);
  std::string param;
  auto r = responses_request(nlohmann::ordered_json::parse(req.body), &param);
  if (!r.ok()) {  // the request's fault: 400, naming the field
    const bool unsupported = r.code() == ErrorCode::Unsupported;
    return respond_error(out, {400, r.message(), "invalid_request_error",
                               unsupported ? "unsupported_field" : "invalid_value", param});
  }
  const std::string raw = r->chat.dump();
  json body = json::parse(raw);
  auto make_sink = [&](const std::vector<GenRequest>& reqs,
                       const std::shared_ptr<RequestMedia>& images,
                       std::shared_ptr<std::atomic<bool>> cancelled) {
    ResponsesMeta meta;
    meta.id = fmt::format("resp_{:016x}{:08x}", completion_salt, ++completion_counter);
    meta.model = opts.model_name;
    meta.created = int64_t(std::time(nullptr));
    meta.stream = reqs.front().stream;
    meta.echo = r->echo;
    meta.tool_calls = reqs.front().tool_calls;
    meta.reasoning = reqs.front().reasoning;
    meta.media = images;
    auto sink = std::make_shared<ResponsesSink>(
        meta, out, [this, out](int status, const json& b) { respond(out, status, b); },
        std::move(cancelled), answers->serial());
    return sink->sink();
  };
  serve_generation(body, raw, client, "", true, out, make_sink, responses_param);
}

}  // namespace kamera
