// A chat request's response_format and tool fields as a decoding plan (toolcall/request.h), and
// the plan's grammar compiled for the model's vocabulary: once per grammar key, kept across
// requests with the masks their generations filled (grammar/grammar_cache.h).
#include "server/request_segments.h"
#include "server/server_impl.h"

namespace kamera {

std::variant<toolcall::DecodePlan, HttpError> Server::Impl::plan_chat(const json& body,
                                                                      std::string_view raw) {
  return plan_chat_fields(body, raw, tool_format);
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
