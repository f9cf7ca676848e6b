// A chat request's response_format and tool fields as a decoding plan (toolcall/request.h), its
// grammars compiled under the request's budget (grammar/budget.h: states, CPU time, cancelled
// when the client leaves or the server stops), and the plan's grammar compiled for the model's
// vocabulary: once per grammar key, kept across requests with the masks their generations filled
// (grammar/grammar_cache.h, bounded by bytes).
#include <malloc.h>

#include "server/request_segments.h"
#include "server/server_impl.h"

namespace kamera {

namespace {

// A compile past this many states leaves megabytes of freed automata in the worker's arena.
constexpr size_t kTrimAfterStates = 20000;

// The refusal of a request whose budget stopped its compile: the field, and why.
HttpError budget_refusal(HttpError e, grammar::Budget::Stop why, bool stopping) {
  if (why == grammar::Budget::Stop::Cancelled)
    return stopping ? HttpError{503, "the server is stopping", "server_error", "stopping"}
                    : HttpError{400, "the client left while its grammar compiled",
                                "invalid_request_error", "cancelled", e.param};
  e.code = "grammar_budget_exceeded";
  return e;
}

}  // namespace

std::variant<toolcall::DecodePlan, HttpError> Server::Impl::plan_chat(
    const nlohmann::ordered_json& body, const Out& out) {
  grammar::Budget budget({opts.grammar_states, opts.grammar_seconds},
                         [this, out] { return out->gone() || stopped.load(); });
  auto plan = plan_chat_fields(body, tool_format, &budget);
  if (budget.states() > kTrimAfterStates) malloc_trim(0);  // refused or not: give it back
  if (auto* e = std::get_if<HttpError>(&plan); e && budget.stopped() != grammar::Budget::Stop::None)
    return budget_refusal(*e, budget.stopped(), stopped.load());
  return plan;
}

std::optional<HttpError> Server::Impl::apply_plan(const toolcall::DecodePlan& plan,
                                                  std::vector<GenRequest>& reqs) {
  // harmony's channels are parsed in every chat (toolcall/harmony.h), with tools or not.
  const bool harmony = plan.format == toolcall::Format::Harmony;
  for (GenRequest& r : reqs)
    if (plan.parse_calls || harmony) r.tool_calls = plan.format;
  if (!plan.grammar) return std::nullopt;
  const char* param = plan.json_output ? "response_format" : "tools";
  if (!model.tokenizer)
    return HttpError{400, "constrained decoding needs a model with a vocabulary",
                     "invalid_request_error", "invalid_value", param};
  std::call_once(grammars_once, [this] {
    grammars = std::make_unique<grammar::GrammarCache>(
        grammar::TokenTrie::from_tokenizer(*model.tokenizer), opts.grammar_cache_bytes);
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
