#include "server/prompt_parts.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "server/json_fields.h"
#include "toolcall/request.h"
#include "vision/kimi_chunks.h"
#include "vision/vl_prompt.h"

namespace kamera {

using json = nlohmann::json;

namespace {

// Markers in rendered template text, made of a byte no client text may hold (0x02; it is not
// whitespace, so a template's trim keeps it): a chunk part, and the start and end of a message's
// content. A template that writes a content as JSON (tojson) escapes the byte as \u0002: the
// markers are recognized in that form too.
constexpr char kMarkByte = '\x02';
constexpr std::string_view kChunkWord = "kamera-chunk:", kOpenWord = "kamera-text",
                           kCloseWord = "kamera-end";

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

// A message's content as template text: text parts joined, each chunk part a marker with its id,
// the whole between the content markers. Leading and trailing whitespace stays outside them, so a
// template that trims the content trims the same bytes as without markers.
Result<std::string> templated_content(const json& content) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(add_items(parts, content));
  std::string inner;
  for (const PromptPart& p : parts) {
    if (p.text.find(kMarkByte) != std::string::npos || p.text.find("\\u0002") != std::string::npos)
      return make_error(ErrorCode::InvalidArgument,
                        "message text holds a reserved byte (0x02, or its JSON escape \\u0002)");
    inner += p.is_chunk ? mark(kChunkWord, p.id.hex()) : p.text;
  }
  size_t lead = 0, trail = inner.size();
  while (lead < trail && is_space(inner[lead])) ++lead;
  while (trail > lead && is_space(inner[trail - 1])) --trail;
  if (lead == trail) return inner;  // nothing a control token could be spelled with
  return inner.substr(0, lead) + mark(kOpenWord) + inner.substr(lead, trail - lead) +
         mark(kCloseWord) + inner.substr(trail);
}

// A marker at the start of `s`, raw or JSON-escaped: its word, the id of a chunk marker and its
// length; an empty word when `s` starts with no marker.
struct Marker {
  std::string_view word, id;
  size_t size = 0;
};

Marker marker_at(std::string_view s) {
  for (std::string_view sep : {std::string_view("\x02", 1), std::string_view("\\u0002")}) {
    if (!s.starts_with(sep)) continue;
    for (std::string_view word : {kChunkWord, kOpenWord, kCloseWord}) {
      if (!s.substr(sep.size()).starts_with(word)) continue;
      const size_t id_at = sep.size() + word.size(), end = s.find(sep, id_at);
      if (end == std::string_view::npos) return {};
      const std::string_view id = s.substr(id_at, end - id_at);
      if ((word == kChunkWord) != !id.empty()) return {};
      return {word, id, end + sep.size()};
    }
  }
  return {};
}

// Rendered template text cut into parts at the markers: chunk markers become chunk parts; text
// between a content's markers is literal, the rest is the template's (control). A content end
// without its start (the template cut the content apart) makes the text since the last marker
// literal as well; text after a start without its end stays literal.
Status split_rendered(std::vector<PromptPart>& parts, const std::string& text) {
  bool literal = false;
  for (size_t at = 0;;) {
    const size_t raw = text.find(kMarkByte, at), escaped = text.find("\\u0002", at);
    const size_t next = std::min(raw, escaped);
    const std::string_view piece(text.data() + at,
                                 (next == std::string::npos ? text.size() : next) - at);
    const Marker m =
        next == std::string::npos ? Marker{} : marker_at(std::string_view(text).substr(next));
    if (next != std::string::npos && m.word.empty()) {
      if (next == raw)
        return make_error(ErrorCode::Internal, "the chat template broke a marker of the server");
      add_text(parts, text.substr(at, next + 1 - at), !literal);  // the template's own "\u0002"
      at = next + 1;
      continue;
    }
    add_text(parts, piece, !literal && m.word != kCloseWord);
    if (next == std::string::npos) break;
    if (m.word == kChunkWord) KAMERA_TRY(add_chunk(parts, std::string(m.id)));
    if (m.word != kChunkWord) literal = m.word == kOpenWord;
    at = next + m.size;
  }
  if (!parts.empty() && !parts.front().is_chunk && parts.front().text.empty())
    parts.erase(parts.begin());
  return Status::Ok();
}

// A message as the chat template reads it: content as marked template text (null as ""), tool
// calls with their arguments as JSON values (OpenAI sends them as strings; templates write them
// with tojson), the tool's tool_call_id and name.
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
        if (!parsed.is_discarded()) call["function"]["arguments"] = std::move(parsed);
      }
      out["tool_calls"].push_back(std::move(call));
    }
  }
  for (const char* k : {"tool_call_id", "name"})
    if (m.contains(k) && m[k].is_string()) out[k] = m[k];
  return out;
}

// Chat messages rendered by the model's chat template (with the generation prompt and the
// request's tools).
Status add_templated(std::vector<PromptPart>& parts, const json& body, const ChatTemplate& tmpl,
                     const ChatTools* tools) {
  KAMERA_ASSIGN_OR_RETURN(const json* checked, messages_of(body));
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const json& m : *checked) {
    KAMERA_ASSIGN_OR_RETURN(msgs.emplace_back(), template_message(m));
  }
  ChatRenderOptions ro;  // bos_token empty: the context's anchor already holds BOS
  if (tools && tools->format) msgs = toolcall::prepare_messages(msgs, *tools->format);
  if (tools) ro.tools = tools->tools;
  KAMERA_ASSIGN_OR_RETURN(std::string text, tmpl.render_json(msgs, ro));
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

}  // namespace

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
