// POST /tokenize and POST /detokenize, in llama-server's format: {"content", "add_special",
// "parse_special"} → {"tokens": [ids]} (tokenized as a prompt's first text part), and
// {"tokens": [ids]} → {"content"}; any other field is refused by name. Both run on a worker thread
// (the tokenizer is read-only) and are bounded like chunks: text that cannot fit the chunk limit
// and more ids than it holds are refused before any work.
#include "server/server_impl.h"

namespace kamera {

namespace {

Result<std::vector<int32_t>> tokenize(const json& body, const Tokenizer& tok, size_t max_bytes,
                                      bool control_tokens) {
  if (!body.is_object())
    return make_error(ErrorCode::InvalidArgument, "the body must be an object");
  for (const auto& [k, v] : body.items())
    if (k != "content" && k != "add_special" && k != "parse_special")
      return make_error(ErrorCode::InvalidArgument,
                        "\"{}\" is not a field of /tokenize (content, add_special, parse_special)",
                        k);
  if (!body.contains("content") || !body["content"].is_string())
    return make_error(ErrorCode::InvalidArgument, "\"content\" must be a string");
  const std::string& text = body["content"].get_ref<const std::string&>();
  if (max_bytes && text.size() > max_bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "the content ({} bytes) cannot fit the chunk limit; at most {} bytes",
                      text.size(), max_bytes);
  KAMERA_ASSIGN_OR_RETURN(const bool special, bool_field(body, "add_special", false));
  // parse_special: control tokens spelled in the content are read (llama-server's default);
  // without it the content is tokenized as a prompt's first text part: literal, unless the server
  // opted in. Ids are only shown here, so reading them cannot open a turn.
  KAMERA_ASSIGN_OR_RETURN(const bool parse, bool_field(body, "parse_special", false));
  control_tokens = control_tokens || parse;
  std::vector<int32_t> ids;
  if (special && tok.bos() >= 0) ids.push_back(tok.bos());
  const TextRange all{0, text.size()};
  const auto text_ids = tok.encode_marked(
      text, control_tokens ? std::span<const TextRange>(&all, 1) : std::span<const TextRange>(),
      true);
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  return ids;
}

Result<std::string> detokenize(const json& body, const Tokenizer& tok, int64_t max_tokens) {
  if (!body.contains("tokens") || !body["tokens"].is_array())
    return make_error(ErrorCode::InvalidArgument, "\"tokens\" must be an array of token ids");
  const json& t = body["tokens"];
  if (int64_t(t.size()) > max_tokens)
    return make_error(ErrorCode::InvalidArgument, "{} tokens: at most {} (the chunk limit)",
                      t.size(), max_tokens);
  std::vector<int32_t> ids;
  ids.reserve(t.size());
  for (const json& v : t) {
    KAMERA_ASSIGN_OR_RETURN(int64_t id, int_value(v, "a token id", 0, tok.n_vocab() - 1));
    ids.push_back(int32_t(id));
  }
  return tok.decode_all(ids);
}

}  // namespace

void Server::Impl::tokenize_route(const HttpRequest& req, const PathParams&, const std::string&,
                                  Out out) {
  if (!model.tokenizer)
    return respond_error(out, {501, "this model has no tokenizer", "server_error", "unsupported"});
  json body;
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  auto ids = tokenize(body, *model.tokenizer, max_chunk_bytes, opts.control_tokens_in_text);
  if (!ids.ok()) return respond_error(out, http_error(ids.error()));
  respond(out, 200, {{"tokens", *ids}});
}

void Server::Impl::detokenize_route(const HttpRequest& req, const PathParams&, const std::string&,
                                    Out out) {
  if (!model.tokenizer)
    return respond_error(out, {501, "this model has no tokenizer", "server_error", "unsupported"});
  json body;
  if (auto bad = parse_body(req.body, json_limits, body)) return respond_error(out, *bad);
  const int64_t limit = opts.max_chunk_tokens > 0 ? opts.max_chunk_tokens : model.cfg.ctx_len;
  auto text = detokenize(body, *model.tokenizer, limit);
  if (!text.ok()) return respond_error(out, http_error(text.error()));
  respond(out, 200, {{"content", *text}});
}

}  // namespace kamera
