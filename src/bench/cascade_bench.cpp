#include "bench/cascade_bench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "eval/metrics.h"

namespace kamera {

Result<double> probe_staleness(Context& ctx, const Window& w, int slot, int probe_tokens) {
  if (slot < 0 || slot >= int(w.slots().size()))
    return make_error(ErrorCode::InvalidArgument, "probe: no slot {}", slot);
  const WindowSlot& s = w.slots()[slot];
  const ChunkContent& c = s.canonical->content;
  if (!c.is_tokens())
    return make_error(ErrorCode::Unsupported, "probe: slot {} is not a token chunk", slot);
  const int p = std::clamp(probe_tokens, 1, c.n());
  const int begin = w.token_index(slot) + c.n() - p;
  KvPool& pool = ctx.pool();
  auto f = pool.fork(w.sequence());
  if (!f.ok()) return f.error();
  ScopedSequence fork(pool, *f);
  KAMERA_TRY(pool.truncate(fork.id(), begin));
  const auto tail = ChunkContent::from_tokens({c.tokens.end() - p, c.tokens.end()});
  auto r = ctx.cache().forward_chunk(fork.id(), tail, s.position + c.layout[c.n() - p].t);
  if (!r.ok()) return r.error();
  // Rows held by the window vs rows computed now, tokens [begin, begin + p), every layer/channel.
  const KvLayout& lay = pool.layout();
  double num = 0, den = 0;
  std::vector<float> held, now;
  for (int l = 0; l < lay.n_layers; ++l)
    for (int ch = 0; ch < int(lay.channels.size()); ++ch) {
      const int width = lay.channels[ch].width;
      held.resize(width);
      now.resize(width);
      for (int t = begin; t < begin + p; ++t) {
        pool.read_row(w.sequence(), l, ch, t, held.data());
        pool.read_row(fork.id(), l, ch, t, now.data());
        for (int i = 0; i < width; ++i) {
          num += double(held[i] - now[i]) * (held[i] - now[i]);
          den += double(now[i]) * now[i];
        }
      }
    }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

double antecedent_change_share(ChunkStore& store, const Window& w, int slot) {
  const auto& slots = w.slots();
  const WindowSlot& s = slots[slot];
  if (!s.conditioned || s.clean) return 0;
  std::vector<ChunkId> now;
  for (int i = 0; i < slot; ++i) now.push_back(slots[i].id);
  const auto& old = s.conditioned_on;
  auto has = [](const std::vector<ChunkId>& ids, const ChunkId& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  auto tokens = [&](const ChunkId& id) {
    auto c = store.find_canonical(id);
    return c ? double(c->content.n()) : 0.0;
  };
  double changed = 0, all = 0;  // tokens of the symmetric difference, of the union
  for (const auto& id : now) {
    all += tokens(id);
    if (!has(old, id)) changed += tokens(id);
  }
  for (const auto& id : old)
    if (!has(now, id)) {
      all += tokens(id);
      changed += tokens(id);
    }
  return all > 0 ? changed / all : 0.0;
}

namespace {

// Sums over the questions of one policy (one threshold).
struct Tally {
  double stale = 0, refreshes = 0, tokens = 0, kl = 0;
};

class CascadeRunner {
 public:
  CascadeRunner(Context& ctx, const std::vector<ChunkContent>& chunks,
                const std::vector<ChunkContent>& queries, const CascadeOptions& o)
      : ctx_(ctx),
        chunks_(chunks),
        queries_(queries),
        o_(o),
        rng_(uint32_t(o.seed)),
        pick_rng_(uint32_t(o.seed) + 1) {}
  Result<CascadeResult> run();

 private:
  Status advance(Window& w);  // evict the head, then slide or recall
  Result<std::vector<float>> reference(const Window& w, const ChunkContent& q);
  Result<double> kl_with(Window& base, const std::vector<int>& stale, const std::vector<bool>& pick,
                         const ChunkContent& q, const std::vector<float>& ref);
  Result<double> kl_inplace(Window& base, const std::vector<int>& stale,
                            const std::vector<bool>& pick, const ChunkContent& q,
                            const std::vector<float>& ref);
  Status question(Window& base, const ChunkContent& q);
  static std::vector<float> last(const std::vector<float>& l, int V) {
    return std::vector<float>(l.end() - V, l.end());
  }

  Context& ctx_;
  const std::vector<ChunkContent>& chunks_;
  const std::vector<ChunkContent>& queries_;
  const CascadeOptions& o_;
  std::mt19937 rng_;          // the trace
  std::mt19937 pick_rng_;     // the random baseline's picks (the trace is the same for any sweep)
  std::vector<ChunkId> ids_;  // chunk index -> id
  std::vector<int> in_window_, evicted_;
  int next_ = 0;
  // never, always, probe[t], share[t], random[t]
  Tally never_, always_, inplace_;
  std::vector<Tally> probe_, share_, random_, inplace_share_;
  int recalls_ = 0;
  double reprefill_tokens_ = 0;
};

Status CascadeRunner::advance(Window& w) {
  if (int(w.slots().size()) == o_.window_chunks) {
    evicted_.push_back(in_window_.front());
    in_window_.erase(in_window_.begin());
    KAMERA_TRY(w.evict_front());
  }
  std::uniform_real_distribution<double> u(0, 1);
  if (!evicted_.empty() && u(rng_) < o_.recall_share) {
    const size_t k = std::uniform_int_distribution<size_t>(0, evicted_.size() - 1)(rng_);
    const int c = evicted_[k];
    evicted_.erase(evicted_.begin() + long(k));
    const int n = int(w.slots().size());
    const int at =
        u(rng_) < 0.5 ? 0 : std::uniform_int_distribution<int>(1, std::max(1, n - 1))(rng_);
    KAMERA_TRY(w.recall(ids_[c], std::min(at, n), RecallMode::Fresh));
    in_window_.insert(in_window_.begin() + std::min(at, n), c);
    ++recalls_;
    return Status::Ok();
  }
  // The next stream chunk that is not in the window (a recalled one is skipped).
  int c = next_;
  while (std::find(in_window_.begin(), in_window_.end(), c) != in_window_.end())
    c = (c + 1) % int(chunks_.size());
  next_ = (c + 1) % int(chunks_.size());
  evicted_.erase(std::remove(evicted_.begin(), evicted_.end(), c), evicted_.end());
  KAMERA_TRY(w.admit_back(chunks_[c]));
  ids_[c] = w.slots().back().id;
  in_window_.push_back(c);
  return Status::Ok();
}

Result<std::vector<float>> CascadeRunner::reference(const Window& w, const ChunkContent& q) {
  std::vector<ChunkContent> cs;
  for (const auto& s : w.slots()) cs.push_back(s.canonical->content);
  ScopedSequence s(ctx_.pool());
  ServeOptions so;
  so.policy = ServePolicy::Reprefill;
  auto r = ctx_.cache().assemble(s.id(), cs, so);
  if (!r.ok()) return r.error();
  auto l = ctx_.cache().forward_chunk(s.id(), q, r->next_position, LogitsMode::Last);
  if (!l.ok()) return l.error();
  return last(*l, ctx_.model().cfg.n_vocab);
}

// KL of the question after refreshing stale[j] for every picked j (on a fork of base).
Result<double> CascadeRunner::kl_with(Window& base, const std::vector<int>& stale,
                                      const std::vector<bool>& pick, const ChunkContent& q,
                                      const std::vector<float>& ref) {
  auto f = base.fork();
  if (!f.ok()) return f.error();
  for (size_t j = 0; j < stale.size(); ++j)
    if (pick[j]) KAMERA_TRY((*f)->refresh(stale[j]));
  auto l = (*f)->query(q, LogitsMode::Last);
  if (!l.ok()) return l.error();
  return kl_from_logits(ref, last(*l, ctx_.model().cfg.n_vocab));
}

// In-place refresh: every picked dependent, front to back, re-forwards its own tokens behind the
// rows now in front of it (held or already re-forwarded) and its rows are overwritten with the
// result (no patch, n tokens instead of its whole prefix). On a fork of base's sequence.
Result<double> CascadeRunner::kl_inplace(Window& base, const std::vector<int>& stale,
                                         const std::vector<bool>& pick, const ChunkContent& q,
                                         const std::vector<float>& ref) {
  KvPool& pool = ctx_.pool();
  auto f = pool.fork(base.sequence());
  if (!f.ok()) return f.error();
  ScopedSequence work(pool, *f);
  const KvLayout& lay = pool.layout();
  std::vector<float> row;
  for (size_t j = 0; j < stale.size(); ++j) {
    if (!pick[j]) continue;
    const WindowSlot& s = base.slots()[stale[j]];
    const int begin = base.token_index(stale[j]), n = s.n_tokens();
    auto g = pool.fork(work.id());
    if (!g.ok()) return g.error();
    ScopedSequence scratch(pool, *g);
    KAMERA_TRY(pool.truncate(scratch.id(), begin));
    auto r = ctx_.cache().forward_chunk(scratch.id(), s.canonical->content, s.position);
    if (!r.ok()) return r.error();
    KAMERA_TRY(pool.make_writable(work.id(), begin, begin + n));
    for (int l = 0; l < lay.n_layers; ++l)
      for (int ch = 0; ch < int(lay.channels.size()); ++ch) {
        row.resize(lay.channels[ch].width);
        for (int t = begin; t < begin + n; ++t) {
          pool.read_row(scratch.id(), l, ch, t, row.data());
          pool.write_row(work.id(), l, ch, t, row.data());
        }
      }
  }
  auto l = ctx_.cache().forward_chunk(work.id(), q, base.next_position(), LogitsMode::Last);
  if (!l.ok()) return l.error();
  return kl_from_logits(ref, last(*l, ctx_.model().cfg.n_vocab));
}

Status CascadeRunner::question(Window& base, const ChunkContent& q) {
  const std::vector<int> stale = base.stale_slots();
  const size_t n = stale.size();
  std::vector<double> probe(n), share(n), cost(n);
  for (size_t j = 0; j < n; ++j) {
    auto p = probe_staleness(ctx_, base, stale[j], o_.probe_tokens);
    if (!p.ok()) return p.error();
    probe[j] = *p;
    share[j] = antecedent_change_share(ctx_.store(), base, stale[j]);
    // One forward over [anchor · antecedents · chunk].
    cost[j] = base.token_index(stale[j]) + base.slots()[stale[j]].n_tokens();
  }
  const double probe_cost = double(n) * o_.probe_tokens;
  if (!base.slots().empty())
    reprefill_tokens_ +=
        base.token_index(int(base.slots().size()) - 1) + base.slots().back().n_tokens();
  auto ref = reference(base, q);
  if (!ref.ok()) return ref.error();
  std::map<std::vector<bool>, double> memo;  // subset -> KL
  auto score = [&](const std::vector<bool>& pick, Tally& t, double extra) -> Status {
    auto it = memo.find(pick);
    if (it == memo.end()) {
      auto kl = kl_with(base, stale, pick, q, *ref);
      if (!kl.ok()) return kl.error();
      it = memo.emplace(pick, *kl).first;
    }
    t.stale += double(n);
    t.kl += it->second;
    t.tokens += extra;
    for (size_t j = 0; j < n; ++j)
      if (pick[j]) {
        t.refreshes += 1;
        t.tokens += cost[j];
      }
    return Status::Ok();
  };
  KAMERA_TRY(score(std::vector<bool>(n, false), never_, 0));
  KAMERA_TRY(score(std::vector<bool>(n, true), always_, 0));
  for (size_t k = 0; k < o_.probe_thresholds.size(); ++k) {
    std::vector<bool> pick(n);
    int count = 0;
    for (size_t j = 0; j < n; ++j) count += pick[j] = probe[j] > o_.probe_thresholds[k];
    KAMERA_TRY(score(pick, probe_[k], probe_cost));
    std::vector<int> idx(n);
    for (size_t j = 0; j < n; ++j) idx[j] = int(j);
    std::shuffle(idx.begin(), idx.end(), pick_rng_);
    std::vector<bool> rnd(n, false);
    for (int j = 0; j < count; ++j) rnd[idx[j]] = true;
    KAMERA_TRY(score(rnd, random_[k], 0));
  }
  for (size_t k = 0; k < o_.share_thresholds.size(); ++k) {
    std::vector<bool> pick(n);
    for (size_t j = 0; j < n; ++j) pick[j] = share[j] > o_.share_thresholds[k];
    KAMERA_TRY(score(pick, share_[k], 0));
  }
  auto inplace = [&](const std::vector<bool>& pick, Tally& t) -> Status {
    auto kl = kl_inplace(base, stale, pick, q, *ref);
    if (!kl.ok()) return kl.error();
    t.stale += double(n);
    t.kl += *kl;
    for (size_t j = 0; j < n; ++j)
      if (pick[j]) {
        t.refreshes += 1;
        t.tokens += base.slots()[stale[j]].n_tokens();
      }
    return Status::Ok();
  };
  KAMERA_TRY(inplace(std::vector<bool>(n, true), inplace_));
  for (size_t k = 0; k < o_.share_thresholds.size(); ++k) {
    std::vector<bool> pick(n);
    for (size_t j = 0; j < n; ++j) pick[j] = share[j] > o_.share_thresholds[k];
    KAMERA_TRY(inplace(pick, inplace_share_[k]));
  }
  // The next step starts from a fully refreshed window.
  for (int s : stale) KAMERA_TRY(base.refresh(s));
  return Status::Ok();
}

Result<CascadeResult> CascadeRunner::run() {
  ctx_.clear_store();
  WindowPolicy wp;
  wp.rank = o_.rank;
  auto w = Window::create(ctx_, wp);
  if (!w.ok()) return w.error();
  ids_.assign(chunks_.size(), ChunkId{});
  probe_.assign(o_.probe_thresholds.size(), {});
  random_.assign(o_.probe_thresholds.size(), {});
  share_.assign(o_.share_thresholds.size(), {});
  inplace_share_.assign(o_.share_thresholds.size(), {});
  for (int i = 0; i < o_.window_chunks; ++i) KAMERA_TRY(advance(**w));
  for (int s = 0; s < o_.steps; ++s) {
    KAMERA_TRY(advance(**w));
    KAMERA_TRY(question(**w, queries_[size_t(s) % queries_.size()]));
    if (o_.progress) o_.progress(s + 1, o_.steps);
  }
  CascadeResult res;
  const double q = o_.steps;
  auto row = [&](const std::string& name, double thr, const Tally& t) {
    CascadeRow r;
    r.policy = name;
    r.threshold = thr;
    r.questions = o_.steps;
    r.stale_per_question = t.stale / q;
    r.refreshes_per_question = t.refreshes / q;
    r.forward_tokens_per_question = t.tokens / q;
    r.reprefill_tokens_per_question = reprefill_tokens_ / q;
    r.kl = t.kl / q;
    r.eta = never_.kl > 0 ? 1 - t.kl / never_.kl : NAN;
    res.rows.push_back(r);
  };
  row("never", NAN, never_);
  row("always", NAN, always_);
  for (size_t k = 0; k < probe_.size(); ++k) {
    row("probe", o_.probe_thresholds[k], probe_[k]);
    row("random", o_.probe_thresholds[k], random_[k]);
  }
  for (size_t k = 0; k < share_.size(); ++k) row("share", o_.share_thresholds[k], share_[k]);
  row("inplace", NAN, inplace_);
  for (size_t k = 0; k < share_.size(); ++k)
    row("inplace-share", o_.share_thresholds[k], inplace_share_[k]);
  res.notes.push_back(fmt::format(
      "{} questions, window {} chunks, {} recalls, rank {}, probe {} token(s) per dependent",
      o_.steps, o_.window_chunks, recalls_, o_.rank == kFullRank ? "full" : std::to_string(o_.rank),
      o_.probe_tokens));
  return res;
}

}  // namespace

Result<CascadeResult> run_cascade(Context& ctx, const std::vector<ChunkContent>& chunks,
                                  const std::vector<ChunkContent>& queries,
                                  const CascadeOptions& o) {
  if (o.window_chunks < 2 || int(chunks.size()) < o.window_chunks + 2 || queries.empty() ||
      o.steps < 1 || o.probe_tokens < 1)
    return make_error(ErrorCode::InvalidArgument,
                      "cascade: need window >= 2 ({}), chunks >= window + 2 ({}), queries ({}), "
                      "steps >= 1 ({}) and probe tokens >= 1 ({})",
                      o.window_chunks, chunks.size(), queries.size(), o.steps, o.probe_tokens);
  return CascadeRunner(ctx, chunks, queries, o).run();
}

int64_t cascade_bench_kv_tokens(const Model& model) {
  return 4 * (int64_t(model.cfg.ctx_len) + 64);
}

Result<CascadeResult> run_cascade_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                        const CascadeOptions& o) {
  std::vector<ChunkContent> chunks, queries;
  int longest_query = 0;
  for (const auto& it : items) {
    queries.push_back(it.query);
    longest_query = std::max(longest_query, it.query.n());
  }
  const int cap = (ctx.model().cfg.ctx_len - 1 - longest_query - int(ctx.cache().anchor().size())) /
                  (o.window_chunks + 1);
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
    return make_error(ErrorCode::InvalidArgument,
                      "cascade: the items give {} distinct chunks of at most {} tokens; {} needed",
                      chunks.size(), cap, o.pool_chunks);
  auto r = run_cascade(ctx, chunks, queries, o);
  if (r.ok()) r->notes.push_back(fmt::format("chunks of at most {} tokens", cap));
  return r;
}

nlohmann::json cascade_bench_json(const CascadeResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
  for (const auto& w : r.rows)
    rows.push_back({{"policy", w.policy},
                    {"threshold", num(w.threshold)},
                    {"questions", w.questions},
                    {"stale_per_question", w.stale_per_question},
                    {"refreshes_per_question", w.refreshes_per_question},
                    {"forward_tokens_per_question", w.forward_tokens_per_question},
                    {"reprefill_tokens_per_question", w.reprefill_tokens_per_question},
                    {"kl", w.kl},
                    {"eta", num(w.eta)}});
  return {{"scenario", "cascade"}, {"rows", rows}, {"notes", r.notes}};
}

}  // namespace kamera
