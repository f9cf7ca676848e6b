#include "server/prompt_parts.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "server/json_fields.h"
#include "toolcall/request.h"

namespace kamera {

namespace {

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

// A vision delimiter the server writes: its control tokens' bytes (`control`) are read.
void add_delimiter(std::vector<PromptPart>& parts, const std::string& text,
                   const std::vector<TextRange>& control) {
  size_t at = 0;
  for (const TextRange& r : control) {
    add_text(parts, std::string_view(text).substr(at, r.begin - at));
    add_text(parts, std::string_view(text).substr(r.begin, r.end - r.begin), true);
    at = r.end;
  }
  add_text(parts, std::string_view(text).substr(at));
}

// A chunk between the vision delimiters of `image`'s tower (none: a chunk part of the client's
// that names no picture of the request).
void add_chunk(std::vector<PromptPart>& parts, const ChunkId& id, const MediaPart* image) {
  if (image && !image->open_text.empty())
    add_delimiter(parts, image->open_text, image->open_control);
  parts.push_back({true, "", id, {}, {}});
  if (image && !image->close_text.empty())
    add_delimiter(parts, image->close_text, image->close_control);
}

// A chunk part sent by the client; one naming a picture of the request (in `media`) stands
// between that picture's delimiters.
Status add_chunk(std::vector<PromptPart>& parts, const std::string& hex,
                 const RequestMedia* media) {
  auto id = ChunkId::from_hex(hex);
  if (!id) return make_error(ErrorCode::InvalidArgument, "chunk id '{}' is not 32 hex digits", hex);
  add_chunk(parts, *id, media ? media->part_of(*id) : nullptr);
  return Status::Ok();
}

// One element of a parts array: a string, {"type": "text", "text"}, {"type": "chunk", "id"}, or
// an image or video part that the request's media read (`image`: its chunk, server/media_parts.h).
Status add_part(std::vector<PromptPart>& parts, const ojson& it, const MediaPart* image,
                const RequestMedia* media) {
  if (image) {
    add_chunk(parts, image->id, image);
    return Status::Ok();
  }
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
    KAMERA_TRY(add_chunk(parts, it["id"].get<std::string>(), media));
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown part type '{}' (text, chunk)", type);
  }
  return Status::Ok();
}

// A content value: a string or an array of parts, the content of messages[message] (a prompt's
// parts: 0), where `media` has its image and video parts.
Status add_items(std::vector<PromptPart>& parts, const ojson& items, const RequestMedia* media,
                 size_t message = 0) {
  if (items.is_string()) {
    add_text(parts, items.get_ref<const std::string&>());
    return Status::Ok();
  }
  if (!items.is_array())
    return make_error(ErrorCode::InvalidArgument, "content must be a string or an array of parts");
  for (size_t j = 0; j < items.size(); ++j)
    KAMERA_TRY(add_part(parts, items[j], media ? media->part(message, j) : nullptr, media));
  return Status::Ok();
}

// A message as OpenAI sends it: a role (system, developer, user, assistant, tool; so no role
// spells a control token or a marker), content (a string or parts; null or absent only for an
// assistant message with tool_calls), and the assistant's tool_calls or the tool's tool_call_id.
Status check_message(const ojson& m) {
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
  for (const ojson& c : calls ? m["tool_calls"] : ojson::array())
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
Result<const ojson*> messages_of(const ojson& body) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return make_error(ErrorCode::InvalidArgument, "\"messages\" must be a non-empty array");
  for (const ojson& m : body["messages"]) KAMERA_TRY(check_message(m));
  return &body["messages"];
}

bool has_content(const ojson& m) {
  return m.contains("content") && !m["content"].is_null();
}

// Chat messages laid out as "role: content" lines (tool calls as their JSON), then "assistant:"
// (all of it literal).
Status add_messages(std::vector<PromptPart>& parts, const ojson& body, const RequestMedia* media) {
  KAMERA_ASSIGN_OR_RETURN(const ojson* msgs, messages_of(body));
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    add_text(parts, m["role"].get_ref<const std::string&>() + ": ");
    if (has_content(m)) KAMERA_TRY(add_items(parts, m["content"], media, i));
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

// The content of messages[message] as the template reads it: its text parts joined, literal but
// for the vision delimiters around its images (the server's text, as the template's own), each
// chunk part and each image or video part (its chunk) a piece (jinja/value.h) whose number is its
// place in `chunks` plus one.
Result<jinja::Text> content_text(const ojson& content, size_t message, std::vector<ChunkId>& chunks,
                                 const RequestMedia* media) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(add_items(parts, content, media, message));
  jinja::Text t;
  for (const PromptPart& p : parts) {
    if (!p.is_chunk) {
      size_t at = 0;
      for (const TextRange& c : p.control) {
        t.append(std::string_view(p.text).substr(at, c.begin - at), true);
        t.append(std::string_view(p.text).substr(c.begin, c.end - c.begin), false);
        at = c.end;
      }
      t.append(std::string_view(p.text).substr(at), true);
      continue;
    }
    chunks.push_back(p.id);
    t.append_piece(uint32_t(chunks.size()));
  }
  return t;
}

// Every byte of a client's string is literal as the template gets it.
jinja::Spans all_literal(std::string_view s) {
  return jinja::all_or_none(s.size(), true);
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

// Rendered template text cut into parts at its pieces (each a chunk part: chunks[piece - 1]).
// Text between keeps its literal spans: the template's own text reads control tokens, text a
// client wrote never does, wherever the template put it and whatever it did with it.
Status split_rendered(std::vector<PromptPart>& parts, const jinja::Text& text,
                      const std::vector<ChunkId>& chunks) {
  KAMERA_ASSIGN_OR_RETURN(std::vector<jinja::TextOrPiece> pieces, jinja::pieces_of(text));
  for (const jinja::TextOrPiece& p : pieces) {
    if (p.piece == 0) {
      add_rendered(parts, p.text, 0, p.text.str.size());
    } else if (p.piece <= chunks.size()) {
      parts.push_back({true, "", chunks[p.piece - 1], {}, {}});
    } else {
      return make_error(ErrorCode::Internal, "the chat template printed an unknown piece");
    }
  }
  return Status::Ok();
}

// A message as the chat template reads it: content as a string (null as ""; an array of parts
// as `content`: its text and chunk parts and its images' chunks, jinja/value.h), tool calls with
// their arguments as JSON values (OpenAI sends them as strings; templates write them with tojson),
// the tool's tool_call_id and name.
Result<nlohmann::ordered_json> template_message(const ojson& m, size_t message,
                                                std::optional<jinja::Text>& content,
                                                std::vector<ChunkId>& chunks,
                                                const RequestMedia* media) {
  nlohmann::ordered_json out;
  out["role"] = m["role"] == "developer" ? ojson("system") : m["role"];
  out["content"] = has_content(m) && m["content"].is_string() ? m["content"] : ojson("");
  if (has_content(m) && !m["content"].is_string()) {
    KAMERA_ASSIGN_OR_RETURN(content, content_text(m["content"], message, chunks, media));
  }
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    out["tool_calls"] = ojson::array();
    for (const ojson& c : m["tool_calls"]) {
      ojson call(c);  // nlohmann converts between its two kinds of object
      const ojson& args = c["function"].value("arguments", ojson("{}"));
      if (args.is_string()) {
        auto parsed = ojson::parse(args.get<std::string>(), nullptr, false);
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
Status add_templated(std::vector<PromptPart>& parts, const ojson& body, const ChatTemplate& tmpl,
                     const ChatTools* tools, const RequestMedia* media) {
  KAMERA_ASSIGN_OR_RETURN(const ojson* checked, messages_of(body));
  ojson msgs = ojson::array();
  std::vector<std::optional<jinja::Text>> contents(checked->size());
  std::vector<ChunkId> chunks;
  for (size_t i = 0; i < checked->size(); ++i) {
    KAMERA_ASSIGN_OR_RETURN(msgs.emplace_back(),
                            template_message((*checked)[i], i, contents[i], chunks, media));
  }
  ChatRenderOptions ro;  // bos_token empty: the context's anchor already holds BOS
  KAMERA_ASSIGN_OR_RETURN(ro.extra, template_variables(body, &tmpl));
  if (tools && tools->format) msgs = toolcall::prepare_messages(msgs, *tools->format);
  if (tools) ro.tools = tools->tools;
  ro.literal = all_literal;  // every string and key of the messages and tools
  KAMERA_ASSIGN_OR_RETURN(jinja::Text text, tmpl.render_json_text(msgs, ro, contents));
  return split_rendered(parts, text, chunks);
}

// Parts that end with the query (text or token ids).
Status check_query(const std::vector<PromptPart>& parts) {
  if (parts.empty() || parts.back().is_chunk ||
      (parts.back().text.empty() && parts.back().tokens.empty()))
    return make_error(ErrorCode::InvalidArgument, "the prompt must end with text (the query)");
  return Status::Ok();
}

// A prompt of token ids, each in the vocabulary.
Result<PromptPart> token_prompt(const ojson& ids, int n_vocab) {
  if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "a token prompt is empty");
  PromptPart p;
  for (const ojson& t : ids) {
    KAMERA_ASSIGN_OR_RETURN(int64_t v, int_value(t, "a prompt token id", 0, n_vocab - 1));
    p.tokens.push_back(int32_t(v));
  }
  return p;
}

// A value a client may give a template variable: no text that could spell markup.
bool plain_value(const ojson& v) {
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

Status chat_template_kwargs(const ojson& kw, ojson& vars) {
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
    vars[k] = ojson(v);
  }
  return Status::Ok();
}

Status reasoning_effort(const ojson& v, const ChatTemplate& tmpl, ojson& vars) {
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

Result<ojson> template_variables(const ojson& body, const ChatTemplate* tmpl, std::string* param) {
  ojson vars = ojson::object();
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
  const TextRange all{0, t.size()};
  return tok.encode_marked(
      t, spots.everywhere ? std::span<const TextRange>(&all, 1) : std::span(part.control), first,
      limit);
}

Result<std::vector<PromptPart>> chat_parts(const ojson& body, const ChatTemplate* tmpl,
                                           const ChatTools* tools, const RequestMedia* media) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(tmpl ? add_templated(parts, body, *tmpl, tools, media)
                  : add_messages(parts, body, media));
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

Result<std::vector<PromptPart>> word_chat_parts(const ojson& body, const WordVocab& words,
                                                const RequestMedia* media) {
  KAMERA_ASSIGN_OR_RETURN(const ojson* msgs, messages_of(body));
  std::vector<PromptPart> parts;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role == "assistant" || role == "tool")
      return make_error(ErrorCode::InvalidArgument,
                        "{} messages are refused: this model answers one question about its "
                        "frames and has no turns (send the frames and the question as user "
                        "messages)",
                        role);
    if (!parts.empty()) add_text(parts, " ");
    KAMERA_TRY(add_items(parts, m["content"], media, i));
  }
  KAMERA_TRY(to_word_prompt(parts, words));
  return parts;
}

Result<std::vector<std::vector<PromptPart>>> completion_prompts(const ojson& prompt, int n_vocab,
                                                                const RequestMedia* media) {
  std::vector<std::vector<PromptPart>> out;
  auto all = [&](auto pred) {
    return prompt.is_array() && !prompt.empty() && std::all_of(prompt.begin(), prompt.end(), pred);
  };
  if (all([](const ojson& x) { return x.is_number(); })) {
    KAMERA_ASSIGN_OR_RETURN(PromptPart p, token_prompt(prompt, n_vocab));
    out.push_back({std::move(p)});
  } else if (all([](const ojson& x) { return x.is_array(); })) {
    for (const ojson& ids : prompt) {
      KAMERA_ASSIGN_OR_RETURN(PromptPart p, token_prompt(ids, n_vocab));
      out.push_back({std::move(p)});
    }
  } else if (all([](const ojson& x) { return x.is_string(); })) {
    for (const ojson& t : prompt) {
      out.emplace_back();
      add_text(out.back(), t.get_ref<const std::string&>());
    }
  } else {
    out.emplace_back();
    KAMERA_TRY(add_items(out.back(), prompt, media));
  }
  for (const auto& parts : out) KAMERA_TRY(check_query(parts));
  return out;
}

}  // namespace kamera
