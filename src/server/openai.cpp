#include "server/openai.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>

#include "server/request_fields.h"
#include "toolcall/request.h"

namespace kamera {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::CorruptData:
      return 400;
    case ErrorCode::NotFound:
      return 404;
    case ErrorCode::Unsupported:
      return 501;
    case ErrorCode::OutOfMemory:
      return 503;
    case ErrorCode::Internal:
    case ErrorCode::Io:
      return 500;
  }
  return 500;
}

HttpError http_error(const Error& e) {
  const int status = http_status(e.code);
  return {status, e.message,
          status == 404  ? "not_found_error"
          : status < 500 ? "invalid_request_error"
                         : "server_error",
          e.code == ErrorCode::OutOfMemory ? "capacity" : error_code_name(e.code)};
}

json error_body(const HttpError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<json> parse_body(std::string_view body) {
  try {
    json j = json::parse(body);
    if (!j.is_object())
      return make_error(ErrorCode::InvalidArgument, "the request body must be a JSON object");
    return j;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::CorruptData, "malformed JSON: {}", e.what());
  }
}

Result<int64_t> int_value(const json& v, const std::string& what, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      return make_error(ErrorCode::InvalidArgument, "{} = {} is outside [{}, {}]", what, u, lo, hi);
    x = int64_t(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    return make_error(ErrorCode::InvalidArgument, "{} must be an integer", what);
  }
  if (x < lo || x > hi)
    return make_error(ErrorCode::InvalidArgument, "{} = {} is outside [{}, {}]", what, x, lo, hi);
  return x;
}

Result<int64_t> int_field(const json& body, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  return int_value(body[key], fmt::format("\"{}\"", key), lo, hi);
}

Result<double> number_field(const json& body, const char* key, double dflt, double lo, double hi) {
  if (!body.contains(key) || body[key].is_null()) return dflt;
  if (!body[key].is_number())
    return make_error(ErrorCode::InvalidArgument, "\"{}\" must be a number", key);
  const double v = body[key].get<double>();
  if (!(v >= lo && v <= hi))
    return make_error(ErrorCode::InvalidArgument, "\"{}\" = {} is outside [{}, {}]", key, v, lo,
                      hi);
  return v;
}

namespace {

// Appends text to the last part when it is text, else starts a text part.
void add_text(std::vector<PromptPart>& parts, const std::string& t) {
  if (!parts.empty() && !parts.back().is_chunk) {
    parts.back().text += t;
  } else {
    parts.push_back({false, t, {}, {}});
  }
}

// One element of a parts array: a string, {"type": "text", "text"} or {"type": "chunk", "id"}.
Status add_part(std::vector<PromptPart>& parts, const json& it) {
  if (it.is_string()) {
    add_text(parts, it.get<std::string>());
    return Status::Ok();
  }
  if (!it.is_object() || !it.contains("type") || !it["type"].is_string())
    return make_error(ErrorCode::InvalidArgument,
                      "each part must be a string or an object with a \"type\"");
  const std::string type = it["type"].get<std::string>();
  if (type == "text") {
    if (!it.contains("text") || !it["text"].is_string())
      return make_error(ErrorCode::InvalidArgument, "a text part needs \"text\"");
    add_text(parts, it["text"].get<std::string>());
  } else if (type == "chunk") {
    if (!it.contains("id") || !it["id"].is_string())
      return make_error(ErrorCode::InvalidArgument, "a chunk part needs \"id\"");
    auto id = ChunkId::from_hex(it["id"].get<std::string>());
    if (!id)
      return make_error(ErrorCode::InvalidArgument, "chunk id '{}' is not 32 hex digits",
                        it["id"].get<std::string>());
    parts.push_back({true, "", *id, {}});
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown part type '{}' (text, chunk)", type);
  }
  return Status::Ok();
}

// A content value: a string or an array of parts.
Status add_items(std::vector<PromptPart>& parts, const json& items) {
  if (items.is_string()) {
    add_text(parts, items.get<std::string>());
    return Status::Ok();
  }
  if (!items.is_array())
    return make_error(ErrorCode::InvalidArgument, "content must be a string or an array of parts");
  for (const json& it : items) KAMERA_TRY(add_part(parts, it));
  return Status::Ok();
}

// A message as OpenAI sends it: a role (system, developer, user, assistant, tool), content (a
// string or parts; null or absent only for an assistant message with tool_calls), and the
// assistant's tool_calls or the tool's tool_call_id.
Status check_message(const json& m) {
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
      !roles.count(m["role"].get<std::string>()))
    return make_error(ErrorCode::InvalidArgument,
                      "each message needs a \"role\": system, developer, user, assistant or tool");
  const std::string role = m["role"].get<std::string>();
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

// Chat messages laid out as "role: content" lines (tool calls as their JSON), then "assistant:".
Status add_messages(std::vector<PromptPart>& parts, const json& body) {
  KAMERA_ASSIGN_OR_RETURN(const json* msgs, messages_of(body));
  for (const json& m : *msgs) {
    add_text(parts, m["role"].get<std::string>() + ": ");
    if (m.contains("content") && !m["content"].is_null())
      KAMERA_TRY(add_items(parts, m["content"]));
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      add_text(parts, dump(m["tool_calls"]));
    add_text(parts, "\n");
  }
  add_text(parts, "assistant:");
  return Status::Ok();
}

// A chunk part inside rendered template text: a marker no template or user text writes.
constexpr std::string_view kChunkMark =
    "\x1e"
    "kamera-chunk:";

// A message's content as template text: text parts joined, each chunk part a marker with its id.
Result<std::string> templated_content(const json& content) {
  std::vector<PromptPart> parts;
  KAMERA_TRY(add_items(parts, content));
  std::string out;
  for (const PromptPart& p : parts) {
    if (p.text.find(kChunkMark) != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "message text holds a reserved byte (0x1e)");
    out += p.is_chunk ? fmt::format("{}{}\x1e", kChunkMark, p.id.hex()) : p.text;
  }
  return out;
}

// A message as the chat template reads it: content as text (null as ""), tool calls with their
// arguments as JSON values (OpenAI sends them as strings; templates write them with tojson), the
// tool's tool_call_id and name.
Result<nlohmann::ordered_json> template_message(const json& m) {
  nlohmann::ordered_json out;
  out["role"] = m["role"].get<std::string>() == "developer" ? "system" : m["role"];
  out["content"] = "";
  if (m.contains("content") && !m["content"].is_null()) {
    KAMERA_ASSIGN_OR_RETURN(std::string content, templated_content(m["content"]));
    out["content"] = content;
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

// Chat messages rendered by the model's chat template (with the generation prompt), then cut
// into text and chunk parts at the markers.
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
  for (size_t at = 0;;) {
    const size_t mark = text.find(kChunkMark, at);
    add_text(parts, text.substr(at, mark == std::string::npos ? std::string::npos : mark - at));
    if (mark == std::string::npos) break;
    const size_t id_at = mark + kChunkMark.size(), end = text.find('\x1e', id_at);
    auto id = end == std::string::npos ? std::nullopt
                                       : ChunkId::from_hex(text.substr(id_at, end - id_at));
    if (!id) return make_error(ErrorCode::Internal, "the chat template broke a chunk marker");
    parts.push_back({true, "", *id, {}});
    at = end + 1;
  }
  if (!parts.empty() && !parts.front().is_chunk && parts.front().text.empty())
    parts.erase(parts.begin());
  return Status::Ok();
}

// Parts that end with the query (text).
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

// The prompts of /v1/completions: a string; token ids; a batch (strings, or token arrays), one
// prompt each; or parts (an array holding objects: text and chunk parts).
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
    for (const json& t : prompt) out.push_back({PromptPart{false, t.get<std::string>(), {}, {}}});
  } else {
    out.emplace_back();
    KAMERA_TRY(add_items(out.back(), prompt));
  }
  for (const auto& parts : out) KAMERA_TRY(check_query(parts));
  return out;
}

Result<ServePolicy> reuse_policy(const json& body) {
  if (!body.contains("reuse")) return ServePolicy::Patch;
  const json& p = body["reuse"];
  const std::string s = p.is_string() ? p.get<std::string>() : "";
  if (s == "patch") return ServePolicy::Patch;
  if (s == "blind") return ServePolicy::Blind;
  if (s == "reprefill") return ServePolicy::Reprefill;
  return make_error(ErrorCode::InvalidArgument, "\"reuse\" must be patch, blind or reprefill");
}

}  // namespace

Result<std::vector<GenRequest>> gen_requests(const json& body, bool chat, const ServerOptions& opts,
                                             const ModelConfig& cfg, const ChatTemplate* tmpl,
                                             std::string* param, const ChatTools* tools) {
  const char* field = "";
  auto failed = [&](const char* f, const Error& e) {
    if (param) *param = f;
    return e;
  };
  GenRequest r;
  r.chat = chat;
  Status st =
      generation_fields(body, chat ? Endpoint::Chat : Endpoint::Completions, opts, cfg, r, field);
  if (!st.ok()) return failed(field, st.error());
  auto rank = int_field(body, "rank", 32, 1, 1 << 20);
  if (!rank.ok()) return failed("rank", rank.error());
  r.rank = int(*rank);
  auto policy = reuse_policy(body);
  if (!policy.ok()) return failed("reuse", policy.error());
  r.policy = *policy;
  if (body.contains("deep_half"))
    r.deep_half = body["deep_half"].is_boolean() && body["deep_half"].get<bool>();
  std::vector<std::vector<PromptPart>> prompts;
  if (chat) {
    prompts.emplace_back();
    Status m = tmpl ? add_templated(prompts.back(), body, *tmpl, tools)
                    : add_messages(prompts.back(), body);
    if (m.ok()) m = check_query(prompts.back());
    if (!m.ok()) return failed("messages", m.error());
  } else {
    if (!body.contains("prompt"))
      return failed("prompt", make_error(ErrorCode::InvalidArgument, "missing \"prompt\""));
    auto p = completion_prompts(body["prompt"], cfg.n_vocab);
    if (!p.ok()) return failed("prompt", p.error());
    prompts = std::move(p.value());
  }
  if (prompts.size() > size_t(std::max(1, opts.max_queue)))
    return failed("prompt", make_error(ErrorCode::InvalidArgument,
                                       "a batch of {} prompts exceeds the queue of {}",
                                       prompts.size(), opts.max_queue));
  std::vector<GenRequest> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    out.push_back(r);
    out.back().parts = std::move(prompts[i]);
    out.back().first_index = int(i) * r.n;
  }
  return out;
}

Result<GenRequest> gen_request(const json& body, bool chat, const ServerOptions& opts,
                               const ModelConfig& cfg, const ChatTemplate* tmpl,
                               std::string* param) {
  KAMERA_ASSIGN_OR_RETURN(auto all, gen_requests(body, chat, opts, cfg, tmpl, param));
  if (all.size() != 1) {
    if (param) *param = "prompt";
    return make_error(ErrorCode::InvalidArgument, "one prompt here, not a batch of {}", all.size());
  }
  return std::move(all[0]);
}

namespace {

Result<ChunkContent> text_chunk(const json& b, const Model& model, size_t max_bytes) {
  if (!b["text"].is_string())
    return make_error(ErrorCode::InvalidArgument, "\"text\" must be a string");
  if (max_bytes && b["text"].get_ref<const std::string&>().size() > max_bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "the text ({} bytes) cannot fit the chunk limit; at most {} bytes",
                      b["text"].get_ref<const std::string&>().size(), max_bytes);
  if (!model.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "this model has no tokenizer: send \"tokens\"");
  auto ids = model.tokenizer->encode_raw(b["text"].get<std::string>());
  if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "the text is empty");
  return ChunkContent::from_tokens(std::move(ids));
}

Result<ChunkContent> token_chunk(const json& b, int n_vocab) {
  if (!b["tokens"].is_array() || b["tokens"].empty())
    return make_error(ErrorCode::InvalidArgument, "\"tokens\" must be a non-empty array");
  std::vector<int32_t> ids;
  for (const json& t : b["tokens"]) {
    KAMERA_ASSIGN_OR_RETURN(int64_t v, int_value(t, "a token id", 0, n_vocab - 1));
    ids.push_back(int32_t(v));
  }
  return ChunkContent::from_tokens(std::move(ids));
}

// Rows of dim finite numbers that a float holds, appended to out.
Status embedding_rows(const json& e, int dim, std::vector<float>& out) {
  out.reserve(e.size() * size_t(dim));
  for (size_t r = 0; r < e.size(); ++r) {
    if (!e[r].is_array() || int(e[r].size()) != dim)
      return make_error(ErrorCode::InvalidArgument,
                        "embedding row {} must be an array of {} numbers (the model's width)", r,
                        dim);
    for (const json& x : e[r]) {
      if (!x.is_number())
        return make_error(ErrorCode::InvalidArgument, "embedding row {} holds a non-number", r);
      const double v = x.get<double>();
      if (!std::isfinite(v) || std::fabs(v) > double(FLT_MAX))
        return make_error(ErrorCode::InvalidArgument,
                          "embedding row {} holds {}, not a finite float", r, v);
      out.push_back(float(v));
    }
  }
  return Status::Ok();
}

// One [t, h, w] per row, each in [0, ctx_len).
Status embedding_positions(const json& b, size_t rows, int ctx_len, std::vector<Pos>& layout) {
  if (!b.contains("positions")) {
    for (size_t r = 0; r < rows; ++r) layout.push_back(Pos::linear(int32_t(r)));
    return Status::Ok();
  }
  const json& p = b["positions"];
  if (!p.is_array() || p.size() != rows)
    return make_error(ErrorCode::InvalidArgument,
                      "\"positions\" must hold one [t, h, w] per embedding row ({})", rows);
  for (const json& q : p) {
    if (!q.is_array() || q.size() != 3)
      return make_error(ErrorCode::InvalidArgument, "each position must be [t, h, w] integers");
    int64_t v[3];
    for (int i = 0; i < 3; ++i) {
      KAMERA_ASSIGN_OR_RETURN(v[i], int_value(q[i], "a position", 0, ctx_len - 1));
    }
    layout.push_back({int32_t(v[0]), int32_t(v[1]), int32_t(v[2])});
  }
  return Status::Ok();
}

Result<ChunkContent> embedding_chunk(const json& b, int dim, int ctx_len, int max_tokens) {
  const json& e = b["embeddings"];
  if (!e.is_array() || e.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "\"embeddings\" must be a non-empty array of rows");
  if (int64_t(e.size()) > max_tokens)
    return make_error(ErrorCode::InvalidArgument, "{} embedding rows exceed the chunk limit of {}",
                      e.size(), max_tokens);
  ChunkContent cc;
  cc.dim = dim;
  KAMERA_TRY(embedding_rows(e, dim, cc.embeddings));
  KAMERA_TRY(embedding_positions(b, e.size(), ctx_len, cc.layout));
  return cc;
}

}  // namespace

Result<ChunkContent> chunk_content(const json& b, const Model& model, int max_chunk_tokens,
                                   size_t max_text_bytes) {
  const ModelConfig& c = model.cfg;
  const int max_tokens = max_chunk_tokens > 0 ? max_chunk_tokens : c.ctx_len;
  const int kinds =
      int(b.contains("text")) + int(b.contains("tokens")) + int(b.contains("embeddings"));
  if (kinds != 1)
    return make_error(ErrorCode::InvalidArgument,
                      "give exactly one of \"text\", \"tokens\", \"embeddings\"");
  auto cc = b.contains("text")     ? text_chunk(b, model, max_text_bytes)
            : b.contains("tokens") ? token_chunk(b, c.n_vocab)
                                   : embedding_chunk(b, c.dim, c.ctx_len, max_tokens);
  if (!cc.ok()) return cc;
  if (cc->n() > max_tokens)
    return make_error(ErrorCode::InvalidArgument, "the chunk has {} tokens, over the limit of {}",
                      cc->n(), max_tokens);
  KAMERA_TRY(cc->validate(c.n_vocab, c.dim));
  if (1 + cc->extent() > c.ctx_len)
    return make_error(ErrorCode::InvalidArgument,
                      "the chunk's positions reach {}, past the model's context of {}",
                      cc->extent(), c.ctx_len);
  return cc;
}

json chunk_json(const CanonicalEntry& e) {
  return {{"id", e.id.hex()},
          {"object", "chunk"},
          {"n_tokens", e.content.n()},
          {"extent", e.content.extent()},
          {"kind", e.content.is_tokens() ? "tokens" : "embeddings"},
          {"bytes", e.kv.bytes()}};
}

}  // namespace kamera
