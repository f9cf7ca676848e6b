// The draft model of speculative decoding (serve/draft_model.h).
#include "serve/draft_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace kamera {

namespace {

constexpr int kMaxVocabDifference = 128;  // llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
constexpr int kFirstComparedToken = 5;    // llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID

const char* kind_name(VocabKind k) {
  return k == VocabKind::Spm ? "spm" : "bpe";
}

}  // namespace

Status check_draft_vocabulary(const Model& target, const Model& draft) {
  if (!target.tokenizer || !draft.tokenizer)
    return make_error(ErrorCode::InvalidArgument,
                      "--model-draft {}: {} has no tokenizer to compare vocabularies by",
                      draft.source, target.tokenizer ? "the draft" : "the target");
  const Vocab &t = target.tokenizer->vocab(), &d = draft.tokenizer->vocab();
  const auto refuse = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument,
                      "--model-draft {}: its vocabulary is not the target's: {}", draft.source,
                      what);
  };
  if (t.kind != d.kind)
    return refuse(
        fmt::format("tokenizer {} vs the target's {}", kind_name(d.kind), kind_name(t.kind)));
  if (t.add_bos != d.add_bos || (t.add_bos && t.bos != d.bos))
    return refuse(fmt::format("BOS {} (add {}) vs the target's {} (add {})", d.bos, d.add_bos,
                              t.bos, t.add_bos));
  if (t.add_eos != d.add_eos || (t.add_eos && t.eos != d.eos))
    return refuse(fmt::format("EOS {} (add {}) vs the target's {} (add {})", d.eos, d.add_eos,
                              t.eos, t.add_eos));
  const int nt = int(t.pieces.size()), nd = int(d.pieces.size());
  if (std::abs(nt - nd) > kMaxVocabDifference)
    return refuse(fmt::format("{} tokens vs the target's {}", nd, nt));
  for (int i = kFirstComparedToken; i < std::min(nt, nd); ++i)
    if (t.pieces[size_t(i)] != d.pieces[size_t(i)])
      return refuse(fmt::format("token {} is \"{}\", the target's \"{}\"", i, d.pieces[size_t(i)],
                                t.pieces[size_t(i)]));
  return Status::Ok();
}

DraftSequence::~DraftSequence() {
  if (seq_ >= 0) pool_->free_sequence(seq_);
}

Result<std::unique_ptr<DraftModel>> DraftModel::load(const std::string& path, const Model& target,
                                                     const DraftOptions& o) {
  if (o.max < 1 || o.min < 0 || o.min > o.max || !(o.p_min >= 0 && o.p_min <= 1))
    return make_error(ErrorCode::InvalidArgument,
                      "draft model: draft-max {} (>= 1), draft-min {} (0..draft-max), draft-p-min "
                      "{} (0..1)",
                      o.max, o.min, o.p_min);
  ContextOptions co;
  co.n_threads = o.n_threads;
  co.kv_tokens = o.kv_tokens;
  co.tokenizer_path = o.tokenizer_path;
  co.store_bytes = 0;  // the draft's pool only: no chunk store, no prompt caches
  co.reuse.prefix_cache_tokens = 0;
  co.reuse.segment_cache_bytes = 0;
  co.swa_full = true;  // a draft sequence rolls back: every layer keeps its rows
  auto ctx = Context::load(path, co);
  if (!ctx.ok()) return make_error(ctx.error().code, "--model-draft {}: {}", path, ctx.message());
  KAMERA_TRY(check_draft_vocabulary(target, (*ctx)->model()));
  std::unique_ptr<DraftModel> d(new DraftModel(std::move(*ctx), o));
  d->target_vocab_ = target.cfg.n_vocab;
  return d;
}

void DraftModel::reset(DraftSequence& s) {
  if (s.seq_ >= 0) ctx_->pool().free_sequence(s.seq_);
  s.seq_ = -1;
  s.fed_.clear();
}

std::pair<int32_t, float> DraftModel::pick(std::span<const float> logits, const Ask& a) const {
  std::vector<float> biased;
  if (!a.bias.empty()) {  // rare: a copy with the request's logit_bias
    biased.assign(logits.begin(), logits.end());
    for (const auto& [id, b] : a.bias)
      if (id >= 0 && size_t(id) < biased.size()) biased[size_t(id)] += b;
    logits = biased;
  }
  const size_t best = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const float top = logits[best];
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v - top));
  return {int32_t(best), float(1.0 / sum)};
}

// Rolls each ask's sequence back to what it shares with its history (keeping at least the last
// token to forward), then forwards the rest as pieces of batched steps; false for none left.
bool DraftModel::catch_up(std::span<Ask*> asks) {
  KvPool& pool = ctx_->pool();
  std::vector<ForwardCursor> curs(asks.size());
  std::vector<std::vector<Pos>> pos(asks.size());
  std::vector<Ask*> live;
  for (size_t i = 0; i < asks.size(); ++i) {
    DraftSequence& s = *asks[i]->seq;
    const std::span<const int32_t> h = asks[i]->history;
    if (s.seq_ < 0) s.seq_ = pool.create_sequence();
    size_t p =
        std::mismatch(s.fed_.begin(), s.fed_.end(), h.begin(), h.end()).first - s.fed_.begin();
    p = std::min(p, h.size() - 1);
    if (!pool.rollback(s.seq_, int(p)).ok()) {
      reset(s);
      continue;
    }
    s.fed_.resize(p);
    for (size_t t = p; t < h.size(); ++t) pos[i].push_back(Pos::linear(int32_t(t)));
    const auto in = ForwardInput::from_tokens(h.subspan(p), pos[i]);
    auto c = ctx_->engine().begin_forward(pool, s.seq_, in);
    if (!c.ok()) {
      reset(s);
      continue;
    }
    curs[i] = std::move(*c);
    live.push_back(asks[i]);
  }
  for (bool more = true; more;) {
    std::vector<Engine::Piece> pieces;
    for (size_t i = 0; i < asks.size(); ++i)
      if (asks[i]->seq->seq_ >= 0 && !curs[i].finished())
        pieces.push_back({&curs[i], std::min(curs[i].left(), curs[i].opt.max_batch)});
    more = !pieces.empty();
    if (more && !ctx_->engine().decode(pool, {}, pieces).ok()) {
      for (Ask* a : asks) reset(*a->seq);
      return false;
    }
  }
  for (size_t i = 0; i < asks.size(); ++i) {
    DraftSequence& s = *asks[i]->seq;
    if (s.seq_ < 0) continue;
    s.fed_.assign(asks[i]->history.begin(), asks[i]->history.end());
    asks[i]->out.clear();
    // The first draft token, from the catch-up's last row.
    const auto [tok, p] = pick(curs[i].logits, *asks[i]);
    if (p >= opts_.p_min && tok < target_vocab_) asks[i]->out.push_back(tok);
  }
  return !live.empty();
}

void DraftModel::draft(std::span<Ask> all) {
  std::vector<Ask*> asks;
  for (Ask& a : all) {
    a.out.clear();
    const bool fits = int64_t(a.history.size()) + a.k <= ctx_->model().cfg.ctx_len ||
                      ctx_->model().cfg.ctx_len <= 0;
    if (a.k > 0 && !a.history.empty() && fits) asks.push_back(&a);
  }
  if (asks.empty() || !catch_up(asks)) return;
  const size_t V = size_t(ctx_->model().cfg.n_vocab);
  for (;;) {
    // Every ask whose draft grew last time and wants more forwards its newest token.
    std::vector<Engine::DecodeRow> rows;
    std::vector<Ask*> owner;
    for (Ask* a : asks) {
      DraftSequence& s = *a->seq;
      // Its sequence holds the history and every draft token but the newest.
      const bool grew =
          s.seq_ >= 0 && !a->out.empty() && s.fed_.size() + 1 == a->history.size() + a->out.size();
      if (!grew || int(a->out.size()) >= a->k) continue;
      rows.push_back({s.seq_, a->out.back(), Pos::linear(int32_t(s.fed_.size()))});
      owner.push_back(a);
    }
    if (rows.empty()) break;
    auto logits = ctx_->engine().decode(ctx_->pool(), rows);
    if (!logits.ok()) {
      for (Ask* a : asks) reset(*a->seq), a->out.clear();
      return;
    }
    for (size_t i = 0; i < owner.size(); ++i) {
      Ask& a = *owner[i];
      a.seq->fed_.push_back(a.out.back());
      const auto [tok, p] = pick(std::span<const float>(*logits).subspan(i * V, V), a);
      if (p >= opts_.p_min && tok < target_vocab_) a.out.push_back(tok);
    }
  }
  for (Ask* a : asks)
    if (int(a->out.size()) < opts_.min) a->out.clear();
}

}  // namespace kamera
