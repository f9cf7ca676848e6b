// A chat request's response_format and tool fields as a decoding plan (toolcall/request.h), and
// the plan's grammar compiled for the model's vocabulary: once per grammar key, kept across
// requests with the masks their generations filled (grammar/grammar_cache.h).
#include "server/server_impl.h"

namespace kamera {

namespace {

bool asks_for_decoding(const json& body) {
  for (const char* k : {"response_format", "tools", "tool_choice", "parallel_tool_calls"})
    if (body.contains(k) && !body[k].is_null()) return true;
  return false;
}

}  // namespace

std::variant<toolcall::DecodePlan, HttpError> Server::Impl::plan_chat(const json& body,
                                                                      std::string_view raw) {
  if (!asks_for_decoding(body)) return toolcall::DecodePlan{};
  // The body again, in its order: a schema's properties are written in the order it lists them.
  const auto ordered = nlohmann::ordered_json::parse(raw, nullptr, false);
  if (ordered.is_discarded() || !ordered.is_object())
    return HttpError{400, "the request body must be a JSON object"};
  auto plan = toolcall::plan_decoding(ordered, tool_format);
  if (auto* e = std::get_if<toolcall::PlanError>(&plan))  // the request's fault: 400, by name
    return HttpError{
        400, e->error.message, "invalid_request_error",
        e->error.code == ErrorCode::Unsupported ? "unsupported_field" : "invalid_value", e->param};
  return std::get<toolcall::DecodePlan>(std::move(plan));
}

std::optional<HttpError> Server::Impl::apply_plan(const toolcall::DecodePlan& plan,
                                                  std::vector<GenRequest>& reqs) {
  for (GenRequest& r : reqs)
    if (plan.parse_calls) r.tool_calls = plan.format;
  if (!plan.grammar) return std::nullopt;
  const char* param = plan.json_output ? "response_format" : "tools";
  if (!model.tokenizer)
    return HttpError{400, "constrained decoding needs a model with a vocabulary",
                     "invalid_request_error", "invalid_value", param};
  std::call_once(grammars_once, [this] {
    grammars = std::make_unique<grammar::GrammarCache>(
        grammar::TokenTrie::from_tokenizer(*model.tokenizer), 64);
  });
  auto compiled = grammars->get(plan.grammar_key, [&plan]() { return plan.grammar; });
  if (!compiled.ok()) {
    HttpError h = http_error(compiled.error());
    h.param = param;
    return h;
  }
  for (GenRequest& r : reqs) {
    r.grammar = *compiled;
    r.grammar_trigger = plan.trigger;
  }
  return std::nullopt;
}

}  // namespace kamera
