#include "bench/placement_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <unordered_map>

#include "bench/placement_trace.h"
#include "core/clock.h"
#include "eval/metrics.h"
#include "model/sampler.h"

namespace kamera {

namespace {

// Sums of one (trace, policy) run; divided by the questions at the end.
struct Tally {
  double forms = 0, form_tokens = 0, hits = 0, patched = 0, ttft = 0, reprefill = 0;
  double planned_blind = 0, rank_sum = 0, ranked = 0;  // ranked: patches whose rank is known
  double kl_same = 0, kl_blind = 0, kl_arrival = 0, agree_same = 0, agree_arrival = 0;
  double reordered = 0;
};

// Squared Frobenius norm of a chunk's KV (every layer and channel).
double sq_norm(const ChunkKV& kv) {
  double s = 0;
  std::vector<float> row;
  for (const auto& b : kv.blocks) {
    row.resize(size_t(b.cols()));
    for (int i = 0; i < b.rows(); ++i) {
      b.get_row(i, row.data());
      for (float x : row) s += double(x) * x;
    }
  }
  return s;
}

// A patch's energy ||U_m S_m V_m^T||^2 = sum of sigma_i^2, read off the stored factors (column i of
// U_m S_m has norm sigma_i), and the smallest rank r whose first r components over all factors
// hold `share` of it.
struct PatchEnergy {
  double total = 0;
  int rank_for_share = 0;
};
PatchEnergy patch_energy(const Patch& p, double share) {
  int max_rank = 0;
  for (const auto& f : p.factors) max_rank = std::max(max_rank, f.rank);
  std::vector<double> by_rank(size_t(max_rank), 0.0);
  std::vector<float> row;
  for (const auto& f : p.factors) {
    row.resize(size_t(f.rank));
    for (int i = 0; i < f.rows; ++i) {
      f.us.get_row(i, row.data());
      for (int j = 0; j < f.rank; ++j)
        by_rank[size_t(j)] += double(row[size_t(j)]) * row[size_t(j)];
    }
  }
  PatchEnergy e;
  for (double x : by_rank) e.total += x;
  double kept = 0;
  for (double x : by_rank) {
    if (e.rank_for_share > 0 && kept >= share * e.total) break;
    kept += x;
    ++e.rank_for_share;
  }
  return e;
}

// What the adaptive plan learned about one chunk from the patches formed for it.
struct ChunkProfile {
  std::vector<double> rel_energy;  // ||patch||^2 / ||canonical||^2 of each formed patch
  int rank = 0;                    // planned rank (0: not yet planned)
  double median() const {
    std::vector<double> v = rel_energy;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
};

class PlacementRunner {
 public:
  PlacementRunner(Context& ctx, std::vector<ChunkContent> chunks, std::vector<ChunkContent> queries,
                  const PlacementOptions& o)
      : ctx_(ctx),
        cc_(ctx.cache()),
        pool_(ctx.pool()),
        chunks_(std::move(chunks)),
        queries_(std::move(queries)),
        o_(o) {}

  Result<PlacementRow> run(const std::string& trace_name, const Trace& trace,
                           const std::string& policy, const std::string& plan);

 private:
  std::vector<ChunkContent> contents(const std::vector<int>& order) const {
    std::vector<ChunkContent> out;
    for (int c : order) out.push_back(chunks_[c]);
    return out;
  }
  Result<std::vector<float>> last_logits(SeqId seq, const ChunkContent& q, int32_t pos) {
    auto l = cc_.forward_chunk(seq, q, pos, LogitsMode::Last);
    if (!l.ok()) return l.error();
    const int V = ctx_.model().cfg.n_vocab;
    return std::vector<float>(l->end() - V, l->end());
  }
  // Logits after [anchor][chunks][q] served under `policy` (Reprefill forwards every chunk).
  Result<std::vector<float>> answer(const std::vector<ChunkContent>& cs, const ChunkContent& q,
                                    ServePolicy policy, ServeReport* rep = nullptr) {
    ScopedSequence s(pool_);
    ServeOptions so;
    so.policy = policy;
    so.patch = patch_options();
    auto r = cc_.assemble(s.id(), cs, so);
    if (!r.ok()) return r.error();
    if (rep) *rep = *r;
    return last_logits(s.id(), q, r->next_position);
  }
  PatchOptions patch_options() const {
    PatchOptions po;
    po.rank = o_.rank;
    po.cap_rank = true;
    po.head_dim = ctx_.model().cfg.head_dim;
    return po;
  }
  using PatchResult = Result<std::shared_ptr<const PatchEntry>>;
  using SlotPatch = std::function<PatchResult(size_t, const CanonicalEntry&, int)>;
  Result<std::vector<float>> serve_by_slot(const std::vector<ChunkContent>& cs,
                                           const ChunkContent& q, const SlotPatch& pick);
  Result<std::vector<float>> orbit_answer(const std::vector<ChunkContent>& cs,
                                          const ChunkContent& q, Tally& t);
  PatchKey fixed_key(const std::vector<ChunkContent>& cs, size_t i) const {
    std::vector<ChunkId> ids;
    for (size_t j = 0; j < i; ++j) ids.push_back(cc_.id_of(cs[j]));
    return PatchKey::make(cc_.id_of(cs[i]), ids, patch_options());
  }
  Result<std::vector<float>> planned_answer(const std::vector<ChunkContent>& cs,
                                            const ChunkContent& q, Tally& t);
  Status step(const std::vector<int>& arrival, const std::vector<int>& order, const ChunkContent& q,
              const std::string& mode, Tally& t);

  Context& ctx_;
  ChunkCache& cc_;
  KvPool& pool_;
  std::vector<ChunkContent> chunks_, queries_;
  const PlacementOptions& o_;
  std::unordered_map<ChunkId, ChunkProfile, ChunkIdHash> profiles_;  // adaptive plan, per run
};

// Serves [anchor][cs...][q] chunk by chunk: each chunk's canonical, with the patch that
// `pick(i, canonical, tokens in front)` returns for slot i > 0 (null: blind).
Result<std::vector<float>> PlacementRunner::serve_by_slot(const std::vector<ChunkContent>& cs,
                                                          const ChunkContent& q,
                                                          const SlotPatch& pick) {
  ScopedSequence s(pool_);
  KAMERA_TRY(cc_.append_anchor(s.id()));
  int32_t pos = cc_.anchor_extent();
  int tokens = int(cc_.anchor().size());
  for (size_t i = 0; i < cs.size(); ++i) {
    auto canon = cc_.canonical(cs[i]);
    if (!canon.ok()) return canon.error();
    std::shared_ptr<const PatchEntry> patch;
    if (i > 0) {
      auto p = pick(i, **canon, tokens);
      if (!p.ok()) return p.error();
      patch = *p;
    }
    KAMERA_TRY(cc_.append_chunk(s.id(), **canon, patch ? &patch->patch : nullptr, pos));
    pos += cs[i].extent();
    tokens += cs[i].n();
  }
  return last_logits(s.id(), q, pos);
}

// The trace's order, each chunk with the orbit patch of the set in front of it (one patch per
// (chunk, antecedent set), whatever their order; forming it runs one forward per averaged
// ordering). Counts forms, hits and forward tokens into t.
Result<std::vector<float>> PlacementRunner::orbit_answer(const std::vector<ChunkContent>& cs,
                                                         const ChunkContent& q, Tally& t) {
  return serve_by_slot(cs, q, [&](size_t i, const CanonicalEntry&, int tokens) -> PatchResult {
    const int64_t misses = ctx_.store().stats().patch_misses;
    auto p = cc_.orbit_patch(std::span(cs).first(i), cs[i], patch_options(), o_.orbit_orderings);
    if (!p.ok()) return p.error();
    t.patched += 1;
    if (ctx_.store().stats().patch_misses == misses) {
      t.hits += 1;
    } else {
      double orderings = 1;
      for (size_t j = 2; j <= i; ++j) orderings *= double(j);
      orderings = std::min(orderings, double(o_.orbit_orderings));
      t.forms += orderings;
      t.form_tokens += orderings * (tokens + cs[i].n());
    }
    return *p;
  });
}

// The adaptive plan (see placement_bench.h): blind when the chunk's patches have carried little
// energy, else its stored patch at the planned rank (formed on a miss, and then learned from).
Result<std::vector<float>> PlacementRunner::planned_answer(const std::vector<ChunkContent>& cs,
                                                           const ChunkContent& q, Tally& t) {
  return serve_by_slot(cs, q,
                       [&](size_t i, const CanonicalEntry& canon, int tokens) -> PatchResult {
                         ChunkProfile& prof = profiles_[canon.id];
                         if (!prof.rel_energy.empty() && prof.median() < o_.plan_blind) {
                           t.planned_blind += 1;
                           return std::shared_ptr<const PatchEntry>();
                         }
                         PatchOptions po = patch_options();
                         std::shared_ptr<const PatchEntry> patch;
                         if (prof.rank > 0) {
                           po.rank = prof.rank;
                           // The chunk's first patch behind this very prefix was formed at the
                           // fixed rank: reuse it.
                           patch = ctx_.store().find_patch(fixed_key(cs, i));
                         }
                         const int64_t misses = ctx_.store().stats().patch_misses;
                         if (!patch) {
                           auto p = cc_.patch(std::span(cs).first(i), cs[i], po);
                           if (!p.ok()) return p.error();
                           patch = *p;
                         }
                         t.patched += 1;
                         if (ctx_.store().stats().patch_misses == misses) {
                           t.hits += 1;
                         } else {
                           t.forms += 1;
                           t.form_tokens += tokens + cs[i].n();
                           const PatchEnergy e = patch_energy(patch->patch, o_.plan_energy);
                           prof.rel_energy.push_back(e.total / std::max(sq_norm(canon.kv), 1e-30));
                           if (prof.rank == 0) prof.rank = std::max(1, e.rank_for_share);
                         }
                         int rank = 0;
                         for (const auto& f : patch->patch.factors) rank = std::max(rank, f.rank);
                         t.rank_sum += rank, t.ranked += 1;
                         return patch;
                       });
}

// One question: served in `order` (patches formed on a miss), scored against re-prefills of the
// served order and of the trace's order, and against canonicals only (blind) in the served order.
Status PlacementRunner::step(const std::vector<int>& arrival, const std::vector<int>& order,
                             const ChunkContent& q, const std::string& mode, Tally& t) {
  const auto cs = contents(order);
  ServeReport rep;
  double t0 = now_ms();
  auto served = mode == "orbit"      ? orbit_answer(cs, q, t)
                : mode == "adaptive" ? planned_answer(cs, q, t)
                                     : answer(cs, q, ServePolicy::Patch, &rep);
  if (!served.ok()) return served.error();
  t.ttft += now_ms() - t0;
  for (const auto& seg : rep.segments) {
    if (seg.source == SegmentSource::PatchFormed) {
      t.forms += 1;
      t.form_tokens += seg.first_token + seg.n_tokens;  // anchor + antecedents + the chunk
    }
    if (seg.source == SegmentSource::PatchFormed || seg.source == SegmentSource::PatchHit) {
      t.patched += 1;
      // A full-rank patch's rank is each block's own (not reported): left out of mean_rank.
      if (o_.rank != kFullRank) t.rank_sum += o_.rank, t.ranked += 1;
    }
    if (seg.source == SegmentSource::PatchHit) t.hits += 1;
  }
  t0 = now_ms();
  auto same = answer(cs, q, ServePolicy::Reprefill);
  if (!same.ok()) return same.error();
  t.reprefill += now_ms() - t0;
  auto blind = answer(cs, q, ServePolicy::Blind);
  if (!blind.ok()) return blind.error();
  auto arr = order == arrival ? same : answer(contents(arrival), q, ServePolicy::Reprefill);
  if (!arr.ok()) return arr.error();
  t.kl_same += kl_from_logits(*same, *served);
  t.kl_blind += kl_from_logits(*same, *blind);
  t.kl_arrival += kl_from_logits(*arr, *served);
  const int32_t a = argmax(std::span<const float>(*served));
  t.agree_same += a == argmax(std::span<const float>(*same));
  t.agree_arrival += a == argmax(std::span<const float>(*arr));
  t.reordered += order != arrival;
  return Status::Ok();
}

Result<PlacementRow> PlacementRunner::run(const std::string& trace_name, const Trace& trace,
                                          const std::string& policy, const std::string& plan) {
  ctx_.clear_store();
  profiles_.clear();
  ctx_.store().set_patch_budget(o_.patch_budget ? o_.patch_budget : SIZE_MAX);
  // Canonicals are formed once per chunk whatever the policy: form them before timing anything.
  for (const auto& c : chunks_)
    if (auto r = cc_.canonical(c); !r.ok()) return r.error();
  const bool orbit = policy == "orbit";
  Placer placer(orbit ? "arrival" : policy, trace);
  Tally t;
  for (size_t s = 0; s < trace.size(); ++s) {
    const auto order = placer.order(trace[s]);
    KAMERA_TRY(step(trace[s], order, queries_[s % queries_.size()], orbit ? "orbit" : plan, t));
    placer.served(order);
    if (o_.progress) o_.progress(trace_name, policy, int(s + 1), int(trace.size()));
  }
  const double n = double(trace.size());
  PlacementRow r;
  r.trace = trace_name;
  r.policy = policy;
  r.plan = orbit ? "orbit" : plan;
  r.questions = int(trace.size());
  const double behind = n * double(o_.set_size - 1);  // chunks with another in front
  r.blind_share = t.planned_blind / behind;
  r.mean_rank = t.ranked > 0 ? t.rank_sum / t.ranked : NAN;
  r.forms_per_question = t.forms / n;
  r.form_tokens_per_question = t.form_tokens / n;
  r.hit_rate = t.patched > 0 ? t.hits / t.patched : NAN;
  r.patch_bytes = double(ctx_.store().stats().patch_bytes);
  r.ttft_ms = t.ttft / n;
  r.reprefill_ms = t.reprefill / n;
  r.kl_same = t.kl_same / n;
  r.kl_blind = t.kl_blind / n;
  r.kl_arrival = t.kl_arrival / n;
  r.agree_same = t.agree_same / n;
  r.agree_arrival = t.agree_arrival / n;
  r.reordered = t.reordered / n;
  return r;
}

Status check(const PlacementOptions& o) {
  for (const auto& t : o.traces)
    if (t != "reread" && t != "rerank" && t != "revisit")
      return make_error(ErrorCode::InvalidArgument, "placement: unknown trace '{}'", t);
  for (const auto& p : o.policies)
    if (p != "arrival" && p != "lru" && p != "online" && p != "offline" && p != "orbit")
      return make_error(ErrorCode::InvalidArgument, "placement: unknown policy '{}'", p);
  for (const auto& p : o.plans)
    if (p != "fixed" && p != "adaptive")
      return make_error(ErrorCode::InvalidArgument, "placement: unknown plan '{}'", p);
  if (o.plans.empty() || o.plan_energy <= 0 || o.plan_energy > 1 || o.plan_blind < 0)
    return make_error(ErrorCode::InvalidArgument,
                      "placement: need a plan, 0 < plan energy ({}) <= 1 and plan blind ({}) >= 0",
                      o.plan_energy, o.plan_blind);
  if (o.set_size < 2 || o.set_size > o.pool_chunks || o.steps < 1)
    return make_error(ErrorCode::InvalidArgument,
                      "placement: need 2 <= set size ({}) <= pool chunks ({}) and steps >= 1",
                      o.set_size, o.pool_chunks);
  return Status::Ok();
}

}  // namespace

int64_t placement_bench_kv_tokens(const Model& model) {
  return 4 * (int64_t(model.cfg.ctx_len) + 64);
}

Result<PlacementResult> run_placement_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                            const PlacementOptions& o) {
  KAMERA_TRY(check(o));
  std::vector<ChunkContent> chunks, queries;
  int longest_query = 0;
  for (const auto& it : items) {
    queries.push_back(it.query);
    longest_query = std::max(longest_query, it.query.n());
  }
  const int cap =
      (ctx.model().cfg.ctx_len - 1 - longest_query - int(ctx.cache().anchor().size())) / o.set_size;
  std::vector<ChunkId> seen;
  for (const auto& it : items)
    for (const auto* c : {&it.antecedent, &it.chunk}) {
      if (int(chunks.size()) == o.pool_chunks || c->n() == 0) continue;
      ChunkContent t = truncated(*c, cap);
      const ChunkId h = ctx.cache().id_of(t);
      if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
      seen.push_back(h);
      chunks.push_back(std::move(t));
    }
  if (cap < 2 || int(chunks.size()) < o.pool_chunks)
    return make_error(
        ErrorCode::InvalidArgument,
        "placement: the items give {} distinct chunks of at most {} tokens; {} needed",
        chunks.size(), cap, o.pool_chunks);
  PlacementResult res;
  PlacementRunner runner(ctx, chunks, queries, o);
  std::mt19937 rng(uint32_t(o.seed));
  for (const auto& tname : o.traces) {
    const Trace trace = make_trace(tname, o.steps, o.set_size, o.pool_chunks, rng);
    for (const auto& p : o.policies) {
      for (const auto& plan : o.plans) {
        if (p == "orbit" && plan != o.plans.front()) continue;  // orbit has its own plan
        auto row = runner.run(tname, trace, p, plan);
        if (!row.ok()) return row.error();
        res.rows.push_back(*row);
      }
    }
  }
  res.notes.push_back(fmt::format("{} chunks of at most {} tokens, {} per question, rank {}",
                                  o.pool_chunks, cap, o.set_size, o.rank));
  if (std::find(o.plans.begin(), o.plans.end(), "adaptive") != o.plans.end())
    res.notes.push_back(
        fmt::format("adaptive plan: blind below {} relative patch energy, rank "
                    "keeping {} of the first patch's energy",
                    o.plan_blind, o.plan_energy));
  return res;
}

nlohmann::json placement_bench_json(const PlacementResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
  for (const auto& w : r.rows)
    rows.push_back({{"trace", w.trace},
                    {"policy", w.policy},
                    {"plan", w.plan},
                    {"questions", w.questions},
                    {"blind_share", w.blind_share},
                    {"mean_rank", num(w.mean_rank)},
                    {"forms_per_question", w.forms_per_question},
                    {"form_tokens_per_question", w.form_tokens_per_question},
                    {"hit_rate", num(w.hit_rate)},
                    {"patch_bytes", w.patch_bytes},
                    {"ttft_ms", w.ttft_ms},
                    {"reprefill_ms", w.reprefill_ms},
                    {"kl_same", w.kl_same},
                    {"kl_blind", w.kl_blind},
                    {"kl_arrival", w.kl_arrival},
                    {"agree_same", w.agree_same},
                    {"agree_arrival", w.agree_arrival},
                    {"reordered", w.reordered}});
  return {{"scenario", "placement"}, {"rows", rows}, {"notes", r.notes}};
}

}  // namespace kamera
