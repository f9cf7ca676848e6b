#include "bench/window_bench.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "core/clock.h"
#include "eval/metrics.h"
#include "eval/scoreboard.h"
#include "model/sampler.h"
#include "window/window.h"

namespace kamera {

namespace {

// One table of a scenario (e.g. recall at tau=0.6): a scoreboard of its arms against re-prefill.
struct Group {
  std::string scenario, name, eta_base;
  Scoreboard board;
};

// The orderings of K antecedents a reorder item is measured on: all K! of them, or `samples`
// distinct ones (the given order first).
std::vector<std::vector<int>> orderings_of(int K, int samples, std::mt19937& rng) {
  std::vector<std::vector<int>> out;
  std::vector<int> perm(K);
  std::iota(perm.begin(), perm.end(), 0);
  double total = 1;
  for (int j = 2; j <= K; ++j) total *= j;
  if (total <= samples) {
    do out.push_back(perm);
    while (std::next_permutation(perm.begin(), perm.end()));
    return out;
  }
  std::set<std::vector<int>> seen = {perm};
  out.push_back(perm);
  while (int(out.size()) < samples) {
    std::shuffle(perm.begin(), perm.end(), rng);
    if (seen.insert(perm).second) out.push_back(perm);
  }
  return out;
}

class Bench {
 public:
  Bench(Context& ctx, const WindowBenchOptions& o)
      : ctx_(ctx), m_(ctx.model()), pool_(ctx.pool()), opts_(o), rng_(uint32_t(o.seed)) {}

  // The context's cache with an empty store: every measurement starts cold.
  ChunkCache& fresh_cache() {
    ctx_.clear_store();
    return ctx_.cache();
  }
  int V() const { return m_.cfg.n_vocab; }

  PatchOptions patch_opts(int rank, int n_tokens) const {
    PatchOptions po;
    (void)n_tokens;
    po.rank = rank;
    po.cap_rank = true;  // capped at min(n, width) of each (layer, channel)
    po.head_dim = m_.cfg.head_dim;
    return po;
  }

  // Logits of q after [anchor][chunks] with every chunk forwarded (the re-prefill reference);
  // optionally the KV rows of chunk `capture` (its conditioned KV).
  Result<std::vector<float>> reprefill(const std::vector<ChunkContent>& chunks,
                                       const ChunkContent& q, int capture = -1,
                                       ChunkKV* captured = nullptr, double* ms = nullptr) {
    ChunkCache& cc = ctx_.cache();
    ScopedSequence s(pool_);
    KAMERA_TRY(cc.append_anchor(s.id()));
    int32_t pos = cc.anchor_extent();
    const double t0 = now_ms();
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int first = pool_.n_tokens(s.id());
      if (auto r = cc.forward_chunk(s.id(), chunks[i], pos); !r.ok()) return r.error();
      if (int(i) == capture && captured)
        *captured = read_chunk_kv(pool_, s.id(), first, chunks[i].n());
      pos += chunks[i].extent();
    }
    if (ms) *ms = now_ms() - t0;
    return cc.forward_chunk(s.id(), q, pos, LogitsMode::All);
  }

  // Logits of q after an exact prefix [anchor][prefix chunks], then `c` served from its canonical
  // (+ patch), then q. ms: time to place c.
  Result<std::vector<float>> served(const std::vector<ChunkContent>& prefix,
                                    const CanonicalEntry& c, const Patch* patch,
                                    const ChunkContent& q, double* ms = nullptr) {
    ChunkCache& cc = ctx_.cache();
    ScopedSequence s(pool_);
    KAMERA_TRY(cc.append_anchor(s.id()));
    int32_t pos = cc.anchor_extent();
    for (const auto& p : prefix) {
      if (auto r = cc.forward_chunk(s.id(), p, pos); !r.ok()) return r.error();
      pos += p.extent();
    }
    const double t0 = now_ms();
    KAMERA_TRY(cc.append_chunk(s.id(), c, patch, pos));
    if (ms) *ms = now_ms() - t0;
    return cc.forward_chunk(s.id(), q, pos + c.content.extent(), LogitsMode::All);
  }

  // Scores an arm's logits on measurement m; ms: the operation's time, bytes: stored state used.
  void score(Group& g, int m, const std::string& arm, int rank, const std::vector<float>& ref,
             const std::vector<float>& logits, double ms = NAN, double bytes = 0) {
    ArmRecord& a = g.board.arm({arm, rank, {}});
    g.board.score(a, m, ref, logits, V());
    if (!std::isnan(ms)) a.ms.push_back(ms);
    ArmCost c;
    c.kv_bytes = bytes;
    a.add_cost(c);
  }
  // A new measurement of item `item` whose reference logits are `ref`.
  int reference(Group& g, int item, const std::vector<float>& ref) {
    MeasurementInfo m;
    m.item = item;
    m.ref_argmax = argmax(std::span<const float>(ref).subspan(ref.size() - V()));
    return g.board.add_measurement(m);
  }
  void reprefill_time(Group& g, double ms) { g.board.arm({"reprefill", 0, {}}).ms.push_back(ms); }

  Status slide(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pool_chunks);
  Status reorder(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pool_chunks);
  Status recall(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pool_chunks);

  std::deque<Group> groups;  // a deque: references stay valid as groups are added
  std::vector<std::string> notes;

 private:
  Group& group(const std::string& scenario, const std::string& name, const std::string& base) {
    for (auto& g : groups)
      if (g.scenario == scenario && g.name == name) return g;
    groups.push_back({scenario, name, base, {}});
    return groups.back();
  }
  // A random chunk of the pool that is none of `avoid` (by id).
  ChunkContent pick(const std::vector<ChunkContent>& pool, std::vector<ChunkId>& used, int cap) {
    for (;;) {
      const ChunkContent c = truncated(pool[rng_() % pool.size()], cap);
      const ChunkId id = ctx_.cache().id_of(c);
      if (std::find(used.begin(), used.end(), id) == used.end()) {
        used.push_back(id);
        return c;
      }
    }
  }
  int cap_for(int n_chunks, const ChunkContent& q) const {
    return (m_.cfg.ctx_len - 1 - q.n()) / n_chunks;
  }

  Context& ctx_;
  const Model& m_;
  KvPool& pool_;
  const WindowBenchOptions& opts_;
  std::mt19937 rng_;
};

Status Bench::slide(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pc) {
  Group& g = group("slide", "head evicted", "keep");
  for (size_t i = 0; i < items.size(); ++i) {
    ChunkCache& cc = fresh_cache();
    const ChunkContent q = items[i].query;
    const int cap = cap_for(3, q);
    if (cap < 2) {
      notes.push_back("slide: the model's context is too short for a 3-chunk window");
      return Status::Ok();
    }
    const ChunkContent a = truncated(items[i].antecedent, cap), b = truncated(items[i].chunk, cap);
    std::vector<ChunkId> used = {cc.id_of(a), cc.id_of(b)};
    const ChunkContent x = pick(pc, used, cap);
    WindowPolicy exact;
    exact.rank = kFullRank;
    auto w = Window::create(ctx_, exact);
    if (!w.ok()) return w.error();
    for (const auto& c : {x, a, b}) KAMERA_TRY((*w)->admit_back(c));
    double t0 = now_ms();
    KAMERA_TRY((*w)->evict_front());
    const double slide_ms = now_ms() - t0;
    double rp_ms = 0;
    auto ref = reprefill({a, b}, q, -1, nullptr, &rp_ms);
    if (!ref.ok()) return ref.error();
    const int m = reference(g, int(i), *ref);
    reprefill_time(g, rp_ms);
    auto keep = (*w)->query(q);
    if (!keep.ok()) return keep.error();
    score(g, m, "keep", 0, *ref, *keep, slide_ms);
    // blind survivors: both canonical at the same positions
    {
      ScopedSequence s(pool_);
      ServeOptions so;
      so.policy = ServePolicy::Blind;
      auto rep = cc.assemble(s.id(), std::vector<ChunkContent>{a, b}, so);
      if (!rep.ok()) return rep.error();
      auto l = cc.forward_chunk(s.id(), q, rep->next_position, LogitsMode::All);
      if (!l.ok()) return l.error();
      score(g, m, "blind", 0, *ref, *l);
    }
    // removal patch: current rows -> rows of a re-prefill without the evicted chunk
    const std::vector<ChunkContent> ab = {a, b};
    auto target = cc.conditioned(ab);
    if (!target.ok()) return target.error();
    std::vector<ChunkKV> current;
    for (int s = 0; s < 2; ++s)
      current.push_back(read_chunk_kv(pool_, (*w)->sequence(), (*w)->token_index(s), ab[s].n()));
    for (int r : opts_.removal_ranks) {
      auto f = (*w)->fork();
      if (!f.ok()) return f.error();
      double bytes = 0, ms = 0;
      for (int s = 0; s < 2; ++s) {
        auto p = form_patch((*target)[s], current[s], patch_opts(r, ab[s].n()));
        if (!p.ok()) return p.error();
        bytes += double(p->bytes());
        const int idx = (*f)->token_index(s);
        KAMERA_TRY(pool_.make_writable((*f)->sequence(), idx, idx + ab[s].n()));
        std::vector<float> scratch;
        t0 = now_ms();
        write_patched_rows(current[s], &p.value(), pool_, (*f)->sequence(), idx, scratch);
        ms += now_ms() - t0;
      }
      auto l = (*f)->query(q);
      if (!l.ok()) return l.error();
      score(g, m, "removal_patch", r, *ref, *l, ms, bytes);
    }
    if (opts_.progress) opts_.progress("slide", int(i + 1), int(items.size()));
  }
  return Status::Ok();
}

Status Bench::reorder(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pc) {
  for (int K : opts_.reorder_k) {
    const std::string gname = fmt::format("K={}", K);
    int done = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      ChunkCache& cc = fresh_cache();
      const ChunkContent q = items[i].query;
      const int cap = cap_for(K + 1, q);
      if (cap < 2) {
        notes.push_back(fmt::format("reorder K={}: the model's context is too short", K));
        break;
      }
      Group& g = group("reorder", gname, "blind");
      const ChunkContent B = truncated(items[i].chunk, cap);
      std::vector<ChunkContent> P = {truncated(items[i].antecedent, cap)};
      std::vector<ChunkId> used = {cc.id_of(B), cc.id_of(P[0])};
      while (int(P.size()) < K) P.push_back(pick(pc, used, cap));
      const auto orderings = orderings_of(K, opts_.reorder_samples, rng_);
      auto canon = cc.canonical(B);
      if (!canon.ok()) return canon.error();
      std::vector<ChunkKV> conds(orderings.size());
      std::vector<std::vector<float>> refs(orderings.size());
      std::vector<std::vector<ChunkContent>> prefixes;
      prefixes.reserve(orderings.size());
      for (size_t o = 0; o < orderings.size(); ++o) {
        prefixes.emplace_back();
        for (int j : orderings[o]) prefixes.back().push_back(P[j]);
        std::vector<ChunkContent> all = prefixes[o];
        all.push_back(B);
        auto r = reprefill(all, q, K, &conds[o]);
        if (!r.ok()) return r.error();
        refs[o] = std::move(r.value());
      }
      const PatchOptions po = patch_opts(opts_.rank, B.n());
      auto transfer = form_patch(conds[0], (*canon)->kv, po);  // the stored given-order patch
      if (!transfer.ok()) return transfer.error();
      for (size_t o = 0; o < orderings.size(); ++o) {
        const int m = reference(g, int(i), refs[o]);
        auto exact = form_patch(conds[o], (*canon)->kv, po);
        if (!exact.ok()) return exact.error();
        std::vector<const ChunkKV*> others;
        for (size_t j = 0; j < orderings.size(); ++j)
          if (j != o) others.push_back(&conds[j]);
        auto orbit = form_patch_mean(others, (*canon)->kv, po);  // test ordering held out
        if (!orbit.ok()) return orbit.error();
        struct ArmDef {
          const char* name;
          const Patch* patch;
        };
        for (const ArmDef& a : {ArmDef{"blind", nullptr}, ArmDef{"transfer", &transfer.value()},
                                ArmDef{"exact", &exact.value()}, ArmDef{"orbit", &orbit.value()}}) {
          double ms = 0;
          auto l = served(prefixes[o], **canon, a.patch, q, &ms);
          if (!l.ok()) return l.error();
          score(g, m, a.name, a.patch ? opts_.rank : 0, refs[o], *l, ms,
                a.patch ? double(a.patch->bytes()) : 0);
        }
      }
      if (opts_.progress) opts_.progress(fmt::format("reorder K={}", K), ++done, int(items.size()));
    }
  }
  return Status::Ok();
}

Status Bench::recall(const std::vector<ReuseItem>& items, const std::vector<ChunkContent>& pc) {
  const int k = opts_.window_chunks;
  for (size_t i = 0; i < items.size(); ++i) {
    ChunkCache& cc = fresh_cache();
    const ChunkContent q = items[i].query;
    const int cap = cap_for(k + 1, q);
    if (cap < 2) {
      notes.push_back(fmt::format("recall: a window of {} chunks does not fit the context", k));
      return Status::Ok();
    }
    const ChunkContent c = truncated(items[i].chunk, cap);
    std::vector<ChunkId> used = {cc.id_of(c)};
    std::vector<ChunkContent> W0;
    for (int j = 0; j + 1 < k; ++j) W0.push_back(pick(pc, used, cap));
    W0.push_back(truncated(items[i].antecedent, cap));
    used.push_back(cc.id_of(W0.back()));
    std::vector<ChunkContent> fresh_in;  // chunks that arrive as the window turns over
    for (int j = 0; j < k; ++j) fresh_in.push_back(pick(pc, used, cap));
    auto canon = cc.canonical(c);
    if (!canon.ok()) return canon.error();
    const PatchOptions po = patch_opts(opts_.rank, c.n());
    ChunkKV cond0;
    {
      std::vector<ChunkContent> all = W0;
      all.push_back(c);
      auto cd = cc.conditioned(all);
      if (!cd.ok()) return cd.error();
      cond0 = std::move(cd->back());
    }
    auto stale = form_patch(cond0, (*canon)->kv, po);  // frozen at eviction
    if (!stale.ok()) return stale.error();
    for (int r = 0; r <= k; ++r) {  // r chunks of the window replaced: turnover r / k
      std::vector<ChunkContent> W1(W0.begin() + r, W0.end());
      for (int j = 0; j < r; ++j) W1.push_back(fresh_in[j]);
      Group& g = group("recall", fmt::format("tau={:.2f}", double(r) / k), "blind");
      std::vector<ChunkContent> all = W1;
      all.push_back(c);
      ChunkKV cond1;
      double rp_ms = 0;
      auto ref = reprefill(all, q, k, &cond1, &rp_ms);
      if (!ref.ok()) return ref.error();
      const int m = reference(g, int(i), *ref);
      auto fresh = form_patch(cond1, (*canon)->kv, po);
      if (!fresh.ok()) return fresh.error();
      reprefill_time(g, rp_ms);
      struct ArmDef {
        const char* name;
        const Patch* patch;
      };
      for (const ArmDef& a : {ArmDef{"blind", nullptr}, ArmDef{"stale", &stale.value()},
                              ArmDef{"fresh", &fresh.value()}}) {
        double ms = 0;
        auto l = served(W1, **canon, a.patch, q, &ms);
        if (!l.ok()) return l.error();
        score(g, m, a.name, a.patch ? opts_.rank : 0, *ref, *l, ms,
              a.patch ? double(a.patch->bytes()) : 0);
      }
    }
    if (opts_.progress) opts_.progress("recall", int(i + 1), int(items.size()));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// A table row from an arm's record: eta against the group's base arm, flip-recover against blind.
WindowArm window_arm(const Group& g, const ArmRecord& a) {
  WindowArm w;
  w.scenario = g.scenario;
  w.group = g.name;
  w.name = a.key.name;
  w.rank = a.key.rank;
  w.ms = a.ms.empty() ? NAN : median(a.ms);
  if (a.key.name == "reprefill") {  // the reference itself: timed, not scored
    w.n = int(g.board.measurements().size());
    w.kl = 0;
    w.eta = 1;
    w.argmax_agree = 1;
    return w;
  }
  const ArmStats s =
      summarize(g.board, a, g.board.find({g.eta_base, 0, {}}), g.board.find({"blind", 0, {}}));
  w.n = s.n;
  w.kl = s.kl;
  w.eta = s.eta;
  w.flip_recover = s.flip_recover;
  w.argmax_agree = s.argmax_agree;
  w.bytes = a.kl.empty() ? 0 : a.cost.kv_bytes / double(a.kl.size());
  return w;
}

}  // namespace

int64_t window_bench_kv_tokens(const Model& model) {
  return 12 * (int64_t(model.cfg.ctx_len) + 128);
}

Result<WindowBenchResult> run_window_bench(Context& ctx, const std::vector<ReuseItem>& all_items,
                                           const WindowBenchOptions& opts) {
  std::vector<ReuseItem> items = all_items;
  if (opts.max_items > 0 && int(items.size()) > opts.max_items) items.resize(opts.max_items);
  if (items.size() < 2)
    return make_error(ErrorCode::InvalidArgument, "window-bench needs at least 2 items");
  std::vector<ChunkContent> chunk_pool;
  for (const auto& it : all_items) {
    chunk_pool.push_back(it.antecedent);
    chunk_pool.push_back(it.chunk);
  }
  Bench b(ctx, opts);
  for (const std::string& s : opts.scenarios) {
    Status st = s == "slide"     ? b.slide(items, chunk_pool)
                : s == "reorder" ? b.reorder(items, chunk_pool)
                : s == "recall"
                    ? b.recall(items, chunk_pool)
                    : Status(make_error(ErrorCode::InvalidArgument,
                                        "unknown scenario '{}' (slide, reorder, recall)", s));
    if (!st.ok()) return st.error();
  }
  WindowBenchResult res;
  res.notes = b.notes;
  for (const Group& g : b.groups)
    for (const ArmRecord& a : g.board.arms()) res.arms.push_back(window_arm(g, a));
  return res;
}

nlohmann::json window_bench_json(const WindowBenchResult& r) {
  using nlohmann::json;
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  json arms = json::array();
  for (const auto& a : r.arms)
    arms.push_back({{"scenario", a.scenario},
                    {"group", a.group},
                    {"name", a.name},
                    {"rank", a.rank == kFullRank ? json("full")
                             : a.rank == 0       ? json(nullptr)
                                                 : json(a.rank)},
                    {"n", a.n},
                    {"kl", a.kl},
                    {"eta", num(a.eta)},
                    {"flip_recover", num(a.flip_recover)},
                    {"argmax_agree", a.argmax_agree},
                    {"ms", num(a.ms)},
                    {"bytes", a.bytes}});
  return json{{"arms", arms}, {"notes", r.notes}};
}

}  // namespace kamera
