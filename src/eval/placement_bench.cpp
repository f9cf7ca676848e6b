#include "eval/placement_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/clock.h"
#include "eval/metrics.h"
#include "eval/placement_trace.h"
#include "model/sampler.h"

namespace kamera {

namespace {

// Sums of one (trace, policy) run; divided by the questions at the end.
struct Tally {
  double forms = 0, form_tokens = 0, hits = 0, patched = 0, ttft = 0, reprefill = 0;
  double kl_same = 0, kl_blind = 0, kl_arrival = 0, agree_same = 0, agree_arrival = 0;
  double reordered = 0;
};

class Runner {
 public:
  Runner(Context& ctx, std::vector<ChunkContent> chunks, std::vector<ChunkContent> queries,
         const PlacementOptions& o)
      : ctx_(ctx),
        cc_(ctx.cache()),
        pool_(ctx.pool()),
        chunks_(std::move(chunks)),
        queries_(std::move(queries)),
        o_(o) {}

  Result<PlacementRow> run(const std::string& trace_name, const Trace& trace,
                           const std::string& policy);

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
  Result<std::vector<float>> orbit_answer(const std::vector<ChunkContent>& cs,
                                          const ChunkContent& q, Tally& t);
  Status step(const std::vector<int>& arrival, const std::vector<int>& order, const ChunkContent& q,
              bool orbit, Tally& t);

  Context& ctx_;
  ChunkCache& cc_;
  KvPool& pool_;
  std::vector<ChunkContent> chunks_, queries_;
  const PlacementOptions& o_;
};

// The trace's order, each chunk with the orbit patch of the set in front of it (one patch per
// (chunk, antecedent set), whatever their order; forming it runs one forward per averaged
// ordering). Counts forms, hits and forward tokens into t.
Result<std::vector<float>> Runner::orbit_answer(const std::vector<ChunkContent>& cs,
                                                const ChunkContent& q, Tally& t) {
  ScopedSequence s(pool_);
  KAMERA_TRY(cc_.place_anchor(s.id()));
  int32_t pos = cc_.anchor_extent();
  int tokens = int(cc_.anchor().size());
  for (size_t i = 0; i < cs.size(); ++i) {
    auto canon = cc_.canonical(cs[i]);
    if (!canon.ok()) return canon.error();
    std::shared_ptr<const PatchEntry> patch;
    if (i > 0) {
      const int64_t misses = ctx_.store().stats().patch_misses;
      auto p = cc_.orbit_patch(std::span(cs).first(i), cs[i], patch_options(), o_.orbit_orderings);
      if (!p.ok()) return p.error();
      patch = *p;
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
    }
    KAMERA_TRY(cc_.place(s.id(), **canon, patch ? &patch->patch : nullptr, pos));
    pos += cs[i].extent();
    tokens += cs[i].n();
  }
  return last_logits(s.id(), q, pos);
}

// One question: served in `order` (patches formed on a miss), scored against re-prefills of the
// served order and of the trace's order, and against canonicals only (blind) in the served order.
Status Runner::step(const std::vector<int>& arrival, const std::vector<int>& order,
                    const ChunkContent& q, bool orbit, Tally& t) {
  const auto cs = contents(order);
  ServeReport rep;
  double t0 = now_ms();
  auto served = orbit ? orbit_answer(cs, q, t) : answer(cs, q, ServePolicy::Patch, &rep);
  if (!served.ok()) return served.error();
  t.ttft += now_ms() - t0;
  for (const auto& seg : rep.segments) {
    if (seg.source == SegmentSource::PatchFormed) {
      t.forms += 1;
      t.form_tokens += seg.first_token + seg.n_tokens;  // anchor + antecedents + the chunk
    }
    if (seg.source == SegmentSource::PatchFormed || seg.source == SegmentSource::PatchHit)
      t.patched += 1;
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

Result<PlacementRow> Runner::run(const std::string& trace_name, const Trace& trace,
                                 const std::string& policy) {
  ctx_.clear_store();
  ctx_.store().set_patch_budget(o_.patch_budget ? o_.patch_budget : SIZE_MAX);
  // Canonicals are formed once per chunk whatever the policy: form them before timing anything.
  for (const auto& c : chunks_)
    if (auto r = cc_.canonical(c); !r.ok()) return r.error();
  const bool orbit = policy == "orbit";
  Placer placer(orbit ? "arrival" : policy, trace);
  Tally t;
  for (size_t s = 0; s < trace.size(); ++s) {
    const auto order = placer.order(trace[s]);
    KAMERA_TRY(step(trace[s], order, queries_[s % queries_.size()], orbit, t));
    placer.served(order);
    if (o_.progress) o_.progress(trace_name, policy, int(s + 1), int(trace.size()));
  }
  const double n = double(trace.size());
  PlacementRow r;
  r.trace = trace_name;
  r.policy = policy;
  r.questions = int(trace.size());
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
  Runner runner(ctx, chunks, queries, o);
  std::mt19937 rng(uint32_t(o.seed));
  for (const auto& tname : o.traces) {
    const Trace trace = make_trace(tname, o.steps, o.set_size, o.pool_chunks, rng);
    for (const auto& p : o.policies) {
      auto row = runner.run(tname, trace, p);
      if (!row.ok()) return row.error();
      res.rows.push_back(*row);
    }
  }
  res.notes.push_back(fmt::format("{} chunks of at most {} tokens, {} per question, rank {}",
                                  o.pool_chunks, cap, o.set_size, o.rank));
  return res;
}

nlohmann::json placement_bench_json(const PlacementResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
  for (const auto& w : r.rows)
    rows.push_back({{"trace", w.trace},
                    {"policy", w.policy},
                    {"questions", w.questions},
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
