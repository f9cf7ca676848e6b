#include "eval/baselines.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval/recompute.h"

namespace kamera {

namespace {

std::vector<int> first_k(int k, int n) {
  std::vector<int> v(std::max(0, std::min(k, n)));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The `count` indices of the largest scores, ascending.
std::vector<int> top_by(const std::vector<double>& score, int count) {
  std::vector<int> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
  order.resize(std::max(0, std::min<int>(count, int(order.size()))));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

Status run_baselines(const BaselineItem& b, const ArmSink& sink) {
  const ModelConfig& c = b.model.cfg;
  const int L = c.n_layers, nB = b.nB, first = 1 + b.nA;
  const KvLayout& layout = b.pool.layout();
  const ChunkContent& chunk = b.item.chunk;
  const int dim = c.dim;

  // Serve B from its canonical, recompute the plan's tokens in context, then prefill Q.
  size_t row_floats = 0;
  for (const auto& ch : layout.channels) row_floats += size_t(ch.width);
  const double full_bytes = double(nB) * row_floats * L * 4;
  auto serve_plan = [&](RecomputePlan plan, ArmCost* cost) -> Result<std::vector<float>> {
    auto fork = b.pool.fork(b.prefix);
    if (!fork.ok()) return fork.error();
    Result<std::vector<float>> out = make_error(ErrorCode::InvalidArgument, "unset");
    // From layer 0 the recomputed tokens start from their ids or their embedding rows.
    std::vector<int32_t> sel_ids;
    std::vector<float> sel_rows;
    for (int& t : plan.tokens) {
      if (!plan.hidden && chunk.is_tokens()) sel_ids.push_back(chunk.tokens[t]);
      if (!plan.hidden && !chunk.is_tokens())
        sel_rows.insert(sel_rows.end(), chunk.embeddings.begin() + size_t(t) * dim,
                        chunk.embeddings.begin() + size_t(t + 1) * dim);
      t += first;
    }
    if (!plan.hidden) {
      plan.ids = sel_ids;
      if (!chunk.is_tokens()) plan.hidden = sel_rows.data();
    }
    Status st = b.cache.place(*fork, b.canon, nullptr, b.pB);
    RecomputeStats rs;
    if (st.ok()) st = recompute_tokens(b.engine, b.pool, *fork, plan, &rs);
    if (st.ok()) {
      out = b.cache.forward_chunk(*fork, b.item.query, b.pQ, LogitsMode::All);
    } else {
      out = st.error();
    }
    b.pool.free_sequence(*fork);
    cost->recompute_fraction = double(rs.token_layers) / double(nB * L);
    cost->kv_bytes = double(rs.rows_written) * double(row_floats) * 4;
    cost->bytes_fraction = cost->kv_bytes / full_bytes;
    cost->flops = rs.flops;
    return out;
  };
  auto tokens_arm = [&](const std::string& name, const std::string& param,
                        std::vector<int> sel) -> Status {
    RecomputePlan plan;
    plan.tokens = std::move(sel);
    ArmCost cost;
    auto l = serve_plan(plan, &cost);
    if (!l.ok()) return l.error();
    sink(name, 0, param, *l, cost);
    return Status::Ok();
  };

  for (double p : b.opts.cacheblend_share) {
    RecomputePlan plan;
    plan.tokens = first_k(nB, nB);
    plan.select_layer = std::min(b.opts.cacheblend_select_layer, L - 1);
    plan.keep = p <= 0 ? 0 : std::max(1, int(std::lround(p * nB)));
    ArmCost cost;
    auto l = serve_plan(plan, &cost);
    if (!l.ok()) return l.error();
    sink("cacheblend", 0, fmt::format("p={:g}", p), *l, cost);
  }
  for (int k : b.opts.epic_k)
    KAMERA_TRY(tokens_arm("epic", fmt::format("k={}", k), first_k(k, nB)));
  KAMERA_TRY(tokens_arm("sink", fmt::format("k={}", b.opts.sink_k), first_k(b.opts.sink_k, nB)));
  {
    const int t =
        b.opts.vlcache_share <= 0 ? 0 : std::max(1, int(std::ceil(b.opts.vlcache_share * nB)));
    std::vector<int> sel;
    for (int i = 0; i < t; ++i) sel.push_back(int(int64_t(i) * nB / t));
    sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
    KAMERA_TRY(tokens_arm("vlcache", fmt::format("share={:g}", b.opts.vlcache_share), sel));
  }
  // Oracle selector by the true per-token deficit magnitude.
  std::vector<double> energy(nB, 0.0);
  {
    std::vector<float> x, y;
    for (size_t blk = 0; blk < b.cond.blocks.size(); ++blk) {
      x.resize(b.cond.blocks[blk].cols());
      y.resize(x.size());
      for (int i = 0; i < nB; ++i) {
        b.cond.blocks[blk].get_row(i, x.data());
        b.canon.kv.blocks[blk].get_row(i, y.data());
        for (size_t j = 0; j < x.size(); ++j) energy[i] += double(x[j] - y[j]) * (x[j] - y[j]);
      }
    }
  }
  for (double p : b.opts.delta_token_share)
    KAMERA_TRY(tokens_arm("oracle_delta_tokens", fmt::format("p={:g}", p),
                          top_by(energy, p <= 0 ? 0 : std::max(1, int(std::lround(p * nB))))));
  // Partial re-prefill: B's canonical below layer l, B recomputed in context from l up (its
  // hidden state entering l taken from the canonical forward).
  for (int l = 0; l < L; ++l) {
    ScopedSequence s(b.pool);
    const int32_t bos = b.model.tokenizer ? b.model.tokenizer->bos() : 1;
    const Pos p0 = Pos::linear(0);
    auto r0 = b.engine.forward(b.pool, s.id(), ForwardInput::from_tokens({&bos, 1}, {&p0, 1}));
    if (!r0.ok()) return r0.error();
    CaptureLayerInput hidden(l);
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    fo.observer = &hidden;
    const auto pos = chunk.positions_at(1);
    auto r1 = b.engine.forward(b.pool, s.id(), forward_input(chunk, pos), fo);
    if (!r1.ok()) return r1.error();
    RecomputePlan plan;
    plan.tokens = first_k(nB, nB);
    plan.from_layer = l;
    plan.hidden = hidden.rows.data();
    ArmCost cost;
    auto lg = serve_plan(plan, &cost);
    if (!lg.ok()) return lg.error();
    sink("partial_reprefill", 0, fmt::format("l={}", l), *lg, cost);
  }
  // Matched bytes: what a rank-m patch stores, spent on tokens (Quest oracle) or on a low-rank
  // absolute K (ShadowKV).
  KeyMassSum mass_sum;
  {
    auto fork = b.pool.fork(b.prefix);
    if (!fork.ok()) return fork.error();
    auto r = b.cache.forward_chunk(*fork, b.item.chunk, b.pB);
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    fo.observer = &mass_sum;
    const auto qpos = b.item.query.positions_at(b.pQ);
    Result<std::vector<float>> q =
        r.ok() ? b.engine.forward(b.pool, *fork, forward_input(b.item.query, qpos), fo)
               : Result<std::vector<float>>(r.error());
    b.pool.free_sequence(*fork);
    if (!q.ok()) return q.error();
  }
  const std::vector<float>& mass = mass_sum.mass;
  std::vector<double> b_mass(nB, 0.0);
  for (int i = 0; i < nB && first + i < int(mass.size()); ++i) b_mass[i] = mass[first + i];
  // The first channel (k for GQA, c_kv for MLA) bounds the ranks worth comparing; ShadowKV
  // (GQA only) factors k.
  const int kch = channel::kGqaKey;
  const int wk = layout.channels[0].width;
  for (int m : b.opts.matched_ranks) {
    if (m >= std::min(nB, wk)) continue;  // a patch that large is no smaller than the chunk
    double patch_floats = 0;
    for (const auto& ch : layout.channels) patch_floats += double(m) * (nB + ch.width);
    patch_floats *= L;
    const int t = std::clamp(int(patch_floats / (double(row_floats) * L)), 1, nB);
    {
      RecomputePlan plan;
      plan.tokens = top_by(b_mass, t);
      ArmCost cost;
      auto l = serve_plan(plan, &cost);
      if (!l.ok()) return l.error();
      sink("oracle_quest", 0, fmt::format("bytes_of_rank={}", m), *l, cost);
    }
    // ShadowKV keeps a low-rank pre-RoPE K and an exact V; MLA's latent carries both K and V, so
    // the arm has no MLA counterpart.
    if (c.attention == AttentionKind::Gqa) {
      const int r = std::clamp(int(patch_floats / (double(nB + wk) * L)), 1, std::min(nB, wk));
      CanonicalEntry lowk;
      lowk.id = b.canon.id;
      lowk.content = b.canon.content;
      lowk.kv = b.canon.kv;
      std::vector<float> kmat(size_t(nB) * wk), us, vt, rebuilt(size_t(nB) * wk);
      for (int layer = 0; layer < L; ++layer) {
        for (int i = 0; i < nB; ++i) b.cond.at(layer, kch).get_row(i, &kmat[size_t(i) * wk]);
        KAMERA_TRY(truncated_svd(kmat.data(), nB, wk, r, SvdMethod::Gesdd, us, vt));
        for (int i = 0; i < nB; ++i)
          for (int j = 0; j < wk; ++j) {
            double s = 0;
            for (int k = 0; k < r; ++k) s += double(us[size_t(i) * r + k]) * vt[size_t(k) * wk + j];
            rebuilt[size_t(i) * wk + j] = float(s);
          }
        for (int i = 0; i < nB; ++i) lowk.kv.at(layer, kch).set_row(i, &rebuilt[size_t(i) * wk]);
      }
      auto fork = b.pool.fork(b.prefix);
      if (!fork.ok()) return fork.error();
      Status st = b.cache.place(*fork, lowk, nullptr, b.pB);
      auto l = st.ok() ? b.cache.forward_chunk(*fork, b.item.query, b.pQ, LogitsMode::All)
                       : Result<std::vector<float>>(st.error());
      b.pool.free_sequence(*fork);
      if (!l.ok()) return l.error();
      ArmCost cost;  // the K factors read (r x (n + width) per layer); V from the canonical
      cost.kv_bytes = double(r) * (nB + wk) * L * 4;
      cost.bytes_fraction = cost.kv_bytes / full_bytes;
      cost.flops = 2.0 * double(nB) * r * wk * L;
      sink("shadowkv_lowrank_k", 0, fmt::format("bytes_of_rank={}", m), *l, cost);
    }
  }
  return Status::Ok();
}

Status pooled_basis_pass(
    Context& ctx, const std::vector<ReuseItem>& items,
    const std::vector<std::vector<ChunkKV>>& deltas, int m, double* error_ratio,
    const std::function<void(int, const std::vector<float>&, const std::vector<float>&)>& sink) {
  const Model& model = ctx.model();
  KvPool& pool = ctx.pool();
  const ModelConfig& c = model.cfg;
  const KvLayout layout = model.kv_layout();
  const int n_ch = int(layout.channels.size());
  // Basis per (layer, channel) from the even items.
  std::vector<std::vector<float>> basis(size_t(c.n_layers) * n_ch);
  std::vector<int> basis_rank(basis.size(), 0);
  for (int layer = 0; layer < c.n_layers; ++layer)
    for (int ch = 0; ch < n_ch; ++ch) {
      const int w = layout.channels[ch].width;
      std::vector<float> stacked;
      for (size_t i = 0; i < items.size(); i += 2) {
        if (deltas[i].empty()) continue;
        const ChannelMatrix& d = deltas[i][0].at(layer, ch);
        std::vector<float> row(w);
        for (int r = 0; r < d.rows(); ++r) {
          d.get_row(r, row.data());
          stacked.insert(stacked.end(), row.begin(), row.end());
        }
      }
      const int rows = int(stacked.size() / w), k = std::min({m, rows, w});
      if (k < 1) continue;
      std::vector<float> us, vt;
      KAMERA_TRY(truncated_svd(stacked.data(), rows, w, k, SvdMethod::Gesdd, us, vt));
      basis[size_t(layer) * n_ch + ch] = std::move(vt);
      basis_rank[size_t(layer) * n_ch + ch] = k;
    }
  double err_pooled = 0, err_own = 0;
  for (size_t i = 1; i < items.size(); i += 2) {
    if (deltas[i].empty()) continue;
    const ReuseItem& it = items[i];
    const ChunkKV& delta = deltas[i][0];
    Patch patch;
    patch.n_tokens = delta.n_tokens;
    patch.options.rank = m;
    for (int layer = 0; layer < c.n_layers; ++layer)
      for (int ch = 0; ch < n_ch; ++ch) {
        const int w = layout.channels[ch].width, n = delta.n_tokens;
        const int k = basis_rank[size_t(layer) * n_ch + ch];
        if (k < 1) continue;
        const std::vector<float>& vp = basis[size_t(layer) * n_ch + ch];  // k x w
        std::vector<float> d(size_t(n) * w);
        for (int r = 0; r < n; ++r) delta.at(layer, ch).get_row(r, &d[size_t(r) * w]);
        // coefficients on the pooled basis, and the two reconstruction errors
        std::vector<float> coef(size_t(n) * k, 0.0f);
        for (int r = 0; r < n; ++r)
          for (int q = 0; q < k; ++q) {
            double s = 0;
            for (int j = 0; j < w; ++j) s += double(d[size_t(r) * w + j]) * vp[size_t(q) * w + j];
            coef[size_t(r) * k + q] = float(s);
          }
        std::vector<float> us, vt;
        const int ko = std::min({k, n, w});
        KAMERA_TRY(truncated_svd(d.data(), n, w, ko, SvdMethod::Gesdd, us, vt));
        for (int r = 0; r < n; ++r)
          for (int j = 0; j < w; ++j) {
            double p = 0, o = 0;
            for (int q = 0; q < k; ++q)
              p += double(coef[size_t(r) * k + q]) * vp[size_t(q) * w + j];
            for (int q = 0; q < ko; ++q)
              o += double(us[size_t(r) * ko + q]) * vt[size_t(q) * w + j];
            const double x = d[size_t(r) * w + j];
            err_pooled += (x - p) * (x - p);
            err_own += (x - o) * (x - o);
          }
        PatchFactor f;
        f.layer = layer;
        f.channel = ch;
        f.cols = w;
        f.rows = n;
        f.rank = k;
        f.us = ChannelMatrix(n, k, DType::F32);
        f.vt = ChannelMatrix(k, w, DType::F32);
        for (int r = 0; r < n; ++r) f.us.set_row(r, &coef[size_t(r) * k]);
        for (int q = 0; q < k; ++q) f.vt.set_row(q, &vp[size_t(q) * w]);
        patch.factors.push_back(std::move(f));
      }
    // Serve the held-out item with the pooled-basis patch, against its re-prefill.
    ctx.clear_store();
    ChunkCache& cc = ctx.cache();
    const int32_t pA = cc.anchor_extent(), pB = pA + it.antecedent.extent(),
                  pQ = pB + it.chunk.extent();
    ScopedSequence prefix(pool);
    KAMERA_TRY(cc.place_anchor(prefix.id()));
    if (auto r = cc.forward_chunk(prefix.id(), it.antecedent, pA); !r.ok()) return r.error();
    std::vector<float> ref;
    {
      auto f = pool.fork(prefix.id());
      if (!f.ok()) return f.error();
      auto r = cc.forward_chunk(*f, it.chunk, pB);
      auto q = r.ok() ? cc.forward_chunk(*f, it.query, pQ, LogitsMode::All)
                      : Result<std::vector<float>>(r.error());
      pool.free_sequence(*f);
      if (!q.ok()) return q.error();
      ref = std::move(q.value());
    }
    auto canon = cc.canonical(it.chunk);
    if (!canon.ok()) return canon.error();
    auto f = pool.fork(prefix.id());
    if (!f.ok()) return f.error();
    Status st = cc.place(*f, **canon, &patch, pB);
    auto l = st.ok() ? cc.forward_chunk(*f, it.query, pQ, LogitsMode::All)
                     : Result<std::vector<float>>(st.error());
    pool.free_sequence(*f);
    if (!l.ok()) return l.error();
    sink(int(i), ref, *l);
  }
  *error_ratio = err_own > 0 ? std::sqrt(err_pooled / err_own) : NAN;
  return Status::Ok();
}

}  // namespace kamera
