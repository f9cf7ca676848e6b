#include "server/prompt_parts.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "server/json_fields.h"
#include "toolcall/request.h"
#include "vision/kimi_chunks.h"
#include "vision/vl_prompt.h"

namespace kamera {

using json = nlohmann::json;

namespace {

// The marker of a chunk part in a message's content as the template reads it: 0x02 (which no
// client string may hold; it is not whitespace, so a template's trim keeps it), the word, the
// chunk's id, 0x02. A template that writes a content as JSON (tojson) escapes the byte as \u0002:
// the marker is recognized in that form too, where no client wrote it (outside the literal spans).
constexpr char kMarkByte = '\x02';
constexpr std::string_view kChunkWord = "kamera-chunk:";

std::string mark(std::string_view word, std::string_view id = "") {
  return std::string(1, kMarkByte) + std::string(word) + std::string(id) + kMarkByte;
}

// Appends text to the last part when it is text, else starts a text part; `control`: the text
// was written by the chat template (its control tokens are read).
void add_text(std::vector<PromptPart>& parts, std::string_view t, bool control = false) {
  if (parts.empty() || parts.back().is_chunk) parts.push_back({false, "", {}, {}, {}});
  PromptPart& p = parts.back();
  const size_t at = p.text.size();
  p.text += t;
  if (!control || t.empty()) return;
  if (!p.control.empty() && p.control.back().end == at) {
    p.control.back().end = p.text.size();
  } else {
    p.control.push_back({at, p.text.size()});
  }
}

Status add_chunk(std::vector<PromptPart>& parts, const std::string& hex) {
  auto id = ChunkId::from_hex(hex);
  if (!id) return make_error(ErrorCode::InvalidArgument, "chunk id '{}' is not 32 hex digits", hex);
  parts.push_back({true, "", *id, {}, {}});
  return Status::Ok();
}

// One element of a parts array: a string, {"type": "text", "text"} or {"type": "chunk", "id"}.
Status add_part(std::vector<PromptPart>& parts, const json& it) {
  if (it.is_string()) {
    add_text(parts, it.get_ref<const std::string&>());
    return Status::Ok();
  }
  if (!it.is_object() || !it.contains("type") || !it["type"].is_string())
    return make_error(ErrorCode::InvalidArgument,
                      "each part must be a string or an object with a \"type\"");
  const std::string& type = it["type"].get_ref<const std::string&>();
  if (type == "text") {
    if (!it.contains("text") || !it["text"].is_string())
      return make_error(ErrorCode::InvalidArgument, "a text part needs \"text\"");
    add_text(parts, it["text"].get_ref<const std::string&>());
  } else if (type == "chunk") {
    if (!it.contains("id") || !it["id"].is_string())
      return make_error(ErrorCode::InvalidArgument, "a chunk part needs \"id\"");
    KAMERA_TRY(add_chunk(parts, it["id"].get<std::string>()));
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown part type '{}' (text, chunk)", type);
  }
  return Status::Ok();
}

// A content value: a string or an array of parts.
Status add_items(std::vector<PromptPart>& parts, const json& items) {
  if (items.is_string()) {
    add_text(parts, items.get_ref<const std::string&>());
    return Status::Ok();
  }
  if (!items.is_array())
    return make_error(ErrorCode::InvalidArgument, "content must be a string or an array of parts");
  for (const json& it : items) KAMERA_TRY(add_part(parts, it));
  return Status::Ok();
}

// A message as OpenAI sends it: a role (system, developer, user, assistant, tool; so no role
// spells a control token or a marker), content (a string or parts; null or absent only for an
// assistant message with tool_calls), and the assistant's tool_calls or the tool's tool_call_id.
Status check_message(const json& m) {
  static const std::set<std::string, std::less<>> roles = {"system", "developer", "user",
                                                           "assistant", "tool"};
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
      !roles.count(m["role"].get_ref<const std::string&>()))
    return make_error(ErrorCode::InvalidArgument,
                      "each message needs a \"role\": system, developer, user, assistant or tool");
  const std::string& role = m["role"].get_ref<const std::string&>();
  const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (calls && (role != "assistant" || !m["tool_calls"].is_array()))
    return make_error(ErrorCode::InvalidArgument,
                      "\"tool_calls\" is an array, in assistant messages only");
  for (const json& c : calls ? m["tool_calls"] : json::array())
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      return make_error(ErrorCode::InvalidArgument,
                        "each tool call needs \"function\" with a \"name\" (and \"arguments\")");
  const bool has_content = m.contains("content") && !m["content"].is_null();
  if (!has_content && !(role == "assistant" && calls))
    return make_error(ErrorCode::InvalidArgument,
                      "a {} message needs \"content\" (null only with tool_calls)", role);
  for (const char* k : {"tool_call_id", "name"})
    if (m.contains(k) && !m[k].is_string() && !m[k].is_null())
      return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a string", k);
  return Status::Ok();
}

// The messages array, each message checked.
Result<const json*> messages_of(const json& body) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return make_error(ErrorCode::InvalidArgument, "\"messages\" must be a non-empty array");
  for (const json& m : body["messages"]) KAMERA_TRY(check_message(m));
  return &body["messages"];
}

bool has_content(const json& m) {
  return m.contains("content") && !m["content"].is_null();
}

// Chat messages laid out as "role: content" lines (tool calls as their JSON), then "assistant:"
// (all of it literal).
Status add_messages(std::vector<PromptPart>& parts, const json& body) {
  KAMERA_ASSIGN_OR_RETURN(const json* msgs, messages_of(body));
  for (const json& m : *msgs) {
    add_text(parts, m["role"].get_ref<const std::string&>() + ": ");
    if (has_content(m)) KAMERA_TRY(add_items(parts, m["content"]));
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      add_text(parts, m["tool_calls"].dump());
    add_text(parts, "\n");
  }
  add_text(parts, "assistant:");
  return Status::Ok();
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Every string and key of a client's value sent to the template, checked for the marker byte;
// `where` names the field in the error.
template <class Json>
Status check_reserved(const Json& v, const std::string& where) {
  auto bad = [&](const std::string& at) {
    return make_error(ErrorCode::InvalidArgument, "{} holds a reserved byte (0x02)", at);
  };
  if (v.is_string()) {
    if (v.template get_ref<const std::string&>().find(kMarkByte) != std::string::npos)
      return bad(where);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      KAMERA_TRY(check_reserved(v[i], fmt::format("{}[{}]", where, i)));
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if (k.find(kMarkByte) != std::string::npos) return bad(where + " (a key)");
      KAMERA_TRY(check_reserved(x, where + "." + k));
    }
  }
  return Status::Ok();
}

// A message's content as template text: text parts joined, each chunk part a marker with its id.
Result<std::string> templated_content(const json& content) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(add_items(parts, content));
  std::string inner;
  for (const PromptPart& p : parts) inner += p.is_chunk ? mark(kChunkWord, p.id.hex()) : p.text;
  return inner;
}

// The literal bytes of a client's string as the template gets it: all of them but the server's
// chunk markers (no client string holds their byte, so each 0x02 pair is one of them).
jinja::Spans client_literal(std::string_view s) {
  jinja::Spans out;
  size_t at = 0;
  for (size_t open = s.find(kMarkByte); open != std::string_view::npos;) {
    const size_t close = s.find(kMarkByte, open + 1);
    if (close == std::string_view::npos) break;
    if (open > at) out.push_back({at, open});
    at = close + 1;
    open = s.find(kMarkByte, at);
  }
  if (at < s.size()) out.push_back({at, s.size()});
  return out;
}

// A chunk marker at the start of `s`, raw or JSON-escaped: the chunk's id and the marker's
// length; size 0 when `s` starts with no marker.
struct Marker {
  std::string_view id;
  size_t size = 0;
};

Marker marker_at(std::string_view s) {
  for (std::string_view sep : {std::string_view("\x02", 1), std::string_view("\\u0002")}) {
    if (!s.starts_with(sep) || !s.substr(sep.size()).starts_with(kChunkWord)) continue;
    const size_t id_at = sep.size() + kChunkWord.size(), end = s.find(sep, id_at);
    if (end == std::string_view::npos || end == id_at) return {};
    return {s.substr(id_at, end - id_at), end + sep.size()};
  }
  return {};
}

bool any_literal(const jinja::Spans& spans, size_t begin, size_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                             [](size_t b, const jinja::Span& sp) { return b < sp.end; });
  return it != spans.end() && it->begin < end;
}

// Bytes [begin, end) of rendered text added to the parts: control tokens are read outside its
// literal spans only.
void add_rendered(std::vector<PromptPart>& parts, const jinja::Text& text, size_t begin,
                  size_t end) {
  const std::string_view s(text.str);
  size_t at = begin;
  for (const jinja::Span& sp : text.literal) {
    if (sp.end <= at) continue;
    if (sp.begin >= end) break;
    const size_t lb = std::max(sp.begin, at), le = std::min(sp.end, end);
    add_text(parts, s.substr(at, lb - at), true);
    add_text(parts, s.substr(lb, le - lb), false);
    at = le;
  }
  add_text(parts, s.substr(at, end - at), true);
}

// Rendered template text cut into parts at the chunk markers: a raw marker anywhere (its byte is
// the server's), an escaped one where none of its bytes is literal; each becomes a chunk part.
// Text between keeps its literal spans: the template's own text reads control tokens, text a
// client wrote never does, wherever the template put it and whatever it did with it.
Status split_rendered(std::vector<PromptPart>& parts, const jinja::Text& text) {
  const std::string_view s(text.str);
  size_t at = 0;
  for (size_t from = 0;;) {
    const size_t raw = s.find(kMarkByte, from), escaped = s.find("\\u0002", from);
    const size_t next = std::min(raw, escaped);
    if (next == std::string_view::npos) break;
    const Marker m = marker_at(s.substr(next));
    if (m.size == 0 || (next != raw && any_literal(text.literal, next, next + m.size))) {
      if (next == raw)
        return make_error(ErrorCode::Internal, "the chat template broke a marker of the server");
      from = next + 1;  // the template's own "\u0002", or a client's text
      continue;
    }
    add_rendered(parts, text, at, next);
    KAMERA_TRY(add_chunk(parts, std::string(m.id)));
    at = from = next + m.size;
  }
  add_rendered(parts, text, at, s.size());
  if (!parts.empty() && !parts.front().is_chunk && parts.front().text.empty())
    parts.erase(parts.begin());
  return Status::Ok();
}

// A message as the chat template reads it: content as template text with chunk markers (null as
// ""), tool calls with their arguments as JSON values (OpenAI sends them as strings; templates
// write them with tojson), the tool's tool_call_id and name.
Result<nlohmann::ordered_json> template_message(const json& m) {
  nlohmann::ordered_json out;
  out["role"] = m["role"] == "developer" ? json("system") : m["role"];
  out["content"] = "";
  if (has_content(m)) {
    KAMERA_ASSIGN_OR_RETURN(std::string content, templated_content(m["content"]));
    out["content"] = std::move(content);
  }
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    out["tool_calls"] = nlohmann::ordered_json::array();
    for (const json& c : m["tool_calls"]) {
      nlohmann::ordered_json call = nlohmann::ordered_json::parse(c.dump());
      const json& args = c["function"].value("arguments", json("{}"));
      if (args.is_string()) {
        auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
        // its escapes (\u0002) may spell the marker byte the string itself did not hold
        if (!parsed.is_discarded())
          KAMERA_TRY(check_reserved(parsed, "a tool call's \"arguments\""));
        if (!parsed.is_discarded()) call["function"]["arguments"] = std::move(parsed);
      }
      out["tool_calls"].push_back(std::move(call));
    }
  }
  for (const char* k : {"tool_call_id", "name"})
    if (m.contains(k) && m[k].is_string()) out[k] = m[k];
  for (const char* k : {"reasoning_content", "reasoning"})  // vLLM's newer name, the same
    if (m["role"] == "assistant" && m.contains(k) && m[k].is_string())
      out["reasoning_content"] = m[k];
  return out;
}

// Chat messages rendered by the model's chat template (with the generation prompt and the
// request's tools).
Status add_templated(std::vector<PromptPart>& parts, const json& body, const ChatTemplate& tmpl,
                     const ChatTools* tools) {
  KAMERA_ASSIGN_OR_RETURN(const json* checked, messages_of(body));
  KAMERA_TRY(check_reserved(*checked, "messages"));
  if (tools) KAMERA_TRY(check_reserved(tools->tools, "tools"));
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const json& m : *checked) {
    KAMERA_ASSIGN_OR_RETURN(msgs.emplace_back(), template_message(m));
  }
  ChatRenderOptions ro;  // bos_token empty: the context's anchor already holds BOS
  KAMERA_ASSIGN_OR_RETURN(ro.extra, template_variables(body, &tmpl));
  if (tools && tools->format) msgs = toolcall::prepare_messages(msgs, *tools->format);
  if (tools) ro.tools = tools->tools;
  ro.literal = client_literal;  // every string and key of the messages and tools
  KAMERA_ASSIGN_OR_RETURN(jinja::Text text, tmpl.render_json_text(msgs, ro));
  return split_rendered(parts, text);
}

// Parts that end with the query (text or token ids).
Status check_query(const std::vector<PromptPart>& parts) {
  if (parts.empty() || parts.back().is_chunk ||
      (parts.back().text.empty() && parts.back().tokens.empty()))
    return make_error(ErrorCode::InvalidArgument, "the prompt must end with text (the query)");
  return Status::Ok();
}

// A prompt of token ids, each in the vocabulary.
Result<PromptPart> token_prompt(const json& ids, int n_vocab) {
  if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "a token prompt is empty");
  PromptPart p;
  for (const json& t : ids) {
    KAMERA_ASSIGN_OR_RETURN(int64_t v, int_value(t, "a prompt token id", 0, n_vocab - 1));
    p.tokens.push_back(int32_t(v));
  }
  return p;
}

// The control pieces of the delimiters the server writes around a picture (server/media_tower.h):
// Qwen's <|vision_start|> / <|vision_end|>, Kimi-VL's <|media_start|>image<|media_content|> /
// <|media_end|>, where the text ends before an image or starts after one.
void mark_delimiters(std::string_view t, const ControlSpots& spots,
                     std::vector<TextRange>& control) {
  if (spots.image_before)
    for (std::string_view close : {kVisionEnd, kMediaEnd})
      if (t.starts_with(close)) control.push_back({0, close.size()});
  if (!spots.image_after) return;
  if (t.ends_with(kVisionStart)) control.push_back({t.size() - kVisionStart.size(), t.size()});
  if (t.ends_with(kKimiImageOpen)) {
    const size_t at = t.size() - kKimiImageOpen.size();
    control.push_back({at, at + kMediaStart.size()});
    control.push_back({t.size() - kMediaContent.size(), t.size()});
  }
}

// A value a client may give a template variable: no text that could spell markup.
bool plain_value(const json& v) {
  if (v.is_boolean() || v.is_number() || v.is_null()) return true;
  if (!v.is_string() || v.get_ref<const std::string&>().size() > 64) return false;
  for (char c : v.get_ref<const std::string&>())
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != ' ')
      return false;
  return true;
}

bool plain_name(const std::string& k) {
  if (k.empty() || k.size() > 64 || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

Status chat_template_kwargs(const json& kw, nlohmann::ordered_json& vars) {
  static const std::set<std::string, std::less<>> own = {
      "messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "documents"};
  if (!kw.is_object())
    return make_error(ErrorCode::InvalidArgument,
                      "\"chat_template_kwargs\" must be an object of template variables");
  for (const auto& [k, v] : kw.items()) {
    if (!plain_name(k) || own.count(k))
      return make_error(ErrorCode::InvalidArgument,
                        "\"chat_template_kwargs\" may not set '{}' (a name of letters, digits "
                        "and '_', not one of the template's own variables)",
                        k.substr(0, 64));
    if (!plain_value(v))
      return make_error(ErrorCode::InvalidArgument,
                        "\"chat_template_kwargs.{}\" must be a boolean, a number, null or a "
                        "word of at most 64 letters, digits, '_', '-', '.' or spaces",
                        k);
    vars[k] = nlohmann::ordered_json::parse(v.dump());
  }
  return Status::Ok();
}

Status reasoning_effort(const json& v, const ChatTemplate& tmpl, nlohmann::ordered_json& vars) {
  static const std::set<std::string, std::less<>> levels = {"none", "minimal", "low", "medium",
                                                            "high"};
  if (!v.is_string() || !levels.count(v.get_ref<const std::string&>()))
    return make_error(ErrorCode::InvalidArgument,
                      "\"reasoning_effort\" must be none, minimal, low, medium or high");
  const std::string& level = v.get_ref<const std::string&>();
  if (tmpl.source().find("reasoning_effort") != std::string::npos) {
    vars["reasoning_effort"] = level;
  } else if (tmpl.source().find("enable_thinking") != std::string::npos) {
    vars["enable_thinking"] = level != "none" && level != "minimal";
  } else {
    return make_error(ErrorCode::InvalidArgument,
                      "\"reasoning_effort\" is not supported: the model's chat template has no "
                      "reasoning switch (enable_thinking or reasoning_effort)");
  }
  return Status::Ok();
}

}  // namespace

Result<nlohmann::ordered_json> template_variables(const json& body, const ChatTemplate* tmpl,
                                                  std::string* param) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const char* k : {"reasoning_effort", "chat_template_kwargs"}) {
    if (!body.contains(k) || body[k].is_null()) continue;
    Status st = Status::Ok();
    if (!tmpl)
      st = make_error(ErrorCode::InvalidArgument,
                      "\"{}\" is not supported: this server renders no chat template", k);
    else if (std::string_view(k) == "reasoning_effort")
      st = reasoning_effort(body[k], *tmpl, vars);
    else
      st = chat_template_kwargs(body[k], vars);
    if (!st.ok()) {
      if (param) *param = k;
      return st.error();
    }
  }
  return vars;
}

std::vector<int32_t> text_part_ids(const Tokenizer& tok, const PromptPart& part, bool first,
                                   const ControlSpots& spots, size_t limit) {
  const std::string& t = part.text;
  std::vector<TextRange> control;
  if (spots.everywhere) {
    control.push_back({0, t.size()});
  } else {
    control = part.control;
    mark_delimiters(t, spots, control);
    std::sort(control.begin(), control.end(),
              [](const TextRange& a, const TextRange& b) { return a.begin < b.begin; });
    std::vector<TextRange> merged;  // overlapping or touching ranges as one
    for (const TextRange& r : control) {
      if (!merged.empty() && r.begin <= merged.back().end) {
        merged.back().end = std::max(merged.back().end, r.end);
      } else {
        merged.push_back(r);
      }
    }
    control = std::move(merged);
  }
  return tok.encode_marked(t, control, first, limit);
}

Result<std::vector<PromptPart>> chat_parts(const json& body, const ChatTemplate* tmpl,
                                           const ChatTools* tools) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(tmpl ? add_templated(parts, body, *tmpl, tools) : add_messages(parts, body));
  KAMERA_TRY(check_query(parts));
  return parts;
}

WordVocab::WordVocab(const Tokenizer& tok) {
  constexpr std::string_view space = "\xe2\x96\x81";  // "▁"
  const Vocab& v = tok.vocab();
  for (size_t i = 0; i < v.pieces.size(); ++i)
    if (v.types[i] == TokenType::Normal && v.pieces[i].starts_with(space) &&
        v.pieces[i].size() > space.size())
      ids_.emplace(v.pieces[i].substr(space.size()), int32_t(i));
}

Result<std::vector<int32_t>> WordVocab::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (size_t at = 0; at < text.size();) {
    if (is_space(text[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string word(text.substr(at, end - at));
    const auto it = ids_.find(word);
    if (it == ids_.end())
      return make_error(ErrorCode::InvalidArgument,
                        "the word '{}' is not in the model's vocabulary (its prompt is whole "
                        "words, one token each)",
                        word.substr(0, 64));
    ids.push_back(it->second);
    at = end;
  }
  return ids;
}

Status to_word_prompt(std::vector<PromptPart>& parts, const WordVocab& words) {
  if (parts.size() == 1 && !parts[0].tokens.empty()) return Status::Ok();  // token ids as sent
  std::vector<PromptPart> out;
  std::string question;
  for (PromptPart& p : parts) {
    if (!p.is_chunk) {
      question += p.text;
      continue;
    }
    if (question.find_first_not_of(" \t\r\n") != std::string::npos)
      return make_error(ErrorCode::InvalidArgument,
                        "text before a frame: this model reads its frames, then the question "
                        "(the format it was trained on)");
    question.clear();
    out.push_back(std::move(p));
  }
  KAMERA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, words.encode(question));
  if (ids.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "the prompt must end with the question's words (after the frames)");
  out.push_back(PromptPart{});
  out.back().tokens = std::move(ids);
  parts = std::move(out);
  return Status::Ok();
}

Result<std::vector<PromptPart>> word_chat_parts(const json& body, const WordVocab& words) {
  KAMERA_ASSIGN_OR_RETURN(const json* msgs, messages_of(body));
  std::vector<PromptPart> parts;
  for (const json& m : *msgs) {
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role == "assistant" || role == "tool")
      return make_error(ErrorCode::InvalidArgument,
                        "{} messages are refused: this model answers one question about its "
                        "frames and has no turns (send the frames and the question as user "
                        "messages)",
                        role);
    if (!parts.empty()) add_text(parts, " ");
    KAMERA_TRY(add_items(parts, m["content"]));
  }
  KAMERA_TRY(to_word_prompt(parts, words));
  return parts;
}

Result<std::vector<std::vector<PromptPart>>> completion_prompts(const json& prompt, int n_vocab) {
  std::vector<std::vector<PromptPart>> out;
  auto all = [&](auto pred) {
    return prompt.is_array() && !prompt.empty() && std::all_of(prompt.begin(), prompt.end(), pred);
  };
  if (all([](const json& x) { return x.is_number(); })) {
    KAMERA_ASSIGN_OR_RETURN(PromptPart p, token_prompt(prompt, n_vocab));
    out.push_back({std::move(p)});
  } else if (all([](const json& x) { return x.is_array(); })) {
    for (const json& ids : prompt) {
      KAMERA_ASSIGN_OR_RETURN(PromptPart p, token_prompt(ids, n_vocab));
      out.push_back({std::move(p)});
    }
  } else if (all([](const json& x) { return x.is_string(); })) {
    for (const json& t : prompt) {
      out.emplace_back();
      add_text(out.back(), t.get_ref<const std::string&>());
    }
  } else {
    out.emplace_back();
    KAMERA_TRY(add_items(out.back(), prompt));
  }
  for (const auto& parts : out) KAMERA_TRY(check_query(parts));
  return out;
}

}  // namespace kamera
