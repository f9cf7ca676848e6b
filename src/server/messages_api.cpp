#include "server/messages_api.h"

#include <charconv>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "server/translator_util.h"

namespace kamera {

namespace {

using ojson = nlohmann::ordered_json;

// A block's keys beyond `known` (and cache_control, which kamera's caches make moot) refused.
Status known_keys(const ojson& block, const std::string& where, std::set<std::string> known,
                  std::string* param) {
  known.insert({"type", "cache_control"});
  for (const auto& [k, v] : block.items())
    if (!known.count(k)) return refuse_field(param, where + "." + k, "is not a field kamera knows");
  return Status::Ok();
}

Result<std::string> string_at(const ojson& block, const std::string& key, const std::string& where,
                              std::string* param) {
  if (!block.contains(key) || !block[key].is_string())
    return refuse_field(param, where + "." + key, "must be a string");
  return block[key].get<std::string>();
}

// A text block's text.
Result<std::string> text_block(const ojson& b, const std::string& where, std::string* param) {
  KAMERA_TRY(known_keys(b, where, {"text", "citations"}, param));
  if (b.contains("citations") && !b["citations"].is_null() && !b["citations"].empty())
    return refuse_field(param, where + ".citations", "is not supported", ErrorCode::Unsupported);
  return string_at(b, "text", where, param);
}

// An image block as a chat image_url part: a base64 source as a data: URL, or a url source.
Result<ojson> image_block(const ojson& b, const std::string& where, std::string* param) {
  KAMERA_TRY(known_keys(b, where, {"source"}, param));
  const ojson src = b.value("source", ojson());
  const std::string sw = where + ".source";
  if (!src.is_object()) return refuse_field(param, sw, "must be an object");
  const ojson type = src.value("type", ojson());
  std::string url;
  if (type == "base64") {
    KAMERA_ASSIGN_OR_RETURN(std::string media, string_at(src, "media_type", sw, param));
    KAMERA_ASSIGN_OR_RETURN(std::string data, string_at(src, "data", sw, param));
    url = "data:" + media + ";base64," + data;
  } else if (type == "url") {
    KAMERA_ASSIGN_OR_RETURN(url, string_at(src, "url", sw, param));
  } else {
    return refuse_field(param, sw + ".type", "must be base64 or url (file sources are not served)",
                        ErrorCode::Unsupported);
  }
  return ojson{{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

// A user's text and image blocks as chat parts.
Result<ojson> user_part(const ojson& b, const std::string& where, std::string* param) {
  const ojson type = b.value("type", ojson());
  if (type == "text") {
    KAMERA_ASSIGN_OR_RETURN(std::string text, text_block(b, where, param));
    return ojson{{"type", "text"}, {"text", text}};
  }
  if (type == "image") return image_block(b, where, param);
  return refuse_field(
      param, where + ".type",
      "must be text, image, tool_result (user) or text, tool_use, thinking (assistant); "
      "document, search_result and server tools' blocks are not served",
      ErrorCode::Unsupported);
}

// A tool_result block as a tool message (its content a string or text and image blocks; an
// is_error result is told to the model as "Error: ..." text).
Result<ojson> tool_result(const ojson& b, const std::string& where, std::string* param) {
  KAMERA_TRY(known_keys(b, where, {"tool_use_id", "content", "is_error"}, param));
  KAMERA_ASSIGN_OR_RETURN(std::string id, string_at(b, "tool_use_id", where, param));
  const ojson c = b.value("content", ojson(""));
  ojson content = ojson::array();
  if (c.is_string()) {
    content.push_back({{"type", "text"}, {"text", c}});
  } else if (c.is_array()) {
    for (size_t j = 0; j < c.size(); ++j) {
      KAMERA_ASSIGN_OR_RETURN(ojson part, user_part(c[j], indexed(where + ".content", j), param));
      content.push_back(std::move(part));
    }
  } else {
    return refuse_field(param, where + ".content", "must be a string or an array of blocks");
  }
  const ojson err = b.value("is_error", ojson(false));
  if (!err.is_boolean()) return refuse_field(param, where + ".is_error", "must be a boolean");
  if (err == true) content.insert(content.begin(), ojson{{"type", "text"}, {"text", "Error: "}});
  if (content.size() == 1 && content[0]["type"] == "text") content = content[0]["text"];
  return ojson{{"role", "tool"}, {"tool_call_id", id}, {"content", content}};
}

// Records where the chat message just added came from (places may be null).
void note_place(MessagePlaces* places, std::string message, std::vector<std::string> parts = {}) {
  if (!places) return;
  places->message.push_back(std::move(message));
  places->part.push_back(std::move(parts));
}

// A user message: its text and image blocks in one user message, its tool results as tool
// messages, in their order. `where` is the client's "messages[i]".
Status user_message(const ojson& content, const std::string& at, ojson& out, std::string* param,
                    MessagePlaces* places) {
  const std::string where = at + ".content";
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    note_place(places, at);
    return Status::Ok();
  }
  ojson parts = ojson::array();
  std::vector<std::string> paths;
  auto flush = [&] {
    if (parts.empty()) return;
    out.push_back({{"role", "user"}, {"content", std::exchange(parts, ojson::array())}});
    note_place(places, at, std::exchange(paths, {}));
  };
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& b = content[j];
    const std::string bw = indexed(where, j);
    if (!b.is_object()) return refuse_field(param, bw, "must be a content block");
    if (b.value("type", ojson()) == "tool_result") {
      flush();
      KAMERA_ASSIGN_OR_RETURN(ojson m, tool_result(b, bw, param));
      out.push_back(std::move(m));
      note_place(places, bw);
      continue;
    }
    KAMERA_ASSIGN_OR_RETURN(ojson part, user_part(b, bw, param));
    parts.push_back(std::move(part));
    paths.push_back(bw);
  }
  flush();
  return Status::Ok();
}

// An assistant message: its text, tool_use blocks as tool calls, thinking as reasoning_content.
Status assistant_message(const ojson& content, const std::string& at, ojson& out,
                         std::string* param, MessagePlaces* places) {
  const std::string where = at + ".content";
  ojson m = {{"role", "assistant"}, {"content", nullptr}};
  note_place(places, at);
  if (content.is_string()) {
    m["content"] = content;
    out.push_back(std::move(m));
    return Status::Ok();
  }
  std::string text, thinking;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& b = content[j];
    const std::string bw = indexed(where, j);
    const ojson type = b.is_object() ? b.value("type", ojson()) : ojson();
    if (type == "text") {
      KAMERA_ASSIGN_OR_RETURN(std::string t, text_block(b, bw, param));
      text += t;
    } else if (type == "thinking") {
      KAMERA_TRY(known_keys(b, bw, {"thinking", "signature"}, param));
      KAMERA_ASSIGN_OR_RETURN(std::string t, string_at(b, "thinking", bw, param));
      thinking += t;
    } else if (type == "tool_use") {
      KAMERA_TRY(known_keys(b, bw, {"id", "name", "input"}, param));
      KAMERA_ASSIGN_OR_RETURN(std::string id, string_at(b, "id", bw, param));
      KAMERA_ASSIGN_OR_RETURN(std::string name, string_at(b, "name", bw, param));
      if (!b.contains("input") || !b["input"].is_object())
        return refuse_field(param, bw + ".input", "must be an object");
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back({{"id", id},
                                 {"type", "function"},
                                 {"function", {{"name", name}, {"arguments", b["input"].dump()}}}});
    } else {
      return refuse_field(param, bw + ".type",
                          "must be text, tool_use or thinking in an assistant message "
                          "(redacted_thinking and server tools' blocks are not served)",
                          ErrorCode::Unsupported);
    }
  }
  if (!text.empty()) m["content"] = text;
  if (!thinking.empty()) m["reasoning_content"] = thinking;
  out.push_back(std::move(m));
  return Status::Ok();
}

Result<ojson> chat_messages(const ojson& body, std::string* param, MessagePlaces* places) {
  ojson out = ojson::array();
  const ojson system = body.value("system", ojson());
  if (system.is_string()) {
    out.push_back({{"role", "system"}, {"content", system}});
    note_place(places, "system");
  } else if (system.is_array()) {
    std::string text;
    for (size_t j = 0; j < system.size(); ++j) {
      const ojson& b = system[j];
      if (!b.is_object() || b.value("type", ojson()) != "text")
        return refuse_field(param, indexed("system", j), "must be a text block");
      KAMERA_ASSIGN_OR_RETURN(std::string t, text_block(b, indexed("system", j), param));
      text += (text.empty() ? "" : "\n\n") + t;
    }
    out.push_back({{"role", "system"}, {"content", text}});
    note_place(places, "system");
  } else if (!system.is_null()) {
    return refuse_field(param, "system", "must be a string or an array of text blocks");
  }
  const ojson messages = body.value("messages", ojson());
  if (!messages.is_array() || messages.empty())
    return refuse_field(param, "messages", "must be a non-empty array of messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    const std::string where = indexed("messages", i);
    if (!m.is_object()) return refuse_field(param, where, "must be an object");
    KAMERA_TRY(known_keys(m, where, {"role", "content"}, param));
    const ojson role = m.value("role", ojson());
    const ojson content = m.value("content", ojson());
    if (!content.is_string() && !content.is_array())
      return refuse_field(param, where + ".content",
                          "must be a string or an array of content blocks");
    if (role == "user") {
      KAMERA_TRY(user_message(content, where, out, param, places));
    } else if (role == "assistant") {
      KAMERA_TRY(assistant_message(content, where, out, param, places));
    } else {
      return refuse_field(param, where + ".role",
                          "must be user or assistant (system is a top field)");
    }
  }
  return out;
}

Result<ojson> chat_tools(const ojson& tools, std::string* param) {
  if (!tools.is_array()) return refuse_field(param, "tools", "must be an array of tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = indexed("tools", i);
    if (!t.is_object()) return refuse_field(param, where, "must be an object");
    if (t.contains("type") && t["type"] != "custom")
      return refuse_field(
          param, where + ".type",
          "must be custom (or absent): kamera runs no server tools (web_search, bash, "
          "text_editor, computer, code_execution)",
          ErrorCode::Unsupported);
    KAMERA_TRY(known_keys(t, where, {"name", "description", "input_schema"}, param));
    ojson f = ojson::object();
    if (t.contains("name")) f["name"] = t["name"];
    if (t.contains("description")) f["description"] = t["description"];
    if (!t.contains("input_schema") || !t["input_schema"].is_object())
      return refuse_field(param, where + ".input_schema", "must be a JSON schema object");
    f["parameters"] = t["input_schema"];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

Status tool_choice(const ojson& c, ojson& chat, std::string* param) {
  if (!c.is_object()) return refuse_field(param, "tool_choice", "must be an object");
  const ojson type = c.value("type", ojson());
  KAMERA_TRY(known_keys(c, "tool_choice", {"name", "disable_parallel_tool_use"}, param));
  if (type == "auto") {
    chat["tool_choice"] = "auto";
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "none") {
    chat["tool_choice"] = "none";
  } else if (type == "tool" && c.value("name", ojson()).is_string()) {
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
  } else {
    return refuse_field(
        param, "tool_choice",
        "must be {\"type\": auto, any, none} or {\"type\": \"tool\", \"name\": ...}");
  }
  const ojson serial = c.value("disable_parallel_tool_use", ojson(false));
  if (!serial.is_boolean())
    return refuse_field(param, "tool_choice.disable_parallel_tool_use", "must be a boolean");
  if (serial == true) chat["parallel_tool_calls"] = false;
  return Status::Ok();
}

// thinking {type: enabled, budget_tokens} or {type: disabled}: the template's reasoning switch
// (as reasoning_effort medium or none). The budget is checked as Anthropic checks it (at least
// 1024, under max_tokens); the whole answer, reasoning included, is bounded by max_tokens.
Status thinking(const ojson& t, const ojson& body, ojson& chat, std::string* param) {
  if (!t.is_object()) return refuse_field(param, "thinking", "must be an object");
  KAMERA_TRY(known_keys(t, "thinking", {"budget_tokens"}, param));
  const ojson type = t.value("type", ojson());
  if (type == "disabled") {
    chat["reasoning_effort"] = "none";
    return Status::Ok();
  }
  if (type != "enabled") return refuse_field(param, "thinking.type", "must be enabled or disabled");
  const ojson budget = t.value("budget_tokens", ojson());
  if (!budget.is_number_integer() || budget.get<int64_t>() < 1024)
    return refuse_field(param, "thinking.budget_tokens", "must be an integer of at least 1024");
  const ojson max = body.value("max_tokens", ojson());
  if (max.is_number_integer() && budget.get<int64_t>() >= max.get<int64_t>())
    return refuse_field(param, "thinking.budget_tokens", "must be less than max_tokens");
  chat["reasoning_effort"] = "medium";
  return Status::Ok();
}

// output_config {format: {type: "json_schema", schema}} (structured outputs; what the SDK's
// messages.parse with zodOutputFormat sends): the answer constrained to the schema, as chat's
// response_format json_schema constrains it. Other output_config fields are refused by name.
Status output_config(const ojson& c, ojson& chat, std::string* param) {
  if (!c.is_object()) return refuse_field(param, "output_config", "must be an object");
  for (const auto& [k, v] : c.items())
    if (k != "format")
      return refuse_field(param, "output_config." + k, "is not a field kamera knows");
  const ojson f = c.value("format", ojson());
  if (f.is_null()) return Status::Ok();
  if (!f.is_object() || f.value("type", ojson()) != "json_schema")
    return refuse_field(param, "output_config.format.type", "must be json_schema");
  for (const auto& [k, v] : f.items())
    if (k != "type" && k != "schema")
      return refuse_field(param, "output_config.format." + k, "is not a field kamera knows");
  if (!f.value("schema", ojson()).is_object())
    return refuse_field(param, "output_config.format.schema", "must be a JSON schema object");
  chat["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "output"}, {"schema", f["schema"]}, {"strict", true}}}};
  return Status::Ok();
}

// The fields that carry nothing for a local server, checked and dropped: metadata.user_id (kamera
// keys quotas on the API key) and service_tier auto or standard_only (kamera has one tier).
Status hints(const ojson& body, std::string* param) {
  const ojson meta = body.value("metadata", ojson());
  if (!meta.is_null()) {
    if (!meta.is_object()) return refuse_field(param, "metadata", "must be an object");
    KAMERA_TRY(known_keys(meta, "metadata", {"user_id"}, param));
    if (meta.contains("user_id") && !meta["user_id"].is_string() && !meta["user_id"].is_null())
      return refuse_field(param, "metadata.user_id", "must be a string");
  }
  const ojson tier = body.value("service_tier", ojson());
  if (!tier.is_null() && tier != "auto" && tier != "standard_only")
    return refuse_field(param, "service_tier",
                        "must be auto or standard_only (kamera has one tier)");
  return Status::Ok();
}

}  // namespace

Result<ojson> messages_request(const ojson& body, bool count_only, std::string* param,
                               MessagePlaces* places) {
  if (!body.is_object()) return refuse_field(param, "body", "must be a JSON object");
  static const std::set<std::string> same = {
      "model", "stream", "temperature", "top_p", "top_k",
      // kamera's and llama.cpp's sampling and reuse fields, as in chat
      "seed", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty", "logit_bias",
      "reuse", "reuse_budget", "rank", "deep_half"};
  static const std::set<std::string> handled = {
      "messages",   "system",         "tools",    "tool_choice",   "thinking",
      "max_tokens", "stop_sequences", "metadata", "output_config", "service_tier"};
  for (const auto& [k, v] : body.items())
    if (!same.count(k) && !handled.count(k))
      return refuse_field(param, k, "is not a field kamera knows (docs/SERVER.md lists them)");
  ojson chat = ojson::object();
  for (const auto& [k, v] : body.items())
    if (same.count(k) && !(count_only && k != "model")) chat[k] = v;
  KAMERA_ASSIGN_OR_RETURN(chat["messages"], chat_messages(body, param, places));
  if (body.contains("tools") && !body["tools"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(chat["tools"], chat_tools(body["tools"], param));
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null())
    KAMERA_TRY(tool_choice(body["tool_choice"], chat, param));
  if (body.contains("thinking") && !body["thinking"].is_null())
    KAMERA_TRY(thinking(body["thinking"], body, chat, param));
  if (count_only) return chat;
  if (body.contains("output_config") && !body["output_config"].is_null())
    KAMERA_TRY(output_config(body["output_config"], chat, param));
  if (!body.contains("max_tokens") || body["max_tokens"].is_null())
    return refuse_field(param, "max_tokens", "is required");
  chat["max_tokens"] = body["max_tokens"];
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null()) {
    const ojson& s = body["stop_sequences"];
    if (!s.is_array()) return refuse_field(param, "stop_sequences", "must be an array of strings");
    chat["stop"] = s;
  }
  KAMERA_TRY(hints(body, param));
  if (chat.value("stream", ojson(false)) != true) chat.erase("stream");
  return chat;
}

std::string messages_param(const std::string& p) {
  static const std::pair<std::string_view, std::string_view> names[] = {
      {"stop", "stop_sequences"},
      {"response_format.json_schema.schema", "output_config.format.schema"},
      {"response_format", "output_config.format"},
      {"reasoning_effort", "thinking"},
      {"parallel_tool_calls", "tool_choice.disable_parallel_tool_use"}};
  for (const auto& [chat, messages] : names)
    if (p.starts_with(chat)) return std::string(messages) + p.substr(chat.size());
  const std::string fn = ".function.";  // tools[i].function.parameters -> tools[i].input_schema
  if (p.starts_with("tools[") && p.find(fn) != std::string::npos) {
    const size_t at = p.find(fn);
    const std::string rest = p.substr(at + fn.size());
    return p.substr(0, at + 1) +
           (rest.starts_with("parameters") ? "input_schema" + rest.substr(10) : rest);
  }
  return p;
}

// "messages[K].content[C]REST" -> K, C (-1 when absent) and REST; false when p is not one.
static bool chat_place(std::string_view p, size_t& k, long& c, std::string_view& rest) {
  constexpr std::string_view head = "messages[", content = ".content[";
  auto index = [](std::string_view s, size_t from, auto& v) {
    const auto [end, ec] = std::from_chars(s.data() + from, s.data() + s.size(), v);
    return ec == std::errc() && end < s.data() + s.size() && *end == ']'
               ? size_t(end - s.data()) + 1
               : std::string_view::npos;
  };
  if (!p.starts_with(head)) return false;
  const size_t after = index(p, head.size(), k);
  if (after == std::string_view::npos) return false;
  rest = p.substr(after);
  c = -1;
  if (!rest.starts_with(content)) return true;
  const size_t e = index(rest, content.size(), c);
  if (e == std::string_view::npos)
    c = -1;
  else
    rest = rest.substr(e);
  return true;
}

std::string MessagePlaces::rename(const std::string& chat_param) const {
  size_t k = 0;
  long c = -1;
  std::string_view rest;
  if (!chat_place(chat_param, k, c, rest) || k >= message.size()) return messages_param(chat_param);
  if (message[k] == "system") return "system";  // a string or text blocks joined
  if (c >= 0 && size_t(c) < part[k].size()) return part[k][size_t(c)] + std::string(rest);
  if (c >= 0) return message[k] + ".content[" + std::to_string(c) + "]" + std::string(rest);
  return message[k] + std::string(rest);
}

nlohmann::json anthropic_error(int status, const nlohmann::json& openai_body) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status == 503 ? "overloaded_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  nlohmann::json e = {{"type", type}, {"message", ""}};
  if (openai_body.contains("error") && openai_body["error"].is_object()) {
    const nlohmann::json& o = openai_body["error"];
    e["message"] = o.value("message", "");
    if (o.contains("param") && !o["param"].is_null()) e["param"] = o["param"];  // kamera's too
  }
  return {{"type", "error"}, {"error", e}};
}

std::string anthropic_error_body(int status, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("error") || j.contains("type")) return body;
  return anthropic_error(status, j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kamera
