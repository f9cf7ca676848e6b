#include "eval/arms_output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/clock.h"
#include "eval/arms.h"
#include "reuse/output_stats.h"

namespace kamera {

OutputWeightsCache::~OutputWeightsCache() {
  const OutputCompileCost& c = cost;
  if (c.items == 0) return;
  std::fprintf(stderr,
               "kamera: output-aware%s compile cost over %d items: observed forward %.1f ms, "
               "weights %.1f ms, output-aware factorization %.1f ms vs SVD %.1f ms (all ranks); "
               "observer %zu floats, weights %zu doubles (largest item)\n",
               with_query ? " (query oracle)" : "", c.items, c.forward_ms, c.weights_ms, c.form_ms,
               c.svd_form_ms, c.max_floats, c.weight_floats);
}

Status gather_output_weights(const PreparedItem& it, OutputWeightsCache& cache) {
  if (cache.item == it.item && cache.index == it.index) return Status::Ok();
  cache.weights.clear();
  ChunkCache& cc = it.ctx->cache();
  KvPool& pool = it.ctx->pool();
  KAMERA_ASSIGN_OR_RETURN(SeqId seq, pool.fork(it.prefix->id()));
  ScopedSequence owner(pool, seq);
  OutputStats stats(it.ctx->model().cfg, pool.n_tokens(seq));
  const double t0 = now_ms();
  for (const ReusedChunk& r : it.reused)
    KAMERA_TRY(cc.forward_chunk(seq, *r.content, r.position, LogitsMode::None, nullptr, &stats));
  if (cache.with_query && !it.item->queries.empty())
    KAMERA_TRY(cc.forward_chunk(seq, it.item->queries[0].content, it.query_position,
                                LogitsMode::None, nullptr, &stats));
  const double t1 = now_ms();
  const auto positions = pool.positions(seq);
  for (const ReusedChunk& r : it.reused) {
    const int n = r.content->n();
    KAMERA_ASSIGN_OR_RETURN(
        OutputWeights w, stats.weights(it.ctx->model(), it.ctx->engine().rope(), r.first_token, n,
                                       positions.subspan(size_t(r.first_token), size_t(n)),
                                       &it.ctx->engine().local_rope()));
    cache.weights.push_back(std::move(w));
  }
  OutputCompileCost& c = cache.cost;
  c.items += 1;
  c.forward_ms += t1 - t0;
  c.weights_ms += now_ms() - t1;
  c.max_floats = std::max(c.max_floats, stats.floats());
  size_t wf = 0;
  for (const OutputWeights& w : cache.weights)
    for (const ChannelWeights& b : w.blocks) wf += b.rows.size() + b.gram.size();
  c.weight_floats = std::max(c.weight_floats, wf);
  cache.item = it.item;
  cache.index = it.index;
  return Status::Ok();
}

Result<bool> OutputPatchArm::prepare(const PreparedItem& it) {
  patches_.clear();
  if (it.ctx->model().cfg.attention != AttentionKind::Gqa) return false;
  KAMERA_TRY(gather_output_weights(it, *cache_));
  PatchOptions o = opts_;  // factors no wider than the pool (as PatchArm)
  if (o.dtype == DType::F32) o.dtype = it.ctx->pool().dtype();
  for (size_t i = 0; i < it.reused.size(); ++i) {
    const ReusedChunk& r = it.reused[i];
    const double t0 = now_ms();
    KAMERA_ASSIGN_OR_RETURN(Patch p, form_output_patch(r.cond, r.canon->kv, o, cache_->weights[i]));
    const double t1 = now_ms();
    if (auto s = form_patch(r.cond, r.canon->kv, o); !s.ok()) return s.error();
    cache_->cost.form_ms += t1 - t0;
    cache_->cost.svd_form_ms += now_ms() - t1;
    patches_.push_back(std::move(p));
  }
  return true;
}

Result<ArmBuild> OutputPatchArm::build(const PreparedItem& it, SeqId seq) {
  KAMERA_TRY(place_reused(it, seq, &patches_));
  return patched_build(it, patches_);  // the same bytes and FLOPs as SVD's at the same rank
}

}  // namespace kamera
