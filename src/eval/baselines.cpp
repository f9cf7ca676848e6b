#include "eval/baselines.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval/arms.h"

namespace kamera {

namespace {

// Floats of one token's cached rows in one layer (every channel).
double row_floats(const KvLayout& layout) {
  double f = 0;
  for (const auto& ch : layout.channels) f += ch.width;
  return f;
}

// Sequence index of each reused token (the reused chunks' tokens, concatenated).
std::vector<int> reused_token_index(const PreparedItem& it) {
  std::vector<int> out;
  for (const ReusedChunk& r : it.reused)
    for (int i = 0; i < r.content->n(); ++i) out.push_back(r.first_token + i);
  return out;
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

std::vector<int> all_tokens(const PreparedItem& it) {
  std::vector<int> v(size_t(it.reused_tokens()));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The first k tokens of every reused chunk.
std::vector<int> first_k_each(const PreparedItem& it, int k) {
  std::vector<int> v;
  int off = 0;
  for (const ReusedChunk& r : it.reused) {
    for (int i = 0; i < std::max(0, std::min(k, r.content->n())); ++i) v.push_back(off + i);
    off += r.content->n();
  }
  return v;
}

// Gathers the from-layer-0 input of the selected reused tokens: ids (token chunks) or embedding
// rows (embedding chunks).
Status gather_inputs(const PreparedItem& it, const std::vector<int>& sel, std::vector<int32_t>& ids,
                     std::vector<float>& rows) {
  const int dim = it.ctx->model().cfg.dim;
  std::vector<std::pair<int, int>> where;  // (chunk, local) per reused token
  for (size_t c = 0; c < it.reused.size(); ++c)
    for (int i = 0; i < it.reused[c].content->n(); ++i) where.emplace_back(int(c), i);
  for (int t : sel) {
    const ChunkContent& c = *it.reused[size_t(where[size_t(t)].first)].content;
    const int i = where[size_t(t)].second;
    if (c.is_tokens()) {
      ids.push_back(c.tokens[size_t(i)]);
    } else {
      rows.insert(rows.end(), c.embeddings.begin() + size_t(i) * dim,
                  c.embeddings.begin() + size_t(i + 1) * dim);
    }
  }
  if (!ids.empty() && !rows.empty())
    return make_error(ErrorCode::Unsupported,
                      "recompute: the reused chunks mix token ids and embedding rows");
  return Status::Ok();
}

}  // namespace

Result<bool> RecomputeArm::prepare(const PreparedItem& it) {
  plan_ = RecomputePlan{};
  hidden_.clear();
  rows_.clear();
  ids_.clear();
  KAMERA_ASSIGN_OR_RETURN(const bool applies, select(it, plan_));
  if (!applies) return false;
  if (plan_.from_layer == 0 && hidden_.empty()) {
    KAMERA_TRY(gather_inputs(it, plan_.tokens, ids_, rows_));
    plan_.ids = ids_;
    if (!rows_.empty()) plan_.hidden = rows_.data();
  } else {
    plan_.hidden = hidden_.data();
  }
  const std::vector<int> seq_index = reused_token_index(it);
  for (int& t : plan_.tokens) t = seq_index[size_t(t)];
  return true;
}

Result<ArmBuild> RecomputeArm::build(const PreparedItem& it, SeqId seq) {
  KAMERA_TRY(place_reused(it, seq, nullptr));
  RecomputeStats rs;
  KAMERA_TRY(recompute_tokens(it.ctx->engine(), it.ctx->pool(), seq, plan_, &rs));
  const int L = it.ctx->model().cfg.n_layers, n = it.reused_tokens();
  ArmBuild b;
  b.cost.recompute_fraction = double(rs.token_layers) / double(n * L);
  b.cost.kv_bytes = double(rs.rows_written) * row_floats(it.ctx->pool().layout()) * 4;
  b.cost.bytes_fraction = b.cost.kv_bytes / it.reused_kv_bytes();
  b.cost.flops = rs.flops;
  return b;
}

namespace {

// CacheBlend: every reused token recomputed up to an early layer, where the `p` share whose V
// deviates most from the reused V is kept for the deeper layers.
class CacheBlendArm : public RecomputeArm {
 public:
  CacheBlendArm(double p, int select_layer)
      : RecomputeArm({"cacheblend", 0, fmt::format("p={:g}", p)}), p_(p), layer_(select_layer) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    const int n = it.reused_tokens();
    plan.tokens = all_tokens(it);
    plan.select_layer = std::min(layer_, it.ctx->model().cfg.n_layers - 1);
    plan.keep = p_ <= 0 ? 0 : std::max(1, int(std::lround(p_ * n)));
    return true;
  }

 private:
  double p_;
  int layer_;
};

// EPIC (and the attention sink): the first k tokens of every reused chunk.
class FirstTokensArm : public RecomputeArm {
 public:
  FirstTokensArm(const char* name, int k)
      : RecomputeArm({name, 0, fmt::format("k={}", k)}), k_(k) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    plan.tokens = first_k_each(it, k_);
    return true;
  }

 private:
  int k_;
};

// VLCache-style: a uniform share of the reused tokens.
class UniformShareArm : public RecomputeArm {
 public:
  explicit UniformShareArm(double share)
      : RecomputeArm({"vlcache", 0, fmt::format("share={:g}", share)}), share_(share) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    const int n = it.reused_tokens();
    const int t = share_ <= 0 ? 0 : std::max(1, int(std::ceil(share_ * n)));
    for (int i = 0; i < t; ++i) plan.tokens.push_back(int(int64_t(i) * n / t));
    plan.tokens.erase(std::unique(plan.tokens.begin(), plan.tokens.end()), plan.tokens.end());
    return true;
  }

 private:
  double share_;
};

// Oracle: the `p` share of tokens with the largest true deficit ||KV(B|A) - C_B||.
class DeltaOracleArm : public RecomputeArm {
 public:
  explicit DeltaOracleArm(double p)
      : RecomputeArm({"oracle_delta_tokens", 0, fmt::format("p={:g}", p)}), p_(p) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    std::vector<double> energy;
    std::vector<float> x, y;
    for (const ReusedChunk& r : it.reused) {
      const size_t off = energy.size();
      energy.resize(off + size_t(r.content->n()), 0.0);
      for (size_t blk = 0; blk < r.cond.blocks.size(); ++blk) {
        x.resize(r.cond.blocks[blk].cols());
        y.resize(x.size());
        for (int i = 0; i < r.content->n(); ++i) {
          r.cond.blocks[blk].get_row(i, x.data());
          r.canon->kv.blocks[blk].get_row(i, y.data());
          for (size_t j = 0; j < x.size(); ++j)
            energy[off + size_t(i)] += double(x[j] - y[j]) * (x[j] - y[j]);
        }
      }
    }
    const int n = int(energy.size());
    plan.tokens = top_by(energy, p_ <= 0 ? 0 : std::max(1, int(std::lround(p_ * n))));
    return true;
  }

 private:
  double p_;
};

// Partial re-prefill: the canonical below layer l, every reused token recomputed in context
// from l up (its hidden state entering l taken from the chunk's canonical forward).
class PartialReprefillArm : public RecomputeArm {
 public:
  explicit PartialReprefillArm(int layer)
      : RecomputeArm({"partial_reprefill", 0, fmt::format("l={}", layer)}), layer_(layer) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    ChunkCache& cc = it.ctx->cache();
    for (const ReusedChunk& r : it.reused) {
      ScopedSequence s(it.ctx->pool());
      KAMERA_TRY(cc.append_anchor(s.id()));
      CaptureLayerInput capture(layer_);
      ForwardOptions fo;
      fo.logits = LogitsMode::None;
      fo.observer = &capture;
      const auto pos = r.content->positions_at(cc.anchor_extent());
      KAMERA_TRY(
          it.ctx->engine().forward(it.ctx->pool(), s.id(), forward_input(*r.content, pos), fo));
      hidden_.insert(hidden_.end(), capture.rows.begin(), capture.rows.end());
    }
    plan.tokens = all_tokens(it);
    plan.from_layer = layer_;
    return true;
  }

 private:
  int layer_;
};

// Bytes of a rank-m patch of the reused tokens spent otherwise: floats of the factors, all
// layers and channels.
double patch_floats(const PreparedItem& it, int m) {
  const KvLayout& layout = it.ctx->pool().layout();
  double f = 0;
  for (const auto& ch : layout.channels) f += double(m) * (it.reused_tokens() + ch.width);
  return f * layout.n_layers;
}

// Does a rank-m patch save anything here? (A patch that large is no smaller than the chunk.)
bool rank_is_small(const PreparedItem& it, int m) {
  const int w0 = it.ctx->pool().layout().channels[0].width;  // k (GQA) or c_kv (MLA)
  return m < std::min(it.reused_tokens(), w0);
}

// Quest-style oracle at the bytes of a rank-m patch: the tokens the query attends to most (the
// attention mass of a full re-prefill of the query).
class QuestOracleArm : public RecomputeArm {
 public:
  explicit QuestOracleArm(int m)
      : RecomputeArm({"oracle_quest", 0, fmt::format("bytes_of_rank={}", m)}), m_(m) {}

 protected:
  Result<bool> select(const PreparedItem& it, RecomputePlan& plan) override {
    if (!rank_is_small(it, m_)) return false;
    KvPool& pool = it.ctx->pool();
    KAMERA_ASSIGN_OR_RETURN(SeqId fork, pool.fork(it.prefix->id()));
    ScopedSequence owner(pool, fork);
    for (const ReusedChunk& r : it.reused)
      KAMERA_TRY(it.ctx->cache().forward_chunk(fork, *r.content, r.position));
    KeyMassSum mass;
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    fo.observer = &mass;
    const ChunkContent& q = it.item->queries.front().content;
    const auto qpos = q.positions_at(it.query_position);
    KAMERA_TRY(it.ctx->engine().forward(pool, fork, forward_input(q, qpos), fo));
    const std::vector<int> seq_index = reused_token_index(it);
    std::vector<double> score(seq_index.size(), 0.0);
    for (size_t i = 0; i < seq_index.size(); ++i)
      if (seq_index[i] < int(mass.mass.size())) score[i] = mass.mass[size_t(seq_index[i])];
    const double row = row_floats(pool.layout()) * pool.layout().n_layers;
    const int t = std::clamp(int(patch_floats(it, m_) / row), 1, int(seq_index.size()));
    plan.tokens = top_by(score, t);
    return true;
  }

 private:
  int m_;
};

// ShadowKV-style: a rank-r pre-RoPE K (r at the bytes of a rank-m patch) and the exact V. MLA's
// latent carries both K and V, so the arm has no MLA counterpart.
class ShadowKvArm : public Arm {
 public:
  explicit ShadowKvArm(int m)
      : Arm({"shadowkv_lowrank_k", 0, fmt::format("bytes_of_rank={}", m)}), m_(m) {}
  Result<bool> prepare(const PreparedItem& it) override;
  Result<ArmBuild> build(const PreparedItem& it, SeqId seq) override;

 private:
  int m_, r_ = 0;
  std::vector<CanonicalEntry> lowk_;  // per reused chunk: the canonical with a low-rank K
};

Result<bool> ShadowKvArm::prepare(const PreparedItem& it) {
  lowk_.clear();
  if (!rank_is_small(it, m_)) return false;
  const KvLayout& layout = it.ctx->pool().layout();
  const int kch = channel::kGqaKey, wk = layout.channels[kch].width, L = layout.n_layers;
  const int nB = it.reused_tokens();
  r_ = std::clamp(int(patch_floats(it, m_) / (double(nB + wk) * L)), 1, std::min(nB, wk));
  for (const ReusedChunk& rc : it.reused) {
    const int n = rc.content->n();
    CanonicalEntry e = *rc.canon;
    std::vector<float> kmat(size_t(n) * wk), us, vt, rebuilt(size_t(n) * wk);
    for (int layer = 0; layer < L; ++layer) {
      for (int i = 0; i < n; ++i) rc.cond.at(layer, kch).get_row(i, &kmat[size_t(i) * wk]);
      const int r = std::min(r_, std::min(n, wk));
      KAMERA_TRY(truncated_svd(kmat.data(), n, wk, r, SvdMethod::Gesdd, us, vt));
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < wk; ++j) {
          double s = 0;
          for (int k = 0; k < r; ++k) s += double(us[size_t(i) * r + k]) * vt[size_t(k) * wk + j];
          rebuilt[size_t(i) * wk + j] = float(s);
        }
      for (int i = 0; i < n; ++i) e.kv.at(layer, kch).set_row(i, &rebuilt[size_t(i) * wk]);
    }
    lowk_.push_back(std::move(e));
  }
  return true;
}

Result<ArmBuild> ShadowKvArm::build(const PreparedItem& it, SeqId seq) {
  for (size_t i = 0; i < it.reused.size(); ++i)
    KAMERA_TRY(it.ctx->cache().append_chunk(seq, lowk_[i], nullptr, it.reused[i].position));
  const KvLayout& layout = it.ctx->pool().layout();
  const int wk = layout.channels[channel::kGqaKey].width, L = layout.n_layers;
  const int nB = it.reused_tokens();
  ArmBuild b;  // the K factors read (r x (n + width) per layer); V from the canonical
  b.cost.kv_bytes = double(r_) * (nB + wk) * L * 4;
  b.cost.bytes_fraction = b.cost.kv_bytes / it.reused_kv_bytes();
  b.cost.flops = 2.0 * double(nB) * r_ * wk * L;
  return b;
}

}  // namespace

std::vector<std::unique_ptr<Arm>> make_baseline_arms(const Model& model, const BaselineOptions& o) {
  std::vector<std::unique_ptr<Arm>> arms;
  for (double p : o.cacheblend_share)
    arms.push_back(std::make_unique<CacheBlendArm>(p, o.cacheblend_select_layer));
  for (int k : o.epic_k) arms.push_back(std::make_unique<FirstTokensArm>("epic", k));
  if (o.sink_k >= 0) arms.push_back(std::make_unique<FirstTokensArm>("sink", o.sink_k));
  arms.push_back(std::make_unique<UniformShareArm>(o.vlcache_share));
  for (double p : o.delta_token_share) arms.push_back(std::make_unique<DeltaOracleArm>(p));
  if (o.partial_reprefill)
    for (int l = 0; l < model.cfg.n_layers; ++l)
      arms.push_back(std::make_unique<PartialReprefillArm>(l));
  for (int m : o.matched_ranks) {
    arms.push_back(std::make_unique<QuestOracleArm>(m));
    if (model.cfg.attention == AttentionKind::Gqa) arms.push_back(std::make_unique<ShadowKvArm>(m));
  }
  return arms;
}

PooledBasisArm::PooledBasisArm(int rank, const std::vector<const ChunkKV*>& train,
                               const KvLayout& layout)
    : Arm({"pooled_basis", rank, ""}), rank_(rank), layout_(layout) {
  const int n_ch = int(layout.channels.size());
  basis_.resize(size_t(layout.n_layers) * n_ch);
  basis_rank_.assign(basis_.size(), 0);
  for (int layer = 0; layer < layout.n_layers; ++layer)
    for (int ch = 0; ch < n_ch; ++ch) {
      const int w = layout.channels[ch].width;
      std::vector<float> stacked, row(w);
      for (const ChunkKV* d : train)
        for (int r = 0; r < d->n_tokens; ++r) {
          d->at(layer, ch).get_row(r, row.data());
          stacked.insert(stacked.end(), row.begin(), row.end());
        }
      const int rows = int(stacked.size() / w), k = std::min({rank, rows, w});
      if (k < 1) continue;
      std::vector<float> us, vt;
      if (Status st = truncated_svd(stacked.data(), rows, w, k, SvdMethod::Gesdd, us, vt);
          !st.ok()) {
        status_ = st;
        return;
      }
      basis_[size_t(layer) * n_ch + ch] = std::move(vt);
      basis_rank_[size_t(layer) * n_ch + ch] = k;
    }
}

double PooledBasisArm::error_ratio() const {
  return err_own_ > 0 ? std::sqrt(err_pooled_ / err_own_) : NAN;
}

namespace {

// Coefficients of d (n x w) on a basis vp (k x w): n x k.
std::vector<float> project(const std::vector<float>& d, const std::vector<float>& vp, int n, int w,
                           int k) {
  std::vector<float> coef(size_t(n) * k, 0.0f);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < k; ++q) {
      double s = 0;
      for (int j = 0; j < w; ++j) s += double(d[size_t(r) * w + j]) * vp[size_t(q) * w + j];
      coef[size_t(r) * k + q] = float(s);
    }
  return coef;
}

// Squared Frobenius error of d against us·vt (n x w, rank k).
double residual2(const std::vector<float>& d, const float* us, const float* vt, int n, int w,
                 int k) {
  double e = 0;
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < w; ++j) {
      double p = 0;
      for (int q = 0; q < k; ++q) p += double(us[size_t(r) * k + q]) * vt[size_t(q) * w + j];
      const double x = d[size_t(r) * w + j];
      e += (x - p) * (x - p);
    }
  return e;
}

}  // namespace

Result<bool> PooledBasisArm::prepare(const PreparedItem& it) {
  KAMERA_TRY(status_);
  patches_.clear();
  const int n_ch = int(layout_.channels.size());
  for (const ReusedChunk& rc : it.reused) {
    const ChunkKV delta = deficit(rc);
    Patch patch;
    patch.n_tokens = delta.n_tokens;
    patch.options.rank = rank_;
    for (int layer = 0; layer < layout_.n_layers; ++layer)
      for (int ch = 0; ch < n_ch; ++ch) {
        const int w = layout_.channels[ch].width, n = delta.n_tokens;
        const int k = basis_rank_[size_t(layer) * n_ch + ch];
        if (k < 1) continue;
        const std::vector<float>& vp = basis_[size_t(layer) * n_ch + ch];
        std::vector<float> d(size_t(n) * w);
        for (int r = 0; r < n; ++r) delta.at(layer, ch).get_row(r, &d[size_t(r) * w]);
        const std::vector<float> coef = project(d, vp, n, w, k);
        std::vector<float> us, vt;
        const int ko = std::min({k, n, w});
        KAMERA_TRY(truncated_svd(d.data(), n, w, ko, SvdMethod::Gesdd, us, vt));
        err_pooled_ += residual2(d, coef.data(), vp.data(), n, w, k);
        err_own_ += residual2(d, us.data(), vt.data(), n, w, ko);
        patch.factors.push_back(
            PatchFactor::from_f32(layer, ch, 0, n, w, k, coef.data(), vp.data(), DType::F32));
      }
    patches_.push_back(std::move(patch));
  }
  return true;
}

Result<ArmBuild> PooledBasisArm::build(const PreparedItem& it, SeqId seq) {
  KAMERA_TRY(place_reused(it, seq, &patches_));
  return ArmBuild{};
}

ChunkKV deficit(const ReusedChunk& r) {
  ChunkKV delta = r.cond;
  std::vector<float> x, y;
  for (size_t b = 0; b < delta.blocks.size(); ++b) {
    x.resize(delta.blocks[b].cols());
    y.resize(x.size());
    for (int i = 0; i < r.cond.n_tokens; ++i) {
      delta.blocks[b].get_row(i, x.data());
      r.canon->kv.blocks[b].get_row(i, y.data());
      for (size_t j = 0; j < x.size(); ++j) x[j] -= y[j];
      delta.blocks[b].set_row(i, x.data());
    }
  }
  return delta;
}

}  // namespace kamera
