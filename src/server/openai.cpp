#include "server/openai.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>

#include "server/prompt_parts.h"
#include "server/request_fields.h"
#include "toolcall/request.h"

namespace kamera {

namespace {

Result<ReusePolicy> reuse_policy(const ojson& body, ReusePolicy fallback) {
  if (!body.contains("reuse")) return fallback;
  const ojson& p = body["reuse"];
  if (auto named = reuse_policy_named(p.is_string() ? p.get<std::string>() : "")) return *named;
  return make_error(ErrorCode::InvalidArgument,
                    "\"reuse\" must be patch, keep, prefix, blind or reprefill");
}

// The request's "reuse_budget" (a number in [0, 1]; cache/repair_plan.h), else the server's for a
// patch request. Only patch repairs: a budget above 0 with another policy is refused.
Result<double> reuse_budget(const ojson& body, ReusePolicy policy, double fallback) {
  const bool patch = policy == ReusePolicy::Patch;
  if (!body.contains("reuse_budget") || body["reuse_budget"].is_null())
    return patch ? fallback : 0.0;
  const ojson& b = body["reuse_budget"];
  const double v = b.is_number() ? b.get<double>() : -1;
  if (!b.is_number() || !(v >= 0 && v <= 1))
    return make_error(ErrorCode::InvalidArgument,
                      "\"reuse_budget\" must be a number in [0, 1] (the share of the tokens served "
                      "from another context that may be recomputed in context)");
  if (v > 0 && !patch)
    return make_error(ErrorCode::InvalidArgument,
                      "\"reuse_budget\" above 0 needs \"reuse\": \"patch\" ({} has no repair)",
                      reuse_policy_name(policy));
  return v;
}

// Milliseconds, rounded to microseconds.
double ms(double s) {
  return std::round(s * 1e6) / 1e3;
}

// What the request's first token cost (measured) and what a re-prefill of its whole prompt
// would have cost (estimated: the prompt's tokens at the server's measured prefill speed; null
// until a prefill was long enough to measure one).
json timings_json(const PromptUsage& u) {
  json t = {{"queue_ms", ms(u.queue_s)},        {"prefill_ms", ms(u.prefill_s)},
            {"ttft_ms", ms(u.ttft_s)},          {"prefill_tokens_per_s", nullptr},
            {"reprefill_estimate_ms", nullptr}, {"saved_estimate_ms", nullptr}};
  if (u.prefill_tokens_per_s > 0) {
    const double whole = double(u.prompt_tokens) / u.prefill_tokens_per_s;
    t["prefill_tokens_per_s"] = std::round(u.prefill_tokens_per_s * 10) / 10;
    t["reprefill_estimate_ms"] = ms(whole);
    t["saved_estimate_ms"] = ms(std::max(0.0, whole - u.prefill_s));
  }
  return t;
}

// What a span got for its context (cache/served_span.h): its kind, the deficit estimate of a
// span held from another context, the tokens the repair budget recomputed.
json repair_json(const ServedSegment& s) {
  json r = {{"kind", repair_kind_name(repair_kind(s))}};
  if (s.repair_estimate >= 0) r["estimate"] = std::round(s.repair_estimate * 1e4) / 1e4;
  r["recomputed_tokens"] = s.repaired ? s.tokens : 0;
  return r;
}

}  // namespace

json usage_json(const Usage& usage, const RequestMedia* media) {
  const PromptUsage& u = usage.prompt;
  const int64_t completion_tokens = usage.completion_tokens;
  json segments = json::array();
  for (const ServedSegment& s : u.segments) {
    json j = {
        {"tokens", s.tokens}, {"position", s.position}, {"source", span_source_name(s.source)}};
    if (s.id) j["id"] = s.id->hex();
    if (s.media) j["media"] = true;
    if (s.media && s.id && media)
      j["embedding"] = media->embedding_hit(*s.id) ? "cached" : "encoded";
    if (s.shared_antecedents >= 0) j["shared_antecedents"] = s.shared_antecedents;
    j["repair"] = repair_json(s);
    segments.push_back(std::move(j));
  }
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", u.prompt_tokens + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"kamera",
               {{"reused_tokens", u.reused},
                {"recomputed_tokens", u.recomputed},
                {"policy", reuse_policy_name(u.policy)},
                {"segments", std::move(segments)},
                {"repair",
                 {{"budget", u.reuse_budget},
                  {"candidate_tokens", u.repair_candidates},
                  {"recomputed_tokens", u.repaired}}},
                {"background", {{"canonicals_queued", u.background_queued}}},
                {"timings", timings_json(u)},
                {"speculative", {{"drafted", usage.drafted}, {"accepted", usage.accepted}}}}}};
  out["kamera"]["speculative"]["forced"] = usage.forced;  // of the drafted: the grammar's
  if (media)
    out["images"] = {{"count", media->images},
                     {"frames", media->frames},
                     {"audio_clips", media->audio_clips},
                     {"image_tokens", media->image_tokens},
                     {"encoded", media->encoded},
                     {"cached_embeddings", media->cached_embeddings},
                     {"reused_chunks", media->reused_chunks}};
  return out;
}

Result<std::vector<GenRequest>> gen_requests(const ojson& body, bool chat,
                                             const ServerOptions& opts, const ModelConfig& cfg,
                                             const ChatTemplate* tmpl, std::string* param,
                                             const ChatTools* tools, const WordVocab* words,
                                             const RequestMedia* media) {
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
  auto policy = reuse_policy(body, opts.reuse);
  if (!policy.ok()) return failed("reuse", policy.error());
  r.plan.policy = *policy;
  auto budget = reuse_budget(body, *policy, opts.reuse_budget);
  if (!budget.ok()) return failed("reuse_budget", budget.error());
  r.plan.reuse_budget = *budget;
  auto deep_half = bool_field(body, "deep_half", false);
  if (!deep_half.ok()) return failed("deep_half", deep_half.error());
  r.deep_half = *deep_half;
  auto stream = bool_field(body, "stream", false);
  if (!stream.ok()) return failed("stream", stream.error());
  r.stream = *stream;
  std::vector<std::vector<PromptPart>> prompts;
  if (chat) {
    std::string at;  // the template's variables, refused naming their field
    if (auto vars = template_variables(body, words ? nullptr : tmpl, &at); !vars.ok())
      return failed(at.c_str(), vars.error());
    auto m = words ? word_chat_parts(body, *words, media) : chat_parts(body, tmpl, tools, media);
    if (!m.ok()) return failed("messages", m.error());
    prompts.push_back(std::move(m.value()));
  } else {
    if (!body.contains("prompt"))
      return failed("prompt", make_error(ErrorCode::InvalidArgument, "missing \"prompt\""));
    auto p = completion_prompts(body["prompt"], cfg.n_vocab, media);
    if (!p.ok()) return failed("prompt", p.error());
    prompts = std::move(p.value());
    for (auto& parts : prompts)
      if (Status st = words ? to_word_prompt(parts, *words) : Status::Ok(); !st.ok())
        return failed("prompt", st.error());
  }
  // the mini-VL answers one word: that is the reply unless the request or the server asks more
  if (words && r.default_max_tokens == 0) r.default_max_tokens = 1;
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

Result<GenRequest> gen_request(const ojson& body, bool chat, const ServerOptions& opts,
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

Result<ChunkContent> text_chunk(const json& b, const Model& model, size_t max_bytes,
                                bool control_tokens) {
  if (!b["text"].is_string())
    return make_error(ErrorCode::InvalidArgument, "\"text\" must be a string");
  if (max_bytes && b["text"].get_ref<const std::string&>().size() > max_bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "the text ({} bytes) cannot fit the chunk limit; at most {} bytes",
                      b["text"].get_ref<const std::string&>().size(), max_bytes);
  if (!model.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "this model has no tokenizer: send \"tokens\"");
  const std::string& text = b["text"].get_ref<const std::string&>();
  const TextRange all{0, text.size()};  // literal, unless the server opted in
  auto ids = model.tokenizer->encode_marked(
      text, control_tokens ? std::span<const TextRange>(&all, 1) : std::span<const TextRange>(),
      false);
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
                                   size_t max_text_bytes, bool control_tokens) {
  const ModelConfig& c = model.cfg;
  const int max_tokens = max_chunk_tokens > 0 ? max_chunk_tokens : c.ctx_len;
  const int kinds =
      int(b.contains("text")) + int(b.contains("tokens")) + int(b.contains("embeddings"));
  if (kinds != 1)
    return make_error(ErrorCode::InvalidArgument,
                      "give exactly one of \"text\", \"tokens\", \"embeddings\"");
  auto cc = b.contains("text")     ? text_chunk(b, model, max_text_bytes, control_tokens)
            : b.contains("tokens") ? token_chunk(b, c.n_vocab)
                                   : embedding_chunk(b, c.input_width(), c.ctx_len, max_tokens);
  if (!cc.ok()) return cc;
  if (cc->n() > max_tokens)
    return make_error(ErrorCode::InvalidArgument, "the chunk has {} tokens, over the limit of {}",
                      cc->n(), max_tokens);
  KAMERA_TRY(cc->validate(c.n_vocab, c.input_width()));
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
