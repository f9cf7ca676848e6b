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

// A harmony call's header as gpt-oss writes it (its <|call|> ends the generation).
std::string harmony_call_header(const std::string& name) {
  return std::string(kHarmonyChannel) + "commentary to=functions." + name + " " +
         std::string(kHarmonyConstrain) + "json" + std::string(kHarmonyMessage);
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
    case Format::Harmony:
      return Expr::seq({Expr::lit(harmony_call_header(name)), args});
    case Format::DeepSeek3:
      break;
  }
  return Expr::seq({Expr::lit(std::string(kDsCallBegin) + "function" + std::string(kDsSep) + name +
                              std::string(kDsArgsOpen)),
                    args, Expr::lit(std::string(kDsArgsClose) + std::string(kDsCallEnd))});
}

}  // namespace

Expr harmony_analysis() {
  const grammar::ByteSet not_lt = ~grammar::byte_range('<', '<');
  const grammar::ByteSet not_bar = ~grammar::byte_range('|', '|');
  const Expr text = Expr::star(
      Expr::alt({Expr::bytes(not_lt), Expr::seq({Expr::lit("<"), Expr::bytes(not_bar)})}));
  return Expr::opt(Expr::seq(
      {Expr::lit(std::string(kHarmonyChannel) + "analysis" + std::string(kHarmonyMessage)), text,
       Expr::lit(std::string(kHarmonyEnd) + std::string(kHarmonyStart) + "assistant")}));
}

Result<std::shared_ptr<const grammar::Grammar>> harmony_json_grammar(
    const nlohmann::ordered_json* schema, grammar::Budget* budget) {
  auto g = std::make_shared<grammar::Grammar>();
  grammar::JsonRules rules(*g, budget);  // the layout of response_format's other grammars
  Result<Expr> doc = Error{};
  if (schema) {
    doc = grammar::json_schema_expr(rules, *schema);
  } else {
    auto o = rules.any_object();
    if (!o.ok()) return o.error();
    doc = Expr::call(*o);
  }
  if (!doc.ok()) return doc.error();
  const Expr seq =
      Expr::seq({harmony_analysis(),
                 Expr::lit(std::string(kHarmonyChannel) + "final" + std::string(kHarmonyMessage)),
                 rules.ws(), *doc});
  auto root = rules.rule("root", seq);
  if (!root.ok()) return root.error();
  KAMERA_TRY(g->finish(*root));
  return std::shared_ptr<const grammar::Grammar>(std::move(g));
}

std::string_view call_trigger(Format f) {
  switch (f) {
    case Format::Hermes:
      return kHermesOpen;
    case Format::Llama3:
      return "{\"name\"";
    case Format::Harmony:
      return kHarmonyCallTrigger;
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
  // llama3's templates take one call a message; harmony's <|call|> ends the generation.
  const bool many = c.parallel && f != Format::Llama3 && f != Format::Harmony;
  const Expr sep = f == Format::Hermes ? Expr::lit("\n") : Expr::opt(Expr::lit("\n"));
  Expr seq = many ? Expr::seq({Expr::call(call), Expr::star(Expr::seq({sep, Expr::call(call)}))})
                  : Expr::call(call);
  if (f == Format::DeepSeek3)
    seq = Expr::seq(
        {Expr::lit(std::string(kDsCallsBegin)), seq, Expr::lit(std::string(kDsCallsEnd))});
  if (f == Format::Harmony) seq = Expr::seq({harmony_analysis(), seq});
  auto root = rules.rule("root", seq);
  if (!root.ok()) return root.error();
  KAMERA_TRY(g->finish(*root));
  return std::shared_ptr<const grammar::Grammar>(std::move(g));
}

}  // namespace kamera::toolcall
