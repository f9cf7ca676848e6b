// Sequences: assembled from cached chunks under a policy (or empty), evaluated on tokens or
// chunks, forked; the logits they return; sampling (include/kamera.h).
#include "api/handles.h"

using namespace kamera;
using namespace kamera::api;

kamera_seq::~kamera_seq() {
  if (box && seq >= 0) box->ctx->pool().free_sequence(seq);
}

namespace {

static_assert(KAMERA_SOURCE_CANONICAL == int(SegmentSource::Canonical) &&
                  KAMERA_SOURCE_PATCH_HIT == int(SegmentSource::PatchHit) &&
                  KAMERA_SOURCE_PATCH_FORMED == int(SegmentSource::PatchFormed) &&
                  KAMERA_SOURCE_BLIND == int(SegmentSource::Blind) &&
                  KAMERA_SOURCE_REPREFILLED == int(SegmentSource::Reprefilled),
              "kamera_segment_source must keep SegmentSource's order");

Result<ServeOptions> serve_options(const kamera_serve_options& o) {
  ServeOptions s;
  switch (o.policy) {
    case KAMERA_POLICY_BLIND:
      s.policy = ServePolicy::Blind;
      break;
    case KAMERA_POLICY_PATCH:
      s.policy = ServePolicy::Patch;
      break;
    case KAMERA_POLICY_REPREFILL:
      s.policy = ServePolicy::Reprefill;
      break;
    default:
      return make_error(ErrorCode::InvalidArgument, "unknown policy {}", int(o.policy));
  }
  if (o.policy == KAMERA_POLICY_PATCH && o.rank != KAMERA_FULL_RANK && o.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "patch rank {} must be >= 1 or full", o.rank);
  if (o.patch_dtype != KAMERA_DTYPE_F32 && o.patch_dtype != KAMERA_DTYPE_BF16)
    return make_error(ErrorCode::InvalidArgument, "unknown patch dtype {}", int(o.patch_dtype));
  s.patch.rank = o.rank;
  if (o.layers) {
    KAMERA_ASSIGN_OR_RETURN(s.patch.layers, LayerSet::parse(o.layers));
  }
  s.patch.per_head = o.per_head != 0;
  s.patch.cap_rank = o.cap_rank != 0;
  s.patch.dtype = o.patch_dtype == KAMERA_DTYPE_BF16 ? DType::BF16 : DType::F32;
  s.form_on_miss = o.form_on_miss != 0;
  return s;
}

Result<LogitsMode> logits_mode(kamera_logits_mode m) {
  switch (m) {
    case KAMERA_LOGITS_NONE:
      return LogitsMode::None;
    case KAMERA_LOGITS_LAST:
      return LogitsMode::Last;
    case KAMERA_LOGITS_ALL:
      return LogitsMode::All;
    default:
      break;
  }
  return make_error(ErrorCode::InvalidArgument, "unknown logits mode {}", int(m));
}

// Runs the content at the sequence's next position; on success advances it and hands out the
// logits (none for LogitsMode::None).
kamera_status eval_content(const char* fn, kamera_seq* seq, const ChunkContent& c,
                           kamera_logits_mode mode, kamera_logits** out) {
  auto lm = logits_mode(mode);
  if (!lm.ok()) return set_error(with_context(lm.error(), fn));
  if (*lm != LogitsMode::None && !out) return null_argument(fn, "out");
  Context& ctx = *seq->box->ctx;
  auto r = ctx.cache().forward_chunk(seq->seq, c, seq->next_position, *lm);
  if (!r.ok()) return set_error(with_context(r.error(), fn));
  seq->next_position += c.extent();
  if (seq->plan) seq->after.insert(seq->after.end(), c.tokens.begin(), c.tokens.end());
  if (*lm == LogitsMode::None) return KAMERA_OK;
  auto h = std::make_unique<kamera_logits>();
  h->box = seq->box;
  h->n_vocab = ctx.model().cfg.n_vocab;
  h->rows = int32_t(r->size() / size_t(h->n_vocab));
  h->data = std::move(r.value());
  *out = h.release();
  return KAMERA_OK;
}

}  // namespace

extern "C" {

kamera_serve_options kamera_serve_default_options(void) {
  kamera_serve_options o{};
  o.policy = KAMERA_POLICY_PATCH;
  o.rank = 32;
  o.layers = nullptr;
  o.form_on_miss = 1;
  o.per_head = 0;
  o.cap_rank = 1;
  o.patch_dtype = KAMERA_DTYPE_F32;
  return o;
}

kamera_status kamera_seq_assemble(kamera_context* ctx, const kamera_chunk* const* chunks,
                                  int32_t n_chunks, const kamera_serve_options* options,
                                  kamera_seq** out) {
  clear_out(out);
  static const char* fn = "kamera_seq_assemble";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, ctx);
    KAMERA_API_REQUIRE(fn, out);
    if (n_chunks < 0 || (n_chunks > 0 && !chunks))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} chunks at a null pointer", fn, n_chunks);
    Context& c = *ctx->box->ctx;
    std::vector<ChunkContent> contents;
    for (int32_t i = 0; i < n_chunks; ++i) {
      if (!chunks[i]) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: chunk {} is null", fn, i);
      if (auto st = check_chunk_model(fn, chunks[i], c.model()); st != KAMERA_OK) return st;
      contents.push_back(chunks[i]->content);
    }
    auto so = serve_options(options ? *options : kamera_serve_default_options());
    if (!so.ok()) return set_error(with_context(so.error(), fn));
    auto h = std::make_unique<kamera_seq>();
    h->box = ctx->box;
    h->seq = c.pool().create_sequence();
    auto rep = c.cache().assemble(h->seq, contents, *so);
    if (!rep.ok()) return set_error(with_context(rep.error(), fn));
    for (const SegmentReport& r : rep->segments) {
      kamera_segment k{};
      write_hex(r.id, k.id);
      k.first_token = r.first_token;
      k.n_tokens = r.n_tokens;
      k.position = r.position;
      k.source = static_cast<kamera_segment_source>(r.source);
      h->segments.push_back(k);
    }
    h->report = kamera_serve_report{int32_t(rep->segments.size()), rep->forwards,
                                    rep->tokens_computed, rep->tokens_reused};
    h->next_position = rep->next_position;
    *out = h.release();
    return KAMERA_OK;
  });
}

kamera_status kamera_seq_new(kamera_context* ctx, kamera_seq** out) {
  clear_out(out);
  return guarded("kamera_seq_new", [&] {
    KAMERA_API_REQUIRE("kamera_seq_new", ctx);
    KAMERA_API_REQUIRE("kamera_seq_new", out);
    auto h = std::make_unique<kamera_seq>();
    h->box = ctx->box;
    h->seq = ctx->box->ctx->pool().create_sequence();
    *out = h.release();
    return KAMERA_OK;
  });
}

kamera_status kamera_seq_fork(const kamera_seq* seq, kamera_seq** out) {
  clear_out(out);
  return guarded("kamera_seq_fork", [&] {
    KAMERA_API_REQUIRE("kamera_seq_fork", seq);
    KAMERA_API_REQUIRE("kamera_seq_fork", out);
    auto h = std::make_unique<kamera_seq>();
    auto f = seq->box->ctx->pool().fork(seq->seq);
    if (!f.ok()) return set_error(with_context(f.error(), "kamera_seq_fork"));
    h->box = seq->box;
    h->seq = *f;
    h->next_position = seq->next_position;
    *out = h.release();
    return KAMERA_OK;
  });
}

void kamera_seq_free(kamera_seq* seq) {
  delete seq;
}

int32_t kamera_seq_n_tokens(const kamera_seq* seq) {
  return seq ? seq->box->ctx->pool().n_tokens(seq->seq) : 0;
}

int32_t kamera_seq_next_position(const kamera_seq* seq) {
  return seq ? seq->next_position : 0;
}

kamera_status kamera_seq_get_report(const kamera_seq* seq, kamera_serve_report* out) {
  return guarded("kamera_seq_get_report", [&] {
    KAMERA_API_REQUIRE("kamera_seq_get_report", seq);
    KAMERA_API_REQUIRE("kamera_seq_get_report", out);
    *out = seq->report;
    return KAMERA_OK;
  });
}

kamera_status kamera_seq_get_segment(const kamera_seq* seq, int32_t index, kamera_segment* out) {
  return guarded("kamera_seq_get_segment", [&] {
    KAMERA_API_REQUIRE("kamera_seq_get_segment", seq);
    KAMERA_API_REQUIRE("kamera_seq_get_segment", out);
    const auto& segs = seq->segments;
    if (index < 0 || index >= int32_t(segs.size()))
      return fail(KAMERA_ERR_NOT_FOUND, "kamera_seq_get_segment: no segment {} (of {})", index,
                  segs.size());
    *out = segs[size_t(index)];
    return KAMERA_OK;
  });
}

kamera_status kamera_seq_eval_tokens(kamera_seq* seq, const int32_t* tokens, int32_t n_tokens,
                                     kamera_logits_mode mode, kamera_logits** out) {
  clear_out(out);
  static const char* fn = "kamera_seq_eval_tokens";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, seq);
    KAMERA_API_REQUIRE(fn, tokens);
    if (n_tokens < 1) return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: {} tokens", fn, n_tokens);
    ChunkContent c = ChunkContent::from_tokens(std::vector<int32_t>(tokens, tokens + n_tokens));
    const ModelConfig& cfg = seq->box->ctx->model().cfg;
    if (auto st = c.validate(cfg.n_vocab, cfg.input_width()); !st.ok())
      return set_error(with_context(st.error(), fn));
    return eval_content(fn, seq, c, mode, out);
  });
}

kamera_status kamera_seq_eval_chunk(kamera_seq* seq, const kamera_chunk* chunk,
                                    kamera_logits_mode mode, kamera_logits** out) {
  clear_out(out);
  static const char* fn = "kamera_seq_eval_chunk";
  return guarded(fn, [&] {
    KAMERA_API_REQUIRE(fn, seq);
    KAMERA_API_REQUIRE(fn, chunk);
    if (auto st = check_chunk_model(fn, chunk, seq->box->ctx->model()); st != KAMERA_OK) return st;
    return eval_content(fn, seq, chunk->content, mode, out);
  });
}

const float* kamera_logits_data(const kamera_logits* logits) {
  return logits ? logits->data.data() : nullptr;
}

int32_t kamera_logits_rows(const kamera_logits* logits) {
  return logits ? logits->rows : 0;
}

int32_t kamera_logits_n_vocab(const kamera_logits* logits) {
  return logits ? logits->n_vocab : 0;
}

void kamera_logits_free(kamera_logits* logits) {
  delete logits;
}

kamera_sampler_params kamera_sampler_default_params(void) {
  return kamera_sampler_params{0.0f, 0, 1.0f, 0};
}

kamera_status kamera_sampler_new(const kamera_sampler_params* params, kamera_sampler** out) {
  clear_out(out);
  return guarded("kamera_sampler_new", [&] {
    KAMERA_API_REQUIRE("kamera_sampler_new", out);
    const kamera_sampler_params p = params ? *params : kamera_sampler_default_params();
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f) || p.top_k < 0 || p.temperature != p.temperature)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_sampler_new: top_p {} must be in (0, 1], top_k {} >= 0, temperature a "
                  "number",
                  p.top_p, p.top_k);
    SamplerParams sp;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.seed = p.seed;
    *out = new kamera_sampler{Sampler(sp)};
    return KAMERA_OK;
  });
}

void kamera_sampler_free(kamera_sampler* sampler) {
  delete sampler;
}

kamera_status kamera_sampler_sample(kamera_sampler* sampler, const float* logits, int32_t n_vocab,
                                    int32_t* token) {
  return guarded("kamera_sampler_sample", [&] {
    KAMERA_API_REQUIRE("kamera_sampler_sample", sampler);
    KAMERA_API_REQUIRE("kamera_sampler_sample", logits);
    KAMERA_API_REQUIRE("kamera_sampler_sample", token);
    if (n_vocab < 1)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "kamera_sampler_sample: n_vocab {}", n_vocab);
    *token = sampler->sampler.sample(std::span<const float>(logits, size_t(n_vocab)));
    return KAMERA_OK;
  });
}

}  // extern "C"
