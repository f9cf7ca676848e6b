// The measurement of estimate_bench.h: per group, the stored occurrence and its patch once, then
// per composition the re-prefill reference and the arms, each case with every estimator.
#include "bench/estimate_bench.h"

#include <algorithm>
#include <random>

#include "eval/metrics.h"
#include "reuse/deficit_estimate.h"

namespace kamera {

const std::vector<std::string>& estimator_names() {
  static const std::vector<std::string> names = {"context",
                                                 "context_near",
                                                 "sens_canon",
                                                 "sens_deep",
                                                 "sens_pair",
                                                 "context*sens_canon",
                                                 "context*sens_deep",
                                                 "context*sens_pair",
                                                 "context_near*sens_canon",
                                                 "residual",
                                                 "key_shift",
                                                 "recommended",
                                                 "oracle",
                                                 "random"};
  return names;
}

int64_t estimate_bench_kv_tokens(const Model& model) {
  return 8 * (int64_t(model.cfg.ctx_len) + 64);
}

namespace {

constexpr double kNearDecay = kRecommendedDecay;  // context_near: each step away counts half

// What a server holds of the group's segment B before the new request: its canonical, its rows
// behind O (the occurrence), its rows behind another context O2 (a second occurrence), the rank-m
// patch formed behind O with its singular values, and the canonical + that patch.
struct Held {
  std::shared_ptr<const CanonicalEntry> canon;
  CanonicalEntry occurrence;  // content B, kv = KV(B | O)
  ChunkKV pair_rows;          // KV(B | O2)
  Patch patch;
  std::vector<DeltaStats> stats;
  ChunkKV patched;  // C_B + U_m Σ_m V_mᵀ
  double sens_canon = 0, sens_deep = 0, sens_pair = 0;
};

class Runner {
 public:
  Runner(Context& ctx, const std::vector<ChunkContent>& pool, const EstimateOptions& o)
      : ctx_(ctx), pool_(pool), o_(o), rng_(uint32_t(o.seed)) {}

  Status group(int gi, const EstimateGroup& g, std::vector<EstimateCase>& out);
  std::vector<std::string> notes;

 private:
  ChunkCache& cc() { return ctx_.cache(); }
  Result<Held> hold(const EstimateGroup& g);
  Result<std::vector<ChunkContent>> compose(const std::string& kind, const EstimateGroup& g,
                                            std::vector<ChunkId> avoid);
  Result<std::vector<float>> reprefill(const std::vector<ChunkContent>& n, const ChunkContent& b,
                                       const ChunkContent& q, ChunkKV* rows);
  Result<std::vector<float>> served(const std::vector<ChunkContent>& n, const CanonicalEntry& c,
                                    const Patch* p, const ChunkContent& q);
  std::vector<Antecedent> antecedents(const std::vector<ChunkContent>& chunks);
  Result<std::vector<float>> centroid(const std::vector<ChunkContent>& chunks);
  ChunkContent pick(std::vector<ChunkId>& used);

  Context& ctx_;
  const std::vector<ChunkContent>& pool_;
  const EstimateOptions& o_;
  std::mt19937 rng_;
};

ChunkContent Runner::pick(std::vector<ChunkId>& used) {
  for (int tries = 0; tries < 10000; ++tries) {
    const ChunkContent& c = pool_[rng_() % pool_.size()];
    const ChunkId id = cc().id_of(c);
    if (std::find(used.begin(), used.end(), id) != used.end()) continue;
    used.push_back(id);
    return c;
  }
  if (notes.empty()) notes.push_back("the chunk pool is too small: a replacement repeats a chunk");
  return pool_[rng_() % pool_.size()];
}

std::vector<Antecedent> Runner::antecedents(const std::vector<ChunkContent>& chunks) {
  std::vector<Antecedent> a;
  for (const auto& c : chunks) a.push_back({cc().id_of(c), c.n()});
  return a;
}

Result<std::vector<float>> Runner::centroid(const std::vector<ChunkContent>& chunks) {
  std::vector<std::shared_ptr<const CanonicalEntry>> held;
  std::vector<const ChunkKV*> kvs;
  for (const auto& c : chunks) {
    KAMERA_ASSIGN_OR_RETURN(auto e, cc().canonical(c));
    kvs.push_back(&e->kv);
    held.push_back(std::move(e));
  }
  return key_centroid(kvs, 0);
}

Result<std::vector<float>> Runner::reprefill(const std::vector<ChunkContent>& n,
                                             const ChunkContent& b, const ChunkContent& q,
                                             ChunkKV* rows) {
  KvPool& pool = ctx_.pool();
  ScopedSequence s(pool);
  KAMERA_TRY(cc().append_anchor(s.id()));
  int32_t pos = cc().anchor_extent();
  for (const auto& c : n) {
    KAMERA_TRY(cc().forward_chunk(s.id(), c, pos));
    pos += c.extent();
  }
  const int first = pool.n_tokens(s.id());
  KAMERA_TRY(cc().forward_chunk(s.id(), b, pos));
  *rows = read_chunk_kv(pool, s.id(), first, b.n());
  return cc().forward_chunk(s.id(), q, pos + b.extent(), LogitsMode::All);
}

Result<std::vector<float>> Runner::served(const std::vector<ChunkContent>& n,
                                          const CanonicalEntry& c, const Patch* p,
                                          const ChunkContent& q) {
  ScopedSequence s(ctx_.pool());
  KAMERA_TRY(cc().append_anchor(s.id()));
  int32_t pos = cc().anchor_extent();
  for (const auto& x : n) {
    KAMERA_TRY(cc().forward_chunk(s.id(), x, pos));
    pos += x.extent();
  }
  KAMERA_TRY(cc().append_chunk(s.id(), c, p, pos));
  return cc().forward_chunk(s.id(), q, pos + c.content.extent(), LogitsMode::All);
}

Result<Held> Runner::hold(const EstimateGroup& g) {
  Held h;
  KAMERA_ASSIGN_OR_RETURN(h.canon, cc().canonical(g.segment));
  std::vector<ChunkContent> all = g.context;
  all.push_back(g.segment);
  KAMERA_ASSIGN_OR_RETURN(auto rows, cc().conditioned(all));
  h.occurrence.id = h.canon->id;
  h.occurrence.content = g.segment;
  h.occurrence.kv = std::move(rows.back());
  std::vector<ChunkId> used = {cc().id_of(g.segment)};
  for (const auto& c : g.context) used.push_back(cc().id_of(c));
  std::vector<ChunkContent> other;
  for (size_t i = 0; i < g.context.size(); ++i) other.push_back(pick(used));
  other.push_back(g.segment);
  KAMERA_ASSIGN_OR_RETURN(auto pair, cc().conditioned(other));
  h.pair_rows = std::move(pair.back());
  PatchOptions po;
  po.rank = o_.rank;
  po.cap_rank = true;
  po.head_dim = ctx_.model().cfg.head_dim;
  KAMERA_ASSIGN_OR_RETURN(h.patch, form_patch(h.occurrence.kv, h.canon->kv, po, &h.stats));
  h.patched = h.canon->kv;
  apply_patch(h.patch, h.patched);
  const int deep = ctx_.model().cfg.n_layers / 2;
  h.sens_canon = relative_distance(h.occurrence.kv, h.canon->kv, 0);
  h.sens_deep = relative_distance(h.occurrence.kv, h.canon->kv, deep);
  h.sens_pair = relative_distance(h.occurrence.kv, h.pair_rows, 0);
  return h;
}

Result<std::vector<ChunkContent>> Runner::compose(const std::string& kind, const EstimateGroup& g,
                                                  std::vector<ChunkId> avoid) {
  std::vector<ChunkContent> n = g.context;
  const size_t k = n.size();
  if (kind == "slide") {
    n.erase(n.begin());
  } else if (kind == "reorder") {
    std::vector<size_t> perm(k);
    for (size_t i = 0; i < k; ++i) perm[i] = i;
    while (std::is_sorted(perm.begin(), perm.end())) std::shuffle(perm.begin(), perm.end(), rng_);
    for (size_t i = 0; i < k; ++i) n[i] = g.context[perm[i]];
  } else if (kind == "recall") {
    const size_t r = 1 + rng_() % k;  // antecedents replaced: turnover r / k
    std::vector<size_t> at(k);
    for (size_t i = 0; i < k; ++i) at[i] = i;
    std::shuffle(at.begin(), at.end(), rng_);
    for (size_t i = 0; i < r; ++i) n[at[i]] = pick(avoid);
  } else {
    return make_error(ErrorCode::InvalidArgument,
                      "unknown composition '{}' (slide, reorder, recall)", kind);
  }
  return n;
}

Status Runner::group(int gi, const EstimateGroup& g, std::vector<EstimateCase>& out) {
  ctx_.clear_store();
  if (g.context.size() < 2)
    return make_error(ErrorCode::InvalidArgument, "a group needs at least 2 antecedents");
  KAMERA_ASSIGN_OR_RETURN(const Held h, hold(g));
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> old_keys, centroid(g.context));
  const std::vector<Antecedent> stored = antecedents(g.context);
  std::vector<ChunkId> avoid = {cc().id_of(g.segment)};
  for (const auto& a : stored) avoid.push_back(a.id);
  const double resid = residual_share(h.stats, o_.rank);
  const int V = ctx_.model().cfg.n_vocab;
  std::uniform_real_distribution<double> uni(0, 1);
  for (const std::string& kind : o_.compositions) {
    KAMERA_ASSIGN_OR_RETURN(const auto n, compose(kind, g, avoid));
    ChunkKV truth;
    KAMERA_ASSIGN_OR_RETURN(const auto ref, reprefill(n, g.segment, g.query, &truth));
    KAMERA_ASSIGN_OR_RETURN(const auto new_keys, centroid(n));
    const std::vector<Antecedent> now = antecedents(n);
    const double ctxd = context_distance(stored, now);
    const double near = context_distance(stored, now, kNearDecay);
    const double key = centroid_distance(old_keys, new_keys);
    struct ArmDef {
      const char* name;
      const CanonicalEntry* entry;
      const Patch* patch;
      const ChunkKV* rows;
      double residual;
    };
    for (const ArmDef& a : {ArmDef{"rows", &h.occurrence, nullptr, &h.occurrence.kv, 0.0},
                            ArmDef{"patch", h.canon.get(), &h.patch, &h.patched, resid},
                            ArmDef{"blind", h.canon.get(), nullptr, &h.canon->kv, 0.0}}) {
      KAMERA_ASSIGN_OR_RETURN(const auto l, served(n, *a.entry, a.patch, g.query));
      EstimateCase c{gi, kind, a.name, mean_kl_rows(ref, l, V), {}};
      c.estimates = {ctxd,
                     near,
                     h.sens_canon,
                     h.sens_deep,
                     h.sens_pair,
                     ctxd * h.sens_canon,
                     ctxd * h.sens_deep,
                     ctxd * h.sens_pair,
                     near * h.sens_canon,
                     a.residual,
                     key,
                     estimate_row_change(stored, now, h.sens_canon, a.residual),
                     relative_distance(*a.rows, truth, 0),
                     uni(rng_)};
      out.push_back(std::move(c));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<EstimateResult> run_estimate_bench(Context& ctx, const std::vector<EstimateGroup>& groups,
                                          const std::vector<ChunkContent>& pool,
                                          const EstimateOptions& o) {
  if (groups.empty()) return make_error(ErrorCode::InvalidArgument, "estimate: no groups");
  if (pool.empty()) return make_error(ErrorCode::InvalidArgument, "estimate: an empty chunk pool");
  Runner run(ctx, pool, o);
  EstimateResult r;
  for (size_t i = 0; i < groups.size(); ++i) {
    KAMERA_TRY(run.group(int(i), groups[i], r.cases));
    if (o.progress) o.progress(int(i + 1), int(groups.size()));
  }
  r.rows = summarize_estimates(r.cases, o);
  r.arms = arm_totals(r.cases, o);
  r.notes = run.notes;
  return r;
}

}  // namespace kamera
