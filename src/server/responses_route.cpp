// POST /v1/responses: OpenAI's Responses API, translated into the chat request every API shares
// (server/responses_api.h) and answered from the typed events (server/responses_sink.h); a request
// naming previous_response_id continues a stored response (server/response_store.h): its input
// and output items come before the request's input, so the prompt extends the one it answered
// and is served from the prefix cache. GET and DELETE /v1/responses/{id}: the stored responses.
#include <ctime>

#include "server/responses_api.h"
#include "server/responses_sink.h"
#include "server/server_impl.h"

namespace kamera {

namespace {

using ojson = nlohmann::ordered_json;

// Stored responses are a key's own when the server has API keys (server/response_store.h).
std::string owner_of(const std::string& client) {
  return client.starts_with("key:") ? client : "";
}

HttpError not_stored(const std::string& id, int status, const std::string& param) {
  return {status,
          fmt::format("no stored response \"{}\" (unknown, deleted, evicted from the store "
                      "(kamera serve --responses-store-mb), or made with \"store\": false)",
                      id),
          "invalid_request_error", status == 404 ? "not_found" : "previous_response_not_found",
          param};
}

// Each item_reference of `input` replaced by the stored item it names (an output item of an
// earlier response, as clients that keep `store` on send their history); one that no stored
// response holds is refused naming it.
std::optional<HttpError> resolve_references(ojson& input, const ResponseStore& store,
                                            const std::string& owner) {
  for (size_t i = 0; i < input.size(); ++i) {
    ojson& item = input[i];
    if (!item.is_object() || item.value("type", ojson()) != "item_reference") continue;
    const std::string param = fmt::format("input[{}].id", i);
    const ojson id = item.value("id", ojson());
    if (!id.is_string())
      return HttpError{400, fmt::format("\"{}\" must be a string", param), "invalid_request_error",
                       "invalid_value", param};
    auto found = store.item(id.get<std::string>(), owner);
    if (!found)
      return HttpError{400,
                       fmt::format("no stored item \"{}\" (item_reference names an item of a "
                                   "stored response: unknown, deleted, evicted from the store "
                                   "(kamera serve --responses-store-mb), or made with \"store\": "
                                   "false)",
                                   id.get<std::string>()),
                       "invalid_request_error", "item_not_found", param};
    item = std::move(*found);
  }
  return std::nullopt;
}

}  // namespace

void Server::Impl::responses(const HttpRequest& req, const PathParams&, const std::string& client,
                             Out out) {
  ++metrics.requests_responses;
  ojson body;  // parsed once, under the limits, in its order (schemas' property order)
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  std::string param;
  auto refused = [&](const Error& e) {  // the request's fault: 400, naming the field
    const bool unsupported = e.code == ErrorCode::Unsupported;
    respond_error(out, {400, e.message, "invalid_request_error",
                        unsupported ? "unsupported_field" : "invalid_value", param});
  };
  auto input = responses_input_items(body, &param);
  if (!input.ok()) return refused(input.error());
  const ojson previous = body.is_object() ? body.value("previous_response_id", ojson()) : ojson();
  if (!previous.is_null()) {
    if (!previous.is_string())
      return respond_error(out, {400, "\"previous_response_id\" must be a string",
                                 "invalid_request_error", "invalid_value", "previous_response_id"});
    const std::string id = previous.get<std::string>();
    auto stored = responses_store->get(id, owner_of(client));
    if (!stored) return respond_error(out, not_stored(id, 400, "previous_response_id"));
    ojson items = stored->conversation();
    for (auto& item : *input) items.push_back(std::move(item));
    *input = std::move(items);
    body["input"] = *input;
  }
  if (auto bad = resolve_references(*input, *responses_store, owner_of(client))) {
    return respond_error(out, *bad);
  }
  if (body.is_object() && body.contains("input") && body["input"].is_array())
    body["input"] = *input;
  auto r = responses_request(body, &param);
  if (!r.ok()) return refused(r.error());
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
    if (r->echo["store"] == true) {
      meta.store = responses_store;
      meta.owner = owner_of(client);
      meta.input = *input;
    }
    auto sink = std::make_shared<ResponsesSink>(
        meta, out,
        [this, out](int status, const nlohmann::ordered_json& b) {
          respond_in_order(out, status, b);
        },
        std::move(cancelled), answers->serial());
    return sink->sink();
  };
  serve_generation(r->chat, client, "", true, out, make_sink, responses_param);
}

void Server::Impl::get_response(const HttpRequest&, const PathParams& m, const std::string& client,
                                Out out) {
  auto stored = responses_store->get(m[1], owner_of(client));
  if (!stored) return respond_error(out, not_stored(m[1], 404, ""));
  respond_in_order(out, 200, stored->object);
}

void Server::Impl::delete_response(const HttpRequest&, const PathParams& m,
                                   const std::string& client, Out out) {
  if (!responses_store->erase(m[1], owner_of(client)))
    return respond_error(out, not_stored(m[1], 404, ""));
  respond(out, 200, {{"id", m[1]}, {"object", "response"}, {"deleted", true}});
}

}  // namespace kamera
