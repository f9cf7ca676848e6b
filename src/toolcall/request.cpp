#include "toolcall/request.h"

#include <set>

#include "grammar/json_schema.h"
#include "toolcall/forced.h"

namespace kamera::toolcall {

namespace {

using ojson = nlohmann::ordered_json;

PlanError bad(std::string param, const std::string& what,
              ErrorCode code = ErrorCode::InvalidArgument) {
  Error e{code, param + ": " + what};
  return PlanError{std::move(param), std::move(e)};
}

struct Tool {
  std::string name;
  ojson parameters;  // null: none given
  bool strict = false;
};

std::variant<Tool, PlanError> read_tool(const ojson& t, const std::string& at) {
  if (!t.is_object()) return bad(at, "a tool must be an object");
  if (t.value("type", ojson()) != "function")
    return bad(at + ".type", "only tools of type \"function\" are supported");
  const ojson f = t.value("function", ojson());
  if (!f.is_object()) return bad(at + ".function", "must be an object");
  Tool tool;
  const ojson name = f.value("name", ojson());
  if (!name.is_string() || name.get<std::string>().empty())
    return bad(at + ".function.name", "must be a non-empty string");
  tool.name = name.get<std::string>();
  tool.parameters = f.value("parameters", ojson());
  if (!tool.parameters.is_null() && !tool.parameters.is_object())
    return bad(at + ".function.parameters", "must be a JSON Schema object");
  const ojson strict = f.value("strict", ojson(false));
  if (!strict.is_boolean() && !strict.is_null())
    return bad(at + ".function.strict", "must be a boolean");
  tool.strict = strict.is_boolean() && strict.get<bool>();
  return tool;
}

std::variant<std::vector<Tool>, PlanError> read_tools(const ojson& body) {
  std::vector<Tool> out;
  const ojson tools = body.value("tools", ojson());
  if (tools.is_null()) return out;
  if (!tools.is_array()) return bad("tools", "must be an array of tools");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    auto t = read_tool(tools[i], at);
    if (auto* e = std::get_if<PlanError>(&t)) return *e;
    Tool& tool = std::get<Tool>(t);
    if (!names.insert(tool.name).second)
      return bad(at + ".function.name", "two tools are named '" + tool.name + "'");
    out.push_back(std::move(tool));
  }
  return out;
}

struct Choice {
  enum Kind { None, Auto, Required, Named } kind = None;
  std::string name;
};

std::variant<Choice, PlanError> read_choice(const ojson& body, const std::vector<Tool>& tools) {
  const ojson c = body.value("tool_choice", ojson());
  Choice out;
  if (c.is_null()) {
    out.kind = tools.empty() ? Choice::None : Choice::Auto;
  } else if (c == "none" || c == "auto" || c == "required") {
    out.kind = c == "none" ? Choice::None : c == "auto" ? Choice::Auto : Choice::Required;
  } else if (c.is_object() && c.value("type", ojson()) == "function" &&
             c.value("function", ojson()).is_object() &&
             c["function"].value("name", ojson()).is_string()) {
    out.kind = Choice::Named;
    out.name = c["function"]["name"].get<std::string>();
    bool found = false;
    for (const Tool& t : tools) found = found || t.name == out.name;
    if (!found) return bad("tool_choice", "names no tool of 'tools': '" + out.name + "'");
  } else {
    return bad("tool_choice",
               "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
               "\"function\": {\"name\": ...}}");
  }
  if (out.kind != Choice::None && tools.empty())
    return bad("tool_choice", "asks for a tool call but the request has no 'tools'");
  return out;
}

// harmony: the document in gpt-oss's final channel (forced.h).
std::variant<std::shared_ptr<const grammar::Grammar>, PlanError> read_format(
    const ojson& body, bool* json_output, grammar::Budget& budget, bool harmony) {
  const ojson rf = body.value("response_format", ojson());
  *json_output = false;
  if (rf.is_null()) return std::shared_ptr<const grammar::Grammar>();
  if (!rf.is_object()) return bad("response_format", "must be an object");
  const ojson type = rf.value("type", ojson());
  if (type == "text") return std::shared_ptr<const grammar::Grammar>();
  Result<std::shared_ptr<const grammar::Grammar>> g = Error{};
  std::string param = "response_format";
  if (type == "json_object") {
    g = harmony ? harmony_json_grammar(nullptr, &budget) : grammar::json_object_grammar(&budget);
  } else if (type == "json_schema") {
    const ojson js = rf.value("json_schema", ojson());
    if (!js.is_object() || !js.contains("schema"))
      return bad("response_format.json_schema", "must be an object with a 'schema'");
    param = "response_format.json_schema.schema";
    g = harmony ? harmony_json_grammar(&js["schema"], &budget)
                : grammar::json_schema_grammar(js["schema"], &budget);
  } else {
    return bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  if (!g.ok()) return PlanError{param, with_context(g.error(), param)};
  *json_output = true;
  return *g;
}

// The forced-call grammar over the tools `choice` allows. A tool whose parameters do not compile
// is any object unless it is strict; a spent budget is never worked around that way.
std::variant<std::shared_ptr<const grammar::Grammar>, PlanError> calls_grammar(
    const std::vector<Tool>& tools, const Choice& choice, bool parallel, Format format,
    grammar::Budget& budget) {
  ForcedCalls forced;
  forced.parallel = parallel;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Tool& t = tools[i];
    if (choice.kind == Choice::Named && t.name != choice.name) continue;
    ToolSpec spec{t.name, t.parameters};
    if (!t.parameters.is_null()) {
      auto g = grammar::json_schema_grammar(t.parameters, &budget);
      const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
      const bool spent = budget.stopped() != grammar::Budget::Stop::None;
      if (!g.ok() && (t.strict || spent)) return PlanError{param, with_context(g.error(), param)};
      if (!g.ok()) spec.parameters = nullptr;  // not strict: any object
    }
    forced.tools.push_back(std::move(spec));
  }
  auto g = forced_calls_grammar(format, forced, &budget);
  if (!g.ok()) return PlanError{"tools", with_context(g.error(), "tools")};
  return *g;
}

}  // namespace

std::variant<DecodePlan, PlanError> plan_decoding(const ojson& body, std::optional<Format> format,
                                                  grammar::Budget* budget) {
  grammar::Budget own;
  grammar::Budget& spend = budget ? *budget : own;
  auto tools_or = read_tools(body);
  if (auto* e = std::get_if<PlanError>(&tools_or)) return *e;
  const std::vector<Tool>& tools = std::get<std::vector<Tool>>(tools_or);
  auto choice_or = read_choice(body, tools);
  if (auto* e = std::get_if<PlanError>(&choice_or)) return *e;
  const Choice& choice = std::get<Choice>(choice_or);
  const ojson parallel = body.value("parallel_tool_calls", ojson(true));
  if (!parallel.is_boolean()) return bad("parallel_tool_calls", "must be a boolean");
  DecodePlan plan;
  auto json_or = read_format(body, &plan.json_output, spend, format == Format::Harmony);
  if (auto* e = std::get_if<PlanError>(&json_or)) return *e;
  plan.grammar = std::get<std::shared_ptr<const grammar::Grammar>>(json_or);
  plan.format = format;
  plan.grammar_key = ojson{{"response_format", body.value("response_format", ojson())}}.dump();
  if (choice.kind == Choice::None) return plan;
  if (plan.json_output)
    return bad("response_format",
               "is not supported together with tools (unless tool_choice "
               "is \"none\")",
               ErrorCode::Unsupported);
  if (!format)
    return bad("tools", "the model's chat template renders no tool calls", ErrorCode::Unsupported);
  plan.render_tools = body["tools"];
  plan.parse_calls = true;
  bool any_strict = false;
  for (const Tool& t : tools) any_strict = any_strict || t.strict;
  if (choice.kind == Choice::Auto && !any_strict) return plan;
  plan.grammar_key = ojson{{"tools", body["tools"]},
                           {"tool_choice", body.value("tool_choice", ojson())},
                           {"parallel_tool_calls", parallel},
                           {"format", format_name(*format)}}
                         .dump();
  auto g = calls_grammar(tools, choice, parallel.get<bool>(), *format, spend);
  if (auto* e = std::get_if<PlanError>(&g)) return *e;
  plan.grammar = std::get<std::shared_ptr<const grammar::Grammar>>(g);
  if (choice.kind == Choice::Auto) plan.trigger = std::string(call_trigger(*format));
  return plan;
}

namespace {

// gpt-oss's template reads an assistant turn's reasoning from `thinking`, and refuses a turn with
// tool calls that has both content and thinking (as llama.cpp does, the content goes).
void harmony_thinking(ojson& m) {
  if (!m.contains("reasoning_content") || !m["reasoning_content"].is_string()) return;
  m["thinking"] = m["reasoning_content"];
  if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty())
    m.erase("content");
}

}  // namespace

ojson prepare_messages(const ojson& messages, Format format) {
  ojson out = messages;
  if (!out.is_array()) return out;
  for (ojson& m : out) {
    if (!m.is_object() || m.value("role", ojson()) != "assistant") continue;
    if (format == Format::Harmony) harmony_thinking(m);
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (ojson& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        continue;
      ojson& args = call["function"]["arguments"];
      if (format == Format::DeepSeek3) {
        if (!args.is_string()) args = args.is_null() ? ojson("{}") : ojson(args.dump());
      } else if (args.is_string()) {
        ojson parsed = ojson::parse(args.get<std::string>(), nullptr, false);
        if (parsed.is_object()) args = std::move(parsed);
      }
    }
  }
  return out;
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

nlohmann::json delta_calls_json(const std::vector<CallDelta>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const CallDelta& d : calls) {
    nlohmann::json j = {{"index", d.index}};
    nlohmann::json f = nlohmann::json::object();
    if (!d.id.empty()) {
      j["id"] = d.id;
      j["type"] = "function";
      f["name"] = d.name;
    }
    f["arguments"] = d.arguments;
    j["function"] = std::move(f);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kamera::toolcall
