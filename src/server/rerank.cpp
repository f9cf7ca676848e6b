#include "server/rerank.h"

#include <algorithm>
#include <numeric>

namespace kamera {

namespace {

constexpr size_t kMaxDocuments = 1024;

HttpError bad(const std::string& param, const std::string& message,
              const char* code = "invalid_value") {
  return {400, message, "invalid_request_error", code, param};
}

// The template with the query and the document written in (each placeholder once, left to right:
// a query that spells "{document}" stays text), and the template's own spans, where its control
// tokens are read.
std::string render(const std::string& tmpl, const std::string& query, const std::string& doc,
                   std::vector<TextRange>& control) {
  std::string out;
  size_t at = 0;
  while (at < tmpl.size()) {
    const size_t q = tmpl.find("{query}", at), d = tmpl.find("{document}", at);
    const size_t next = std::min(q, d);
    const size_t lit_end = next == std::string::npos ? tmpl.size() : next;
    if (lit_end > at) {
      control.push_back({out.size(), out.size() + (lit_end - at)});
      out.append(tmpl, at, lit_end - at);
    }
    if (next == std::string::npos) break;
    out += next == q ? query : doc;
    at = next + (next == q ? 7 : 10);  // sizes of "{query}" and "{document}"
  }
  return out;
}

// The documents of "documents" or "texts": a non-empty array of strings.
std::optional<std::vector<std::string>> documents_of(const json& body, bool tei, size_t max_bytes,
                                                     HttpError& refusal) {
  const char* key = tei ? "texts" : "documents";
  const json& v = body[key];
  if (!v.is_array() || v.empty() || v.size() > kMaxDocuments)
    return refusal = bad(key, fmt::format("\"{}\" must be a non-empty array of up to {} strings",
                                          key, kMaxDocuments)),
           std::nullopt;
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& d = v[i];
    const std::string at = fmt::format("{}[{}]", key, i);  // the document at fault, by index
    if (!d.is_string())
      return refusal = bad(at, fmt::format("\"{}\" must be a string, not {}", at, d.type_name())),
             std::nullopt;
    if (d.get_ref<const std::string&>().size() > max_bytes)
      return refusal = bad(at, fmt::format("\"{}\" cannot fit the model's context", at),
                           "context_length_exceeded"),
             std::nullopt;
    out.push_back(d.get<std::string>());
  }
  return out;
}

// The fields a rerank body may have; the first other one is refused by name.
std::optional<HttpError> unknown_field(const json& body) {
  for (const auto& [k, v] : body.items()) {
    if (k == "model" || k == "query" || k == "documents" || k == "texts" || k == "top_n" ||
        k == "return_documents" || k == "return_text")
      continue;
    return bad(k, fmt::format("\"{}\" is not a field of /v1/rerank kamera knows", k),
               "unknown_field");
  }
  if (body.contains("documents") && body.contains("texts"))
    return bad("texts", "give \"documents\" (Jina's shape) or \"texts\" (TEI's), not both");
  if (!body.contains("documents") && !body.contains("texts"))
    return bad("documents", "missing \"documents\"");
  return std::nullopt;
}

// The options of the answer: top_n, and whether results carry their text.
std::optional<HttpError> answer_options(const json& body, RerankRequest& r) {
  auto top = int_field(body, "top_n", int64_t(r.documents.size()), 1, INT32_MAX);
  if (!top.ok()) return bad("top_n", top.message());
  r.top_n = int(std::min<int64_t>(*top, int64_t(r.documents.size())));
  for (const char* k : {"return_documents", "return_text"}) {
    auto b = bool_field(body, k, false);
    if (!b.ok()) return bad(k, b.message());
    r.return_text = r.return_text || *b;
  }
  return std::nullopt;
}

// Each document's prompt as token ids, at most the model's context.
std::optional<HttpError> tokenize_prompts(const Model& model, const RerankHead& head,
                                          const std::string& query, RerankRequest& r) {
  const Tokenizer& tok = *model.tokenizer;
  const int ctx_len = model.cfg.ctx_len;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", r.tei ? "texts" : "documents", i);
    std::vector<TextRange> control;
    const std::string text = render(head.prompt, query, r.documents[i], control);
    std::vector<int32_t> ids = tok.encode_marked(text, control, true, size_t(ctx_len) + 1);
    if (ids.empty()) return bad(at, fmt::format("the prompt of \"{}\" is empty", at));
    if (int(ids.size()) > ctx_len)
      return bad(at,
                 fmt::format("the prompt of \"{}\" has more than {} tokens, the model's context",
                             at, ctx_len),
                 "context_length_exceeded");
    r.prompts.push_back(std::move(ids));
  }
  return std::nullopt;
}

// Tokens every prompt begins with, leaving each at least its last token to forward.
size_t common_prefix(const std::vector<std::vector<int32_t>>& prompts) {
  size_t n = prompts[0].size() - 1;
  for (const std::vector<int32_t>& p : prompts) {
    n = std::min(n, p.size() - 1);
    n = size_t(std::mismatch(p.begin(), p.begin() + n, prompts[0].begin()).first - p.begin());
  }
  return n;
}

// One document's score: its prompt's rest forwarded after the prefix `base` holds (a fork of it;
// no base: the whole prompt in a fresh sequence).
Result<double> score_one(Context& ctx, const RerankHead& head, SeqId base,
                         const std::vector<int32_t>& ids, size_t prefix) {
  const int d = ctx.model().cfg.dim;
  SeqId seq = -1;
  if (base >= 0) {
    KAMERA_ASSIGN_OR_RETURN(seq, ctx.pool().fork(base));
  } else {
    seq = ctx.pool().create_sequence();
  }
  std::vector<float> hidden;
  auto r = ctx.cache().forward_chunk(
      seq, ChunkContent::from_tokens({ids.begin() + std::ptrdiff_t(prefix), ids.end()}),
      int32_t(prefix), LogitsMode::None, nullptr, nullptr, &hidden);
  ctx.pool().free_sequence(seq);
  if (!r.ok()) return Error{ErrorCode::OutOfMemory, r.message()};
  return rerank_score(head, hidden.data() + hidden.size() - size_t(d), d);
}

}  // namespace

Result<RerankInfo> rerank_info(const Model& model) {
  if (model.format != "gguf") return RerankInfo{std::nullopt, "it is not a GGUF file"};
  return read_rerank_file(model.source);
}

std::optional<HttpError> refuse_not_reranker(const RerankInfo& info) {
  if (info.head) return std::nullopt;
  return HttpError{400,
                   fmt::format("this model is not a reranker: {}. /v1/rerank needs a reranker "
                               "GGUF (pooling type rank and a classifier head cls.output, as "
                               "llama.cpp converts Qwen3-Reranker; docs/SERVER.md)",
                               info.why_not),
                   "invalid_request_error", "model_not_reranker", "model"};
}

std::optional<RerankRequest> parse_rerank(const json& body, const Model& model,
                                          const RerankHead& head, size_t max_text_bytes,
                                          HttpError& refusal) {
  if (auto e = unknown_field(body)) return refusal = *e, std::nullopt;
  RerankRequest r;
  r.tei = body.contains("texts");
  if (!body.contains("query") || !body["query"].is_string())
    return refusal = bad("query", "\"query\" must be a string"), std::nullopt;
  const std::string& query = body["query"].get_ref<const std::string&>();
  if (query.size() > max_text_bytes)
    return refusal =
               bad("query", "the query cannot fit the model's context", "context_length_exceeded"),
           std::nullopt;
  auto docs = documents_of(body, r.tei, max_text_bytes, refusal);
  if (!docs) return std::nullopt;
  r.documents = std::move(*docs);
  if (auto e = answer_options(body, r)) return refusal = *e, std::nullopt;
  if (!model.tokenizer)
    return refusal = bad("query", "this model has no tokenizer to write the prompts with"),
           std::nullopt;
  if (auto e = tokenize_prompts(model, head, query, r)) return refusal = *e, std::nullopt;
  return r;
}

Result<RerankScores> run_rerank(Context& ctx, const RerankHead& head, const RerankRequest& r,
                                const std::function<bool()>& stop) {
  RerankScores out;
  const size_t prefix = common_prefix(r.prompts);
  SeqId base = -1;
  if (prefix > 0) {
    base = ctx.pool().create_sequence();
    auto f = ctx.cache().forward_chunk(
        base, ChunkContent::from_tokens({r.prompts[0].begin(), r.prompts[0].begin() + prefix}), 0);
    if (!f.ok()) {
      ctx.pool().free_sequence(base);
      return Error{ErrorCode::OutOfMemory, f.message()};
    }
  }
  out.forwarded = int64_t(prefix);
  out.shared = int64_t(prefix);
  Status st = Status::Ok();
  for (const std::vector<int32_t>& ids : r.prompts) {
    if (stop && stop()) {
      st = make_error(ErrorCode::InvalidArgument, "the client left before its ranking ran");
      break;
    }
    auto s = score_one(ctx, head, base, ids, prefix);
    if (!s.ok()) {
      st = s.error();
      break;
    }
    out.scores.push_back(*s);
    out.forwarded += int64_t(ids.size() - prefix);
  }
  if (base >= 0) ctx.pool().free_sequence(base);
  if (!st.ok()) return st.error();
  return out;
}

json rerank_json(const RerankRequest& r, const RerankScores& s, const std::string& model_name) {
  std::vector<size_t> order(s.scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.scores[a] > s.scores[b]; });
  order.resize(size_t(r.top_n));
  json results = json::array();
  for (size_t i : order) {
    json e = {{"index", i}, {r.tei ? "score" : "relevance_score", s.scores[i]}};
    if (r.return_text && r.tei) e["text"] = r.documents[i];
    if (r.return_text && !r.tei) e["document"] = {{"text", r.documents[i]}};
    results.push_back(std::move(e));
  }
  if (r.tei) return results;
  int64_t tokens = 0;
  for (const std::vector<int32_t>& p : r.prompts) tokens += int64_t(p.size());
  return json{{"model", model_name},
              {"object", "list"},
              {"usage",
               {{"prompt_tokens", tokens},
                {"total_tokens", tokens},
                {"prompt_tokens_details", {{"cached_tokens", tokens - s.forwarded}}}}},
              {"results", results}};
}

}  // namespace kamera
