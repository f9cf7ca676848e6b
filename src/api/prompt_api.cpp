// Prompts served from what the context has seen (the context's prompt assembler, as the server
// serves a request), chat messages as token ids, and a batched decode step (include/kamera.h).
#include <algorithm>
#include <cstring>

#include "api/handles.h"
#include "context/chat_prompt.h"

using namespace kamera;
using namespace kamera::api;

namespace {

Result<ReusePolicy> reuse_policy(kamera_reuse_policy p) {
  switch (p) {
    case KAMERA_REUSE_PATCH:
      return ReusePolicy::Patch;
    case KAMERA_REUSE_KEEP:
      return ReusePolicy::Keep;
    case KAMERA_REUSE_PREFIX:
      return ReusePolicy::Prefix;
    case KAMERA_REUSE_BLIND:
      return ReusePolicy::Blind;
    case KAMERA_REUSE_REPREFILL:
      return ReusePolicy::Reprefill;
    default:
      return make_error(ErrorCode::InvalidArgument, "unknown reuse policy {}", int(p));
  }
}

kamera_segment_source c_source(SpanSource s) {
  switch (s) {
    case SpanSource::Prefix:
      return KAMERA_SOURCE_PREFIX;
    case SpanSource::ContextExact:
      return KAMERA_SOURCE_CONTEXT_EXACT;
    case SpanSource::ContextNearest:
      return KAMERA_SOURCE_CONTEXT_NEAREST;
    case SpanSource::PatchExact:
      return KAMERA_SOURCE_PATCH_EXACT;
    case SpanSource::PatchNearest:
      return KAMERA_SOURCE_PATCH_NEAREST;
    case SpanSource::Keep:
      return KAMERA_SOURCE_KEEP;
    case SpanSource::StorePatch:
      return KAMERA_SOURCE_STORE_PATCH;
    case SpanSource::StorePatchNearest:
      return KAMERA_SOURCE_STORE_PATCH_NEAREST;
    default:
      return KAMERA_SOURCE_RECOMPUTED;
  }
}

// The sequence's report: a segment per span the assembler served (the query's run last).
void fill_report(kamera_seq& h, const Assembly& a, int32_t anchor) {
  int32_t first = anchor;
  auto add = [&](const ServedSegment& s) {
    kamera_segment k{};
    if (s.id) write_hex(*s.id, k.id);
    k.first_token = first;
    k.n_tokens = int32_t(s.tokens);
    k.position = s.position;
    k.source = c_source(s.source);
    h.segments.push_back(k);
    first += int32_t(s.tokens);
  };
  for (const ServedSegment& s : a.spans) add(s);
  add({std::nullopt, a.query.n(), a.query_pos, SpanSource::Recomputed});
  int64_t prefilled = 0;
  for (const kamera_segment& k : h.segments) prefilled += k.source == KAMERA_SOURCE_RECOMPUTED;
  h.report = kamera_serve_report{int32_t(h.segments.size()), int32_t(prefilled),
                                 a.recomputed + a.query.n(), a.reused};
}

}  // namespace

extern "C" {

kamera_status kamera_prompt_eval(kamera_context* ctx, const int32_t* tokens, int32_t n_tokens,
                                 kamera_reuse_policy policy, kamera_seq** out,
                                 kamera_logits** logits) {
  return kamera_prompt_eval_budget(ctx, tokens, n_tokens, policy, 0.0, out, logits);
}

kamera_status kamera_prompt_eval_budget(kamera_context* ctx, const int32_t* tokens,
                                        int32_t n_tokens, kamera_reuse_policy policy,
                                        double reuse_budget, kamera_seq** out,
                                        kamera_logits** logits) {
  clear_out(out);
  clear_out(logits);
  static const char* fn = "kamera_prompt_eval";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, ctx);
    KAMERA_API_REQUIRE(fn, tokens);
    KAMERA_API_REQUIRE(fn, out);
    auto p = reuse_policy(policy);
    if (!p.ok()) return set_error(with_context(p.error(), fn));
    if (!(reuse_budget >= 0 && reuse_budget <= 1))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: reuse_budget {} is not in [0, 1]", fn,
                  reuse_budget);
    if (reuse_budget > 0 && *p != ReusePolicy::Patch)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "{}: reuse_budget {} needs KAMERA_REUSE_PATCH ({} has no repair)", fn,
                  reuse_budget, reuse_policy_name(*p));
    Context& c = *ctx->box->ctx;
    const ModelConfig& cfg = c.model().cfg;
    std::span<const int32_t> ids(tokens, size_t(std::max(0, n_tokens)));
    const std::vector<int32_t>& anchor = c.cache().anchor();
    if (ids.size() > anchor.size() && std::equal(anchor.begin(), anchor.end(), ids.begin()))
      ids = ids.subspan(anchor.size());
    if (ids.empty()) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: an empty prompt", fn);
    if (auto st = ChunkContent::from_tokens({ids.begin(), ids.end()})
                      .validate(cfg.n_vocab, cfg.input_width());
        !st.ok())
      return set_error(with_context(st.error(), fn));
    if (int64_t(anchor.size() + ids.size()) > cfg.ctx_len)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} tokens do not fit the context of {}", fn,
                  anchor.size() + ids.size(), cfg.ctx_len);
    auto plan = std::make_unique<PromptPlan>(plan_start(c.cache(), *p));
    plan->reuse_budget = reuse_budget;
    const Tokenizer* tok = c.model().tokenizer ? &*c.model().tokenizer : nullptr;
    plan_text(*plan, c.cache(), tok, ids);
    auto h = std::make_unique<kamera_seq>();
    h->box = ctx->box;
    auto l = c.assembler().serve(*plan, h->assembly);
    h->seq = h->assembly.seq;  // freed with h on failure
    if (!l.ok()) return set_error(with_context(l.error(), fn));
    h->next_position = plan->next_position;
    fill_report(*h, h->assembly, c.cache().anchor_extent());
    c.assembler().remember(*plan, h->assembly, h->seq, {});
    c.assembler().keep_segments(*plan, h->assembly, h->seq);
    h->plan = std::move(plan);
    if (logits) {
      auto lg = std::make_unique<kamera_logits>();
      lg->box = ctx->box;
      lg->n_vocab = cfg.n_vocab;
      lg->rows = 1;
      lg->data = std::move(l.value());
      *logits = lg.release();
    }
    *out = h.release();
    return KAMERA_OK;
  });
}

kamera_status kamera_seq_remember(kamera_seq* seq) {
  static const char* fn = "kamera_seq_remember";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, seq);
    if (!seq->plan)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: not a sequence of kamera_prompt_eval", fn);
    seq->box->ctx->assembler().remember(*seq->plan, seq->assembly, seq->seq, seq->after);
    return KAMERA_OK;
  });
}

kamera_status kamera_chat_tokenize(const kamera_model* model, const char* chat_template,
                                   const kamera_chat_message* messages, int32_t n_messages,
                                   int32_t add_generation_prompt, int32_t* tokens, int32_t capacity,
                                   int32_t* n_tokens) {
  static const char* fn = "kamera_chat_tokenize";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, model);
    KAMERA_API_REQUIRE(fn, n_tokens);
    if (n_messages < 0 || (n_messages > 0 && !messages))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} messages", fn, n_messages);
    if (capacity < 0 || (capacity > 0 && !tokens))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: capacity {}", fn, capacity);
    std::vector<ChatTurn> turns;
    for (int32_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: message {} has no role or content", fn, i);
      turns.push_back({messages[i].role, messages[i].content});
    }
    auto ids = chat_turn_ids(*model->model, chat_template ? chat_template : "", turns,
                             add_generation_prompt != 0);
    if (!ids.ok()) return set_error(with_context(ids.error(), fn));
    *n_tokens = int32_t(ids->size());
    if (capacity < *n_tokens)
      return capacity == 0 && !tokens ? KAMERA_OK
                                      : fail(KAMERA_ERR_INVALID_ARGUMENT,
                                             "{}: {} tokens, capacity {}", fn, *n_tokens, capacity);
    std::copy(ids->begin(), ids->end(), tokens);
    return KAMERA_OK;
  });
}

kamera_status kamera_decode_batch(kamera_seq* const* seqs, const int32_t* tokens, int32_t n_seqs,
                                  kamera_logits** out) {
  clear_out(out);
  static const char* fn = "kamera_decode_batch";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, seqs);
    KAMERA_API_REQUIRE(fn, tokens);
    KAMERA_API_REQUIRE(fn, out);
    if (n_seqs < 1) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} sequences", fn, n_seqs);
    std::vector<Engine::DecodeRow> rows;
    for (int32_t i = 0; i < n_seqs; ++i) {
      const kamera_seq* s = seqs[i];
      if (!s) return null_argument(fn, "seqs[i]");
      if (s->box != seqs[0]->box)
        return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: sequences of different contexts", fn);
      for (int32_t j = 0; j < i; ++j)
        if (seqs[j] == s) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: sequence {} twice", fn, i);
      const int32_t n_vocab = s->box->ctx->model().cfg.n_vocab;
      if (tokens[i] < 0 || tokens[i] >= n_vocab)
        return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: token {} out of the vocabulary", fn,
                    tokens[i]);
      rows.push_back({s->seq, tokens[i], Pos::linear(s->next_position)});
    }
    Context& ctx = *seqs[0]->box->ctx;
    auto r = ctx.engine().decode(ctx.pool(), rows);
    if (!r.ok()) return set_error(with_context(r.error(), fn));
    for (int32_t i = 0; i < n_seqs; ++i) {
      ++seqs[i]->next_position;
      if (seqs[i]->plan) seqs[i]->after.push_back(tokens[i]);
    }
    auto h = std::make_unique<kamera_logits>();
    h->box = seqs[0]->box;
    h->n_vocab = ctx.model().cfg.n_vocab;
    h->rows = n_seqs;
    h->data = std::move(r.value());
    *out = h.release();
    return KAMERA_OK;
  });
}

}  // extern "C"
