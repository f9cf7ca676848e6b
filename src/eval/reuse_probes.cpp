#include "eval/reuse_probes.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/clock.h"
#include "reuse/relocate.h"

namespace kamera {

namespace {

// max |a - b| / max |b| over a (layer, channel) of two ChunkKVs.
double max_rel_err(const ChannelMatrix& a, const ChannelMatrix& b) {
  std::vector<float> ra(a.cols()), rb(b.cols());
  double num = 0, den = 0;
  for (int i = 0; i < a.rows(); ++i) {
    a.get_row(i, ra.data());
    b.get_row(i, rb.data());
    for (int j = 0; j < a.cols(); ++j) {
      num = std::max(num, double(std::fabs(ra[j] - rb[j])));
      den = std::max(den, double(std::fabs(rb[j])));
    }
  }
  return den > 0 ? num / den : num;
}

// Rope-channel rows of one layer, rotated to `pos`: n x width.
std::vector<float> rotated_rows(const PreparedItem& it, const ChunkKV& kv, int layer, int ch,
                                std::span<const Pos> pos) {
  Engine& e = it.ctx->engine();
  const int n = kv.n_tokens, width = kv.layout.channels[ch].width;
  std::vector<float> a(size_t(n) * width);
  for (int i = 0; i < n; ++i) kv.at(layer, ch).get_row(i, &a[size_t(i) * width]);
  const int rope_hd = e.rope().desc().head_dim;
  relocate_rope_channel(e.rope(), width / rope_hd, a.data(), n, width, pos, false, &e.threads());
  return a;
}

}  // namespace

Status probe_relocation(const PreparedItem& it, ReuseBenchResult& res) {
  Context& ctx = *it.ctx;
  const ModelConfig& c = ctx.model().cfg;
  const ReusedChunk& r = it.reused.front();
  const int nB = r.content->n(), ch = ctx.pool().layout().rope_channel();
  ScopedSequence s(ctx.pool());  // [anchor · chunk] with the chunk at its place in the item
  const int32_t anchor_at = r.position - ctx.cache().anchor_extent();
  KAMERA_TRY(ctx.cache().forward_chunk(s.id(), ChunkContent::from_tokens(ctx.cache().anchor()),
                                       anchor_at));
  KAMERA_TRY(ctx.cache().forward_chunk(s.id(), *r.content, r.position));
  const ChunkKV shifted = read_chunk_kv(ctx.pool(), s.id(), it.anchor_tokens, nB);
  const std::vector<Pos> pos = r.content->positions_at(r.position);
  const int width = shifted.layout.channels[ch].width,
            rope_hd = ctx.engine().rope().desc().head_dim;
  for (int layer = 0; layer < c.n_layers; ++layer) {
    const auto a = rotated_rows(it, r.canon->kv, layer, ch, pos);
    const auto b = rotated_rows(it, shifted, layer, ch, pos);
    double scale = 0, err = 0;
    for (int i = 0; i < nB; ++i)
      for (int h = 0; h < width / rope_hd; ++h)
        for (int d = 0; d < c.rope.n_rot; ++d) {
          const size_t at = size_t(i) * width + size_t(h) * rope_hd + d;
          const int64_t ulp = ulp_distance(a[at], b[at]);
          res.relocation_max_ulp = std::max(res.relocation_max_ulp, ulp);
          if (layer == 0)
            res.relocation_max_ulp_layer0 = std::max(res.relocation_max_ulp_layer0, ulp);
          err = std::max(err, double(std::fabs(a[at] - b[at])));
          scale = std::max(scale, double(std::fabs(b[at])));
        }
    res.relocation_max_abs_err = std::max(res.relocation_max_abs_err, err);
    if (scale > 0) res.relocation_max_rel_err = std::max(res.relocation_max_rel_err, err / scale);
  }
  return Status::Ok();
}

Status probe_deficit(const PreparedItem& it, const PatchOptions& po, bool first_item,
                     ReuseBenchResult& res) {
  const ReusedChunk& r = it.reused.front();
  std::vector<DeltaStats> stats;
  KAMERA_ASSIGN_OR_RETURN(Patch p, form_patch(r.cond, r.canon->kv, po, &stats));
  for (const DeltaStats& s : stats) {
    LayerAnatomy& l = res.anatomy[size_t(s.layer)];
    l.rel_norm[size_t(s.channel)] +=
        s.conditioned_norm > 0 ? s.delta_norm / s.conditioned_norm : 0.0;
    l.rank90[size_t(s.channel)] += s.rank90;
    auto& spec = l.spectrum[size_t(s.channel)];
    const size_t k = s.singular_values.size();
    const double s0 = k && s.singular_values[0] > 0 ? s.singular_values[0] : 1.0;
    if (first_item) spec.assign(k, 0.0);
    if (spec.size() > k) spec.resize(k);
    for (size_t i = 0; i < spec.size(); ++i) spec[i] += s.singular_values[i] / s0;
  }
  ChunkKV rebuilt = r.canon->kv;  // full-rank reconstruction against the conditioned rows
  apply_patch(p, rebuilt);
  const int n_ch = int(rebuilt.layout.channels.size());
  for (int layer = 0; layer < rebuilt.layout.n_layers; ++layer)
    for (int ch = 0; ch < n_ch; ++ch)
      res.full_rank_max_rel_err_channel[size_t(ch)] =
          std::max(res.full_rank_max_rel_err_channel[size_t(ch)],
                   max_rel_err(rebuilt.at(layer, ch), r.cond.at(layer, ch)));
  return Status::Ok();
}

double head_cells_for_90(const PreparedItem& it) {
  const ModelConfig& c = it.ctx->model().cfg;
  const ReusedChunk& r = it.reused.front();
  const KvLayout& layout = r.cond.layout;
  const int heads = c.attention == AttentionKind::Gqa ? c.n_kv_heads : 1, nB = r.content->n();
  std::vector<double> cells;
  std::vector<float> ra, rb;
  for (int layer = 0; layer < c.n_layers; ++layer)
    for (int ch = 0; ch < int(layout.channels.size()); ++ch) {
      const int w = layout.channels[ch].width, hw = w / heads;
      ra.resize(w);
      rb.resize(w);
      std::vector<double> e(heads, 0.0);
      for (int i = 0; i < nB; ++i) {
        r.cond.at(layer, ch).get_row(i, ra.data());
        r.canon->kv.at(layer, ch).get_row(i, rb.data());
        for (int j = 0; j < w; ++j) e[j / hw] += double(ra[j] - rb[j]) * (ra[j] - rb[j]);
      }
      if (c.attention == AttentionKind::Gqa && ch == channel::kGqaValue) {
        for (int h = 0; h < heads; ++h) cells[cells.size() - heads + h] += e[h];  // k and v
      } else {
        cells.insert(cells.end(), e.begin(), e.end());
      }
    }
  std::sort(cells.rbegin(), cells.rend());
  double total = 0, acc = 0;
  for (double x : cells) total += x;
  int needed = 0;
  for (double x : cells) {
    if (!(total > 0) || acc >= 0.9 * total) break;
    acc += x;
    ++needed;
  }
  return total > 0 ? double(needed) / double(cells.size()) : NAN;
}

Result<double> compile_ms(const PreparedItem& it, const PatchOptions& po) {
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(auto cond, it.ctx->cache().conditioned(it.item->chunks));
  KAMERA_ASSIGN_OR_RETURN(Patch p, form_patch(cond.back(), it.reused.back().canon->kv, po));
  (void)p;
  return now_ms() - t0;
}

}  // namespace kamera
