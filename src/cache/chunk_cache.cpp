#include "cache/chunk_cache.h"

#include <algorithm>
#include <set>

namespace kamera {

namespace {

// What is stored is never wider than what the pool holds: an f32 request (the default) in an f16
// or bf16 pool stores canonicals and patch factors in the pool's dtype, so store, serve bytes and
// tier bytes shrink with the KV memory. An explicitly narrower request is kept.
DType stored_dtype(DType requested, DType pool) {
  return requested == DType::F32 ? pool : requested;
}

}  // namespace

PatchOptions ChunkCache::stored_options(const PatchOptions& opts) const {
  PatchOptions o = opts;
  o.dtype = stored_dtype(o.dtype, pool_.dtype());
  o.head_dim = model_.cfg.head_dim;
  return o;
}

ChunkCache::ChunkCache(const Model& model, Engine& engine, KvPool& pool, ChunkStore& store,
                       std::vector<int32_t> anchor)
    : model_(model), engine_(engine), pool_(pool), store_(store), anchor_(std::move(anchor)) {}

ChunkId ChunkCache::id_of(const ChunkContent& c) const {
  return chunk_id(model_.fingerprint, c);
}

ForwardInput forward_input(const ChunkContent& c, std::span<const Pos> positions) {
  ForwardInput in;
  in.n = c.n();
  in.positions = positions;
  if (c.is_tokens()) {
    in.tokens = c.tokens;
  } else {
    in.embeddings = c.embeddings.data();
  }
  return in;
}

NonCausalSpan picture_rows(const ModelConfig& cfg, const ChunkContent& c) {
  if (c.is_tokens() || !is_gemma3(cfg.arch)) return {};
  return {0, c.n()};
}

Result<std::vector<float>> ChunkCache::forward_chunk(SeqId seq, const ChunkContent& c,
                                                     int32_t position, LogitsMode logits,
                                                     const AttentionMask* mask,
                                                     ForwardObserver* observer,
                                                     std::vector<float>* hidden) {
  const std::vector<Pos> pos = c.positions_at(position);
  ForwardInput in = forward_input(c, pos);
  in.non_causal = picture_rows(model_.cfg, c);
  ForwardOptions fo;
  fo.logits = logits;
  fo.mask = mask;
  fo.observer = observer;
  fo.hidden = hidden;
  if (!pacer_) return engine_.forward(pool_, seq, in, fo);
  KAMERA_ASSIGN_OR_RETURN(ForwardCursor cur, engine_.begin_forward(pool_, seq, in, fo));
  while (!cur.finished()) {
    if (pacer_->run_in_step(cur)) continue;
    const int n = cur.piece(std::min(std::max(1, pacer_->allowance()), fo.max_batch));
    KAMERA_TRY(engine_.forward_step(pool_, cur, n));
    pacer_->spent(n);
  }
  return std::move(cur.logits);
}

Result<std::shared_ptr<const ChunkKV>> ChunkCache::anchor_kv() {
  if (anchor_kv_) return anchor_kv_;
  if (anchor_.empty()) {
    anchor_kv_ = std::make_shared<ChunkKV>(pool_.layout(), 0, DType::F32);
    return anchor_kv_;
  }
  ScopedSequence scratch(pool_);
  auto r = forward_chunk(scratch.id(), ChunkContent::from_tokens(anchor_), 0);
  if (!r.ok()) return r.error();
  anchor_kv_ =
      std::make_shared<ChunkKV>(read_chunk_kv(pool_, scratch.id(), 0, int(anchor_.size())));
  return anchor_kv_;
}

Status ChunkCache::append_anchor(SeqId seq) {
  auto kv = anchor_kv();
  if (!kv.ok()) return kv.error();
  if (anchor_.empty()) return Status::Ok();
  std::vector<Pos> pos(anchor_.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = Pos::linear(int32_t(i));
  auto at = pool_.append(seq, pos);
  if (!at.ok()) return at.error();
  write_chunk_kv(**kv, pool_, seq, *at);
  return Status::Ok();
}

Result<std::shared_ptr<const CanonicalEntry>> ChunkCache::canonical(const ChunkContent& c,
                                                                    DType dtype, bool* formed) {
  if (formed) *formed = false;
  dtype = stored_dtype(dtype, pool_.dtype());
  KAMERA_TRY(c.validate(model_.cfg.n_vocab, model_.cfg.input_width()));
  const ChunkId id = id_of(c);
  if (auto hit = store_.find_canonical(id)) return hit;
  if (formed) *formed = true;
  if (anchor_extent() + c.extent() > model_.cfg.ctx_len)
    return make_error(ErrorCode::InvalidArgument,
                      "chunk of extent {} behind an anchor of {} exceeds the model's context {}",
                      c.extent(), anchor_extent(), model_.cfg.ctx_len);
  ScopedSequence scratch(pool_);
  KAMERA_TRY(append_anchor(scratch.id()));
  auto r = forward_chunk(scratch.id(), c, anchor_extent());
  if (!r.ok()) return r.error();
  auto e = std::make_shared<CanonicalEntry>();
  e->id = id;
  e->content = c;
  e->kv = read_chunk_kv(pool_, scratch.id(), int(anchor_.size()), c.n(), dtype);
  store_.put_canonical(e);
  return std::shared_ptr<const CanonicalEntry>(e);
}

Status ChunkCache::check_positions(std::span<const ChunkContent> chunks) const {
  int64_t end = anchor_extent();
  for (const auto& c : chunks) {
    KAMERA_TRY(c.validate(model_.cfg.n_vocab, model_.cfg.input_width()));
    end += c.extent();
  }
  if (end > model_.cfg.ctx_len)
    return make_error(ErrorCode::InvalidArgument,
                      "the chunks end at position {}, past the model's context length {}", end,
                      model_.cfg.ctx_len);
  return Status::Ok();
}

Result<std::vector<ChunkKV>> ChunkCache::conditioned(std::span<const ChunkContent> chunks) {
  KAMERA_TRY(check_positions(chunks));
  ScopedSequence scratch(pool_);
  KAMERA_TRY(append_anchor(scratch.id()));
  int32_t pos = anchor_extent();
  std::vector<int> firsts;
  for (const auto& c : chunks) {
    firsts.push_back(pool_.n_tokens(scratch.id()));
    auto r = forward_chunk(scratch.id(), c, pos);
    if (!r.ok()) return r.error();
    pos += c.extent();
  }
  std::vector<ChunkKV> out;
  for (size_t i = 0; i < chunks.size(); ++i)
    out.push_back(read_chunk_kv(pool_, scratch.id(), firsts[i], chunks[i].n()));
  return out;
}

Result<std::shared_ptr<const PatchEntry>> ChunkCache::patch(
    std::span<const ChunkContent> antecedents, const ChunkContent& chunk, const PatchOptions& opts,
    bool form_on_miss, std::vector<DeltaStats>* stats) {
  std::vector<ChunkId> ante_ids;
  for (const auto& a : antecedents) ante_ids.push_back(id_of(a));
  const PatchOptions o = stored_options(opts);
  const PatchKey key = PatchKey::make(id_of(chunk), ante_ids, o);
  if (auto hit = store_.find_patch(key)) return hit;
  if (!form_on_miss) return std::shared_ptr<const PatchEntry>();
  auto canon = canonical(chunk);
  if (!canon.ok()) return canon.error();
  std::vector<ChunkContent> all(antecedents.begin(), antecedents.end());
  all.push_back(chunk);
  auto cond = conditioned(all);
  if (!cond.ok()) return cond.error();
  auto p = form_patch(cond->back(), (*canon)->kv, o, stats);
  if (!p.ok()) return p.error();
  auto e = std::make_shared<PatchEntry>();
  e->key = key;
  e->patch = std::move(p.value());
  store_.put_patch(e);
  return std::shared_ptr<const PatchEntry>(e);
}

Status ChunkCache::append_chunk(SeqId seq, const CanonicalEntry& canon, const Patch* patch,
                                int32_t position) {
  const ChunkContent& c = canon.content;
  if (patch && patch->n_tokens != c.n())
    return make_error(ErrorCode::InvalidArgument, "patch covers {} tokens but the chunk has {}",
                      patch->n_tokens, c.n());
  if (position < 0 || int64_t(position) + c.extent() > model_.cfg.ctx_len)
    return make_error(ErrorCode::InvalidArgument,
                      "chunk at position {} (extent {}) is outside the model's context length {}",
                      position, c.extent(), model_.cfg.ctx_len);
  auto at = pool_.append(seq, c.positions_at(position));
  if (!at.ok()) return at.error();
  write_patched_rows(canon.kv, patch, pool_, seq, *at, delta_scratch_);
  store_.note_bytes_saved(canon.kv.bytes());
  return Status::Ok();
}

Result<ServeReport> ChunkCache::assemble(SeqId seq, std::span<const ChunkContent> chunks,
                                         const ServeOptions& opts) {
  if (!pool_.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "assemble: unknown sequence {}", seq);
  if (pool_.n_tokens(seq) != 0)
    return make_error(ErrorCode::InvalidArgument, "assemble: sequence {} is not empty", seq);
  KAMERA_TRY(check_positions(chunks));
  if (opts.policy == ServePolicy::Patch && opts.patch.rank != kFullRank && opts.patch.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "patch rank {} must be >= 1 or full",
                      opts.patch.rank);
  ServeReport rep;
  auto fail = [&](const Error& e) -> Result<ServeReport> {
    (void)pool_.truncate(seq, 0);
    return e;
  };
  if (auto st = append_anchor(seq); !st.ok()) return fail(st.error());
  int32_t pos = anchor_extent();
  std::vector<ChunkId> ids;
  for (const auto& c : chunks) ids.push_back(id_of(c));

  // Patches needed (chunks with antecedents), formed together from one conditioned forward.
  std::vector<std::shared_ptr<const PatchEntry>> patches(chunks.size());
  std::vector<bool> formed(chunks.size(), false);
  if (opts.policy == ServePolicy::Patch) {
    const PatchOptions po = stored_options(opts.patch);
    size_t last_missing = 0;
    bool any_missing = false;
    for (size_t i = 1; i < chunks.size(); ++i) {
      patches[i] = store_.find_patch(PatchKey::make(ids[i], {ids.data(), i}, po));
      if (!patches[i] && opts.form_on_miss) {
        any_missing = true;
        last_missing = i;
      }
    }
    if (any_missing) {
      auto cond = conditioned(chunks.subspan(0, last_missing + 1));
      if (!cond.ok()) return fail(cond.error());
      ++rep.forwards;
      for (size_t i = 0; i <= last_missing; ++i) rep.tokens_computed += chunks[i].n();
      for (size_t i = 1; i <= last_missing; ++i) {
        if (patches[i]) continue;
        auto canon = canonical(chunks[i], opts.canonical_dtype);
        if (!canon.ok()) return fail(canon.error());
        auto p = form_patch((*cond)[i], (*canon)->kv, po);
        if (!p.ok()) return fail(p.error());
        auto e = std::make_shared<PatchEntry>();
        e->key = PatchKey::make(ids[i], {ids.data(), i}, po);
        e->patch = std::move(p.value());
        store_.put_patch(e);
        patches[i] = e;
        formed[i] = true;
      }
    }
  }

  for (size_t i = 0; i < chunks.size(); ++i) {
    SegmentReport seg;
    seg.id = ids[i];
    seg.first_token = pool_.n_tokens(seq);
    seg.n_tokens = chunks[i].n();
    seg.position = pos;
    if (opts.policy == ServePolicy::Reprefill) {
      auto r = forward_chunk(seq, chunks[i], pos);
      if (!r.ok()) return fail(r.error());
      ++rep.forwards;
      rep.tokens_computed += chunks[i].n();
      seg.source = SegmentSource::Reprefilled;
    } else {
      bool canon_formed = false;
      auto canon = canonical(chunks[i], opts.canonical_dtype, &canon_formed);
      if (!canon.ok()) return fail(canon.error());
      if (canon_formed) {
        ++rep.forwards;
        rep.tokens_computed += chunks[i].n();
      }
      const Patch* p = patches[i] ? &patches[i]->patch : nullptr;
      if (auto st = append_chunk(seq, **canon, p, pos); !st.ok()) return fail(st.error());
      rep.tokens_reused += chunks[i].n();
      seg.source = i == 0 ? SegmentSource::Canonical
                   : p    ? (formed[i] ? SegmentSource::PatchFormed : SegmentSource::PatchHit)
                          : SegmentSource::Blind;
    }
    rep.segments.push_back(seg);
    pos += chunks[i].extent();
  }
  rep.next_position = pos;
  return rep;
}

Result<ServeReport> ChunkCache::assemble_ids(SeqId seq, std::span<const ChunkId> ids,
                                             const ServeOptions& opts) {
  std::vector<ChunkContent> contents;
  for (const ChunkId& id : ids) {
    auto e = store_.find_canonical(id);
    if (!e)
      return make_error(ErrorCode::NotFound,
                        "unknown chunk id {}: it is not in the store (add the chunk first)",
                        id.hex());
    contents.push_back(e->content);
  }
  return assemble(seq, contents, opts);
}

}  // namespace kamera
