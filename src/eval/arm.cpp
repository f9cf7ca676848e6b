#include "eval/arm.h"

#include <chrono>

#include "core/clock.h"
#include "model/sampler.h"

namespace kamera {

int PreparedItem::reused_tokens() const {
  int n = 0;
  for (const ReusedChunk& r : reused) n += r.content->n();
  return n;
}

double PreparedItem::reused_kv_bytes() const {
  return double(reused_tokens()) * double(ctx->pool().layout().floats_per_token()) * 4.0;
}

Result<std::vector<std::vector<float>>> ArmDriver::answer(const PreparedItem& it, SeqId seq) {
  std::vector<std::vector<float>> out;
  KvPool& pool = ctx_.pool();
  for (const EvalQuery& q : it.item->queries) {
    KAMERA_ASSIGN_OR_RETURN(SeqId fork, pool.fork(seq));
    auto l = ctx_.cache().forward_chunk(fork, q.content, it.query_position, q.logits);
    pool.free_sequence(fork);
    if (!l.ok()) return l.error();
    out.push_back(std::move(l.value()));
  }
  return out;
}

Result<PreparedItem> ArmDriver::prepare(const EvalItem& item, int index, bool score_reference) {
  ChunkCache& cc = ctx_.cache();
  KvPool& pool = ctx_.pool();
  if (item.n_exact < 0 || item.n_exact > int(item.chunks.size()))
    return make_error(ErrorCode::InvalidArgument, "item {}: n_exact {} of {} chunks", item.name,
                      item.n_exact, item.chunks.size());
  PreparedItem it;
  it.ctx = &ctx_;
  it.item = &item;
  it.index = index;
  it.prefix = std::make_unique<ScopedSequence>(pool);
  KAMERA_TRY(cc.append_anchor(it.prefix->id()));
  it.anchor_tokens = pool.n_tokens(it.prefix->id());
  int32_t pos = cc.anchor_extent();
  for (int i = 0; i < item.n_exact; ++i) {
    KAMERA_TRY(cc.forward_chunk(it.prefix->id(), item.chunks[size_t(i)], pos));
    pos += item.chunks[size_t(i)].extent();
  }
  it.prefix_tokens = pool.n_tokens(it.prefix->id());
  // The reference: the reused chunks forwarded after the prefix (a prefix-cache hit), then the
  // queries; the conditioned rows are read from it.
  KAMERA_ASSIGN_OR_RETURN(SeqId ref, pool.fork(it.prefix->id()));
  ScopedSequence ref_owner(pool, ref);
  const double t0 = now_ms();
  for (size_t i = size_t(item.n_exact); i < item.chunks.size(); ++i) {
    ReusedChunk r;
    r.content = &item.chunks[i];
    r.position = pos;
    r.first_token = pool.n_tokens(ref);
    KAMERA_TRY(cc.forward_chunk(ref, *r.content, pos));
    pos += r.content->extent();
    it.reused.push_back(std::move(r));
  }
  it.query_position = pos;
  KAMERA_ASSIGN_OR_RETURN(it.ref, answer(it, ref));
  it.reference_ms = now_ms() - t0;
  for (ReusedChunk& r : it.reused) {
    r.cond = read_chunk_kv(pool, ref, r.first_token, r.content->n());
    KAMERA_ASSIGN_OR_RETURN(r.canon, cc.canonical(*r.content));
  }
  const int V = ctx_.model().cfg.n_vocab;
  it.measurements = board_.of_item(index);  // prepared before: score on the same measurements
  if (!it.measurements.empty()) return it;
  for (size_t q = 0; q < item.queries.size(); ++q) {
    const auto& l = it.ref[q];
    it.measurements.push_back(board_.add_measurement(
        {index, argmax(std::span<const float>(l).subspan(l.size() - size_t(V))),
         item.queries[q].family, item.queries[q].gold}));
    if (score_reference)
      board_.score(board_.arm({"reprefill", 0, ""}), it.measurements.back(), l, l, V);
  }
  return it;
}

Result<bool> ArmDriver::run(Arm& arm, const PreparedItem& it, double* ms) {
  KAMERA_ASSIGN_OR_RETURN(const bool applies, arm.prepare(it));
  if (!applies) return false;
  KvPool& pool = ctx_.pool();
  KAMERA_ASSIGN_OR_RETURN(SeqId seq, pool.fork(it.prefix->id()));
  ScopedSequence owner(pool, seq);
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(ArmBuild b, arm.build(it, seq));
  KAMERA_ASSIGN_OR_RETURN(auto logits, answer(it, seq));
  if (ms) *ms = now_ms() - t0;
  ArmRecord& rec = board_.arm(arm.key());
  const int V = ctx_.model().cfg.n_vocab;
  for (size_t q = 0; q < logits.size(); ++q)
    board_.score(rec, it.measurements[q], it.ref[q], logits[q], V);
  rec.add_cost(b.cost);
  for (size_t i = 0; i < b.served.size(); ++i) rec.kv_error.add(b.served[i], it.reused[i].cond);
  return true;
}

}  // namespace kamera
