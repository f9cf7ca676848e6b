#include "server/responses_api.h"

#include <set>

#include <fmt/format.h>

#include "server/translator_util.h"

namespace kamera {

namespace {

using ojson = nlohmann::ordered_json;

// A message's content parts as chat parts: input_text / output_text / refusal as text,
// input_image as an image_url part.
Result<ojson> content_parts(const ojson& content, const std::string& where, std::string* param) {
  if (content.is_string()) return content;
  if (!content.is_array())
    return refuse_field(param, where, "must be a string or an array of content parts");
  ojson out = ojson::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& p = content[j];
    const std::string pw = indexed(where, j);
    const ojson type = p.is_object() ? p.value("type", ojson()) : ojson();
    if (type == "input_text" || type == "output_text" || type == "refusal") {
      const char* key = type == "refusal" ? "refusal" : "text";
      if (!p.contains(key) || !p[key].is_string())
        return refuse_field(param, pw + "." + key, "must be a string");
      out.push_back({{"type", "text"}, {"text", p[key]}});
    } else if (type == "input_image") {
      const ojson url = p.value("image_url", ojson());
      if (!url.is_string())
        return refuse_field(param, pw + ".image_url",
                            "must be a URL or a data: URL (file_id images are not served)");
      ojson image = {{"url", url}};
      if (p.contains("detail") && !p["detail"].is_null()) image["detail"] = p["detail"];
      out.push_back({{"type", "image_url"}, {"image_url", image}});
    } else if (type == "input_audio") {
      // The Responses API's audio part has chat's shape ({"input_audio": {"data", "format"}}): it
      // goes to the chat path as is, where its data and format are checked and named.
      const ojson audio = p.value("input_audio", ojson());
      if (!audio.is_object())
        return refuse_field(param, pw + ".input_audio",
                            "must be an object: {\"data\": BASE64, \"format\": \"wav\"}");
      out.push_back({{"type", "input_audio"}, {"input_audio", audio}});
    } else {
      return refuse_field(param, pw + ".type",
                          "must be input_text, output_text, refusal, input_image or input_audio "
                          "(input_file is not served)",
                          ErrorCode::Unsupported);
    }
  }
  return out;
}

// An assistant's content as one string (its text parts joined).
Result<ojson> assistant_text(const ojson& parts, const std::string& where, std::string* param) {
  if (parts.is_string()) return parts;
  std::string text;
  for (const ojson& p : parts) {
    if (p.value("type", ojson()) != "text")
      return refuse_field(param, where, "of an assistant message holds text parts only");
    text += p["text"].get<std::string>();
  }
  return ojson(text);
}

struct Conversation {
  ojson messages = ojson::array();
  std::string reasoning;  // a reasoning item's text, for the next assistant turn

  ojson& assistant() {
    if (messages.empty() || messages.back()["role"] != "assistant")
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
    ojson& m = messages.back();
    if (!reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, "");
    return m;
  }
};

Status message_item(const ojson& item, const std::string& where, Conversation& c,
                    std::string* param) {
  static const std::set<std::string> roles = {"user", "assistant", "system", "developer"};
  const ojson role = item.value("role", ojson());
  if (!role.is_string() || !roles.count(role.get<std::string>()))
    return refuse_field(param, where + ".role", "must be user, assistant, system or developer");
  if (!item.contains("content")) return refuse_field(param, where + ".content", "is missing");
  KAMERA_ASSIGN_OR_RETURN(ojson content, content_parts(item["content"], where + ".content", param));
  if (role == "assistant") {
    KAMERA_ASSIGN_OR_RETURN(ojson text, assistant_text(content, where + ".content", param));
    ojson& m = c.assistant();
    if (m.contains("tool_calls")) {  // text after calls: a new turn
      c.messages.push_back({{"role", "assistant"}, {"content", text}});
    } else {
      m["content"] = text;
    }
    return Status::Ok();
  }
  c.messages.push_back({{"role", role}, {"content", std::move(content)}});
  return Status::Ok();
}

Status call_item(const ojson& item, const std::string& where, Conversation& c, std::string* param) {
  for (const char* k : {"call_id", "name", "arguments"})
    if (!item.contains(k) || !item[k].is_string())
      return refuse_field(param, where + "." + k, "must be a string");
  ojson& m = c.assistant();
  if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
  m["tool_calls"].push_back(
      {{"id", item["call_id"]},
       {"type", "function"},
       {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
  return Status::Ok();
}

Status output_item(const ojson& item, const std::string& where, Conversation& c,
                   std::string* param) {
  if (!item.contains("call_id") || !item["call_id"].is_string())
    return refuse_field(param, where + ".call_id", "must be a string");
  if (!item.contains("output")) return refuse_field(param, where + ".output", "is missing");
  KAMERA_ASSIGN_OR_RETURN(ojson content, content_parts(item["output"], where + ".output", param));
  c.messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", content}});
  return Status::Ok();
}

// A reasoning item: its text (content's reasoning_text parts, else its summary) for the next
// assistant turn, which the template renders or drops as it decides.
void reasoning_item(const ojson& item, Conversation& c) {
  for (const char* key : {"content", "summary"}) {
    std::string text;
    for (const ojson& p : item.value(key, ojson::array()))
      if (p.is_object() && p.value("text", ojson()).is_string())
        text += (text.empty() ? "" : "\n\n") + p["text"].get<std::string>();
    if (!text.empty()) {
      c.reasoning = text;
      return;
    }
  }
}

Result<ojson> input_messages(const ojson& body, std::string* param) {
  Conversation c;
  const ojson instructions = body.value("instructions", ojson());
  if (instructions.is_string()) {
    c.messages.push_back({{"role", "system"}, {"content", instructions}});
  } else if (!instructions.is_null()) {
    return refuse_field(param, "instructions", "must be a string");
  }
  const ojson input = body.value("input", ojson());
  if (input.is_string()) {
    c.messages.push_back({{"role", "user"}, {"content", input}});
    return c.messages;
  }
  if (!input.is_array() || input.empty())
    return refuse_field(param, "input", "must be a string or a non-empty array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string where = indexed("input", i);
    if (!item.is_object()) return refuse_field(param, where, "must be an object");
    const ojson type = item.value("type", ojson(item.contains("role") ? "message" : ""));
    Status st = Status::Ok();
    if (type == "message") {
      st = message_item(item, where, c, param);
    } else if (type == "function_call") {
      st = call_item(item, where, c, param);
    } else if (type == "function_call_output") {
      st = output_item(item, where, c, param);
    } else if (type == "reasoning") {
      reasoning_item(item, c);
    } else {
      return refuse_field(param, where + ".type",
                          "must be message, function_call, function_call_output or reasoning "
                          "(hosted tools' items are not served)",
                          ErrorCode::Unsupported);
    }
    KAMERA_TRY(st);
  }
  return c.messages;
}

Result<ojson> function_tools(const ojson& tools, std::string* param) {
  if (!tools.is_array()) return refuse_field(param, "tools", "must be an array of tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    if (!t.is_object() || t.value("type", ojson()) != "function")
      return refuse_field(
          param, indexed("tools", i) + ".type",
          "must be \"function\": kamera runs no hosted tools (web_search, file_search, "
          "computer_use, code_interpreter, mcp)",
          ErrorCode::Unsupported);
    ojson f = ojson::object();
    for (const char* k : {"name", "description", "parameters", "strict"})
      if (t.contains(k) && !t[k].is_null()) f[k] = t[k];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

Result<ojson> tool_choice(const ojson& c, std::string* param) {
  if (c == "none" || c == "auto" || c == "required") return c;
  if (c.is_object() && c.value("type", ojson()) == "function" &&
      c.value("name", ojson()).is_string())
    return ojson{{"type", "function"}, {"function", {{"name", c["name"]}}}};
  return refuse_field(param, "tool_choice",
                      "must be none, auto, required or {\"type\": \"function\", \"name\": ...}");
}

Status text_field(const ojson& text, ojson& chat, std::string* param) {
  if (!text.is_object()) return refuse_field(param, "text", "must be an object");
  for (const auto& [k, v] : text.items()) {
    if (k == "verbosity") {
      if (!v.is_null()) chat["verbosity"] = v;
    } else if (k != "format") {
      return refuse_field(param, "text." + k, "is not a field kamera knows (format, verbosity)",
                          ErrorCode::InvalidArgument);
    }
  }
  const ojson f = text.value("format", ojson());
  if (f.is_null() || f.value("type", ojson()) == "text") return Status::Ok();
  if (f.value("type", ojson()) == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (f.value("type", ojson()) == "json_schema") {
    ojson js = {{"name", f.value("name", ojson("schema"))}, {"schema", f.value("schema", ojson())}};
    if (f.contains("strict")) js["strict"] = f["strict"];
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
  } else {
    return refuse_field(param, "text.format.type", "must be text, json_object or json_schema");
  }
  return Status::Ok();
}

Status reasoning_field(const ojson& r, ojson& chat, std::string* param) {
  if (!r.is_object()) return refuse_field(param, "reasoning", "must be an object");
  for (const auto& [k, v] : r.items()) {
    if (k == "effort") {
      if (!v.is_null()) chat["reasoning_effort"] = v;
    } else if (k == "summary" || k == "generate_summary") {
      if (!v.is_null() && v != "auto" && v != "concise" && v != "detailed")
        return refuse_field(param, "reasoning." + k, "must be auto, concise or detailed");
    } else {
      return refuse_field(param, "reasoning." + k, "is not a field kamera knows (effort, summary)");
    }
  }
  return Status::Ok();
}

// Fields refused unless their value asks for nothing kamera would have to do.
Status refused_fields(const ojson& body, std::string* param) {
  auto set = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (set("conversation"))
    return refuse_field(param, "conversation",
                        "is not supported: kamera keeps no conversation objects; continue a stored "
                        "response with \"previous_response_id\", or send the whole conversation as "
                        "\"input\"",
                        ErrorCode::Unsupported);
  if (set("store") && !body["store"].is_boolean())
    return refuse_field(param, "store", "must be true or false");
  if (set("background") && body["background"] != false)
    return refuse_field(param, "background", "is not supported", ErrorCode::Unsupported);
  if (set("include") && !(body["include"].is_array() && body["include"].empty()))
    return refuse_field(param, "include", "is not supported (encrypted reasoning, logprobs)",
                        ErrorCode::Unsupported);
  if (set("truncation") && body["truncation"] != "disabled")
    return refuse_field(param, "truncation",
                        "must be \"disabled\": kamera never drops input to fit the context",
                        ErrorCode::Unsupported);
  if (set("top_logprobs") && body["top_logprobs"] != 0)
    return refuse_field(param, "top_logprobs", "is not supported", ErrorCode::Unsupported);
  for (const char* k : {"max_tool_calls", "prompt"})
    if (set(k)) return refuse_field(param, k, "is not supported", ErrorCode::Unsupported);
  return Status::Ok();
}

}  // namespace

Result<ResponsesRequest> responses_request(const ojson& body, std::string* param) {
  if (!body.is_object()) return refuse_field(param, "body", "must be a JSON object");
  static const std::set<std::string> same = {
      "model", "stream", "temperature", "top_p", "parallel_tool_calls", "metadata", "user",
      "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier",
      // kamera's and llama.cpp's sampling and reuse fields, as in chat
      "seed", "top_k", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty",
      "logit_bias", "reuse", "reuse_budget", "rank", "deep_half"};
  static const std::set<std::string> handled = {
      "input",        "instructions",  "tools",
      "tool_choice",  "text",          "max_output_tokens",
      "reasoning",    "store",         "previous_response_id",
      "conversation", "background",    "include",
      "truncation",   "top_logprobs",  "max_tool_calls",
      "prompt",       "stream_options"};
  for (const auto& [k, v] : body.items())
    if (!same.count(k) && !handled.count(k))
      return refuse_field(param, k, "is not a field kamera knows (docs/SERVER.md lists them)");
  KAMERA_TRY(refused_fields(body, param));
  ResponsesRequest r;
  r.chat = ojson::object();
  for (const auto& [k, v] : body.items())
    if (same.count(k)) r.chat[k] = v;
  KAMERA_ASSIGN_OR_RETURN(r.chat["messages"], input_messages(body, param));
  if (body.contains("tools") && !body["tools"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(r.chat["tools"], function_tools(body["tools"], param));
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(r.chat["tool_choice"], tool_choice(body["tool_choice"], param));
  }
  if (body.contains("text") && !body["text"].is_null())
    KAMERA_TRY(text_field(body["text"], r.chat, param));
  if (body.contains("reasoning") && !body["reasoning"].is_null())
    KAMERA_TRY(reasoning_field(body["reasoning"], r.chat, param));
  if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null())
    r.chat["max_tokens"] = body["max_output_tokens"];
  if (r.chat.value("stream", ojson(false)) != true) r.chat.erase("stream");
  r.echo = {
      {"instructions", body.value("instructions", ojson())},
      {"max_output_tokens", body.value("max_output_tokens", ojson())},
      {"parallel_tool_calls", body.value("parallel_tool_calls", ojson(true))},
      {"temperature", body.value("temperature", ojson(0))},
      {"top_p", body.value("top_p", ojson(1))},
      {"tool_choice", body.value("tool_choice", ojson("auto"))},
      {"tools", body.value("tools", ojson::array())},
      {"text", body.value("text", ojson{{"format", {{"type", "text"}}}})},
      {"reasoning", body.value("reasoning", ojson{{"effort", nullptr}, {"summary", nullptr}})},
      {"metadata", body.value("metadata", ojson::object())},
      {"user", body.value("user", ojson())},
      {"store", body.value("store", ojson()) != false},
      {"previous_response_id", body.value("previous_response_id", ojson())}};
  return r;
}

Result<ojson> responses_input_items(const ojson& body, std::string* param) {
  if (!body.is_object()) return refuse_field(param, "body", "must be a JSON object");
  const ojson input = body.value("input", ojson());
  if (input.is_string())
    return ojson::array({{{"type", "message"}, {"role", "user"}, {"content", input}}});
  if (!input.is_array())
    return refuse_field(param, "input", "must be a string or a non-empty array of items");
  return input;
}

std::string responses_param(const std::string& p) {
  static const std::pair<std::string_view, std::string_view> names[] = {
      {"messages", "input"},
      {"max_tokens", "max_output_tokens"},
      {"response_format.json_schema.schema", "text.format.schema"},
      {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"},
      {"verbosity", "text.verbosity"}};
  for (const auto& [chat, responses] : names)
    if (p.starts_with(chat)) return std::string(responses) + p.substr(chat.size());
  const std::string fn = ".function.";  // tools[i].function.parameters -> tools[i].parameters
  if (p.starts_with("tools[") && p.find(fn) != std::string::npos) {
    const size_t at = p.find(fn);
    return p.substr(0, at + 1) + p.substr(at + fn.size());
  }
  return p;
}

}  // namespace kamera
