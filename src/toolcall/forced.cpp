#include "toolcall/forced.h"

#include "grammar/json_rules.h"
#include "grammar/json_schema.h"

namespace kamera::toolcall {

using grammar::Expr;

namespace {

Result<Expr> arguments(grammar::JsonRules& rules, const ToolSpec& t) {
  if (t.parameters.is_null()) {
    auto o = rules.any_object();
    if (!o.ok()) return o.error();
    return Expr::call(*o);
  }
  auto e = grammar::json_schema_expr(rules, t.parameters);
  if (!e.ok()) return with_context(e.error(), "tool '" + t.name + "' parameters");
  return e;
}

Expr one_call(Format f, const std::string& name, const Expr& args) {
  const std::string quoted = nlohmann::json(name).dump();
  switch (f) {
    case Format::Hermes:
      return Expr::seq(
          {Expr::lit(std::string(kHermesOpen) + "\n{\"name\": " + quoted + ", \"arguments\": "),
           args, Expr::lit("}\n" + std::string(kHermesClose))});
    case Format::Llama3:
      return Expr::seq(
          {Expr::lit("{\"name\": " + quoted + ", \"parameters\": "), args, Expr::lit("}")});
    case Format::DeepSeek3:
      break;
  }
  return Expr::seq({Expr::lit(std::string(kDsCallBegin) + "function" + std::string(kDsSep) + name +
                              std::string(kDsArgsOpen)),
                    args, Expr::lit(std::string(kDsArgsClose) + std::string(kDsCallEnd))});
}

}  // namespace

std::string_view call_trigger(Format f) {
  switch (f) {
    case Format::Hermes:
      return kHermesOpen;
    case Format::Llama3:
      return "{\"name\"";
    case Format::DeepSeek3:
      break;
  }
  return kDsCallsBegin;
}

Result<std::shared_ptr<const grammar::Grammar>> forced_calls_grammar(Format f, const ForcedCalls& c,
                                                                     grammar::Budget* budget) {
  if (c.tools.empty()) return make_error(ErrorCode::InvalidArgument, "tool calls: no tool to call");
  auto g = std::make_shared<grammar::Grammar>();
  grammar::JsonRules rules(*g, budget, grammar::Layout::Compact);  // no token spent on layout
  std::vector<Expr> calls;
  for (const ToolSpec& t : c.tools) {
    auto args = arguments(rules, t);
    if (!args.ok()) return args.error();
    calls.push_back(one_call(f, t.name, *args));
  }
  const int32_t call = g->declare("call");
  auto ca = Expr::alt(std::move(calls)).compile(rules.budget());
  if (!ca.ok()) return ca.error();
  KAMERA_TRY(g->define(call, *ca));
  const bool many = c.parallel && f != Format::Llama3;
  const Expr sep = f == Format::Hermes ? Expr::lit("\n") : Expr::opt(Expr::lit("\n"));
  Expr seq = many ? Expr::seq({Expr::call(call), Expr::star(Expr::seq({sep, Expr::call(call)}))})
                  : Expr::call(call);
  if (f == Format::DeepSeek3)
    seq = Expr::seq(
        {Expr::lit(std::string(kDsCallsBegin)), seq, Expr::lit(std::string(kDsCallsEnd))});
  auto root = rules.rule("root", seq);
  if (!root.ok()) return root.error();
  KAMERA_TRY(g->finish(*root));
  return std::shared_ptr<const grammar::Grammar>(std::move(g));
}

}  // namespace kamera::toolcall
