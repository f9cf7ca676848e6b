// The reuse harness: every arm on every item through the driver (eval/arm.h), the probes
// (eval/reuse_probes.h), the pooled basis on the held-out half, and the summary.
#include "eval/reuse_bench.h"

#include <algorithm>

#include "eval/arms.h"
#include "eval/arms_output.h"
#include "eval/baselines.h"
#include "eval/metrics.h"
#include "eval/reuse_probes.h"

namespace kamera {

namespace {

Status check_options(const ReuseBenchOptions& opts) {
  for (int r : opts.ranks)
    if (r != kFullRank && r < 1)
      return make_error(ErrorCode::InvalidArgument, "rank {} must be >= 1 or full", r);
  if (opts.ranks.empty()) return make_error(ErrorCode::InvalidArgument, "no ranks to evaluate");
  return Status::Ok();
}

BaselineOptions baseline_options(const ReuseBenchOptions& o) {
  BaselineOptions b;
  b.cacheblend_share = o.cacheblend_share;
  b.cacheblend_select_layer = o.cacheblend_select_layer;
  b.epic_k = o.epic_k;
  b.sink_k = o.sink_k;
  b.vlcache_share = o.vlcache_share;
  b.delta_token_share = o.delta_token_share;
  b.matched_ranks = o.matched_ranks;
  return b;
}

PatchOptions rank_options(const Model& m, const ReuseBenchOptions& o, int rank, bool deep) {
  LayerSet layers = o.layers;
  if (deep) layers = LayerSet{LayerSet::Kind::DeepHalf, {}};
  return harness_patch_options(m, rank, layers, o.patch_dtype, o.per_head, o.svd);
}

// The arms in report order: blind, the patch ranks (all layers, then the deepest half), the
// baselines, single-layer injection (anatomy), the mask oracle.
std::vector<std::unique_ptr<Arm>> reuse_arms(const Model& m, const ReuseBenchOptions& o) {
  std::vector<std::unique_ptr<Arm>> arms;
  arms.push_back(std::make_unique<BlindArm>());
  for (bool deep : {false, true}) {
    if (deep && !o.deep_half) continue;
    for (int rank : o.ranks)
      arms.push_back(std::make_unique<PatchArm>(
          ArmKey{deep ? "patch_deep_half" : "patch", rank, ""}, rank_options(m, o, rank, deep)));
  }
  if (o.output_patches) {
    for (bool oracle : {false, true}) {
      auto cache = std::make_shared<OutputWeightsCache>();
      cache->with_query = oracle;
      for (int rank : o.ranks)
        arms.push_back(std::make_unique<OutputPatchArm>(
            ArmKey{oracle ? "patch_output_qoracle" : "patch_output", rank, ""},
            rank_options(m, o, rank, false), cache));
    }
  }
  if (o.baselines)
    for (auto& a : make_baseline_arms(m, baseline_options(o))) arms.push_back(std::move(a));
  if (o.anatomy)
    for (int layer = 0; layer < m.cfg.n_layers; ++layer) {
      PatchOptions po;
      po.rank = kFullRank;
      po.layers = LayerSet{LayerSet::Kind::List, {layer}};
      arms.push_back(std::make_unique<PatchArm>(
          ArmKey{"inject_layer", kFullRank, fmt::format("l={}", layer)}, po));
    }
  arms.push_back(std::make_unique<OracleMaskArm>());
  return arms;
}

EvalItem eval_item(const ReuseItem& it) {
  return EvalItem{it.name, {it.antecedent, it.chunk}, 1, {EvalQuery{it.query}}};
}

// The rank whose serve and compile times are reported: the option when swept, else the largest.
int timing_rank(const ReuseBenchOptions& o) {
  if (std::find(o.ranks.begin(), o.ranks.end(), o.timing_rank) != o.ranks.end())
    return o.timing_rank;
  int r = kFullRank;
  for (int x : o.ranks)
    if (x != kFullRank) r = std::max(r, x);
  return r;
}

void init_result(const Context& ctx, const std::vector<ReuseItem>& items,
                 const ReuseBenchOptions& o, ReuseBenchResult& res) {
  const KvLayout layout = ctx.model().kv_layout();
  const size_t n_ch = layout.channels.size();
  res.n_items = int(items.size());
  res.timing_rank = timing_rank(o);
  res.anatomy.resize(size_t(layout.n_layers));
  for (int l = 0; l < layout.n_layers; ++l) {
    res.anatomy[size_t(l)].layer = l;
    res.anatomy[size_t(l)].rel_norm.assign(n_ch, 0.0);
    res.anatomy[size_t(l)].rank90.assign(n_ch, 0.0);
    res.anatomy[size_t(l)].spectrum.assign(n_ch, {});
  }
  for (const auto& ch : layout.channels) res.channels.push_back(ch.name);
  res.full_rank_max_rel_err_channel.assign(n_ch, 0.0);
}

// Per-run state: timings and the anatomy's per-item values.
struct RunState {
  std::vector<double> t_reprefill, t_blind, t_patch, t_compile, head_cells;
  std::vector<ChunkKV> deltas;  // per item (anatomy): the deficit, for the pooled basis
};

// Every arm and probe on one prepared item.
Status run_item(ArmDriver& driver, std::vector<std::unique_ptr<Arm>>& arms, const PreparedItem& it,
                const ReuseBenchOptions& o, ReuseBenchResult& res, RunState& st) {
  const ReusedChunk& b = it.reused.front();
  res.mean_antecedent_tokens += it.item->chunks.front().n();
  res.mean_chunk_tokens += b.content->n();
  res.mean_query_tokens += it.item->queries.front().content.n();
  res.canonical_bytes += double(b.canon->kv.bytes());
  st.t_reprefill.push_back(it.reference_ms);
  const Model& m = it.ctx->model();
  for (auto& arm : arms) {
    double ms = 0;
    KAMERA_TRY(driver.run(*arm, it, &ms));
    const ArmKey& k = arm->key();
    if (k.name == "blind") st.t_blind.push_back(ms);
    if (k.name == "patch" && k.rank == res.timing_rank) st.t_patch.push_back(ms);
  }
  KAMERA_ASSIGN_OR_RETURN(const double compile,
                          compile_ms(it, rank_options(m, o, res.timing_rank, false)));
  st.t_compile.push_back(compile);
  const bool full = std::find(o.ranks.begin(), o.ranks.end(), kFullRank) != o.ranks.end();
  if (full && o.layers.kind == LayerSet::Kind::All)
    KAMERA_TRY(probe_deficit(it, rank_options(m, o, kFullRank, false), it.index == 0, res));
  if (o.anatomy) {
    const double cells = head_cells_for_90(it);
    if (!std::isnan(cells)) st.head_cells.push_back(cells);
    st.deltas.push_back(deficit(b));
  }
  return probe_relocation(it, res);
}

// The pooled basis: fitted on the even items' deficits, scored on the odd (held-out) ones.
Status pooled_basis_pass(ArmDriver& driver, const std::vector<EvalItem>& items,
                         const ReuseBenchOptions& o, RunState& st, ReuseBenchResult& res) {
  std::vector<const ChunkKV*> train;
  for (size_t i = 0; i < st.deltas.size(); i += 2) train.push_back(&st.deltas[i]);
  PooledBasisArm arm(o.pooled_rank, train, st.deltas.front().layout);
  for (size_t i = 1; i < items.size(); i += 2) {
    driver.context().clear_store();
    KAMERA_ASSIGN_OR_RETURN(PreparedItem it, driver.prepare(items[i], int(i), false));
    KAMERA_TRY(driver.run(arm, it));
  }
  res.pooled_basis_error_ratio = arm.error_ratio();
  return Status::Ok();
}

// One summary row from an arm's record.
ArmSummary summary_row(const Scoreboard& board, const ArmRecord& a, const ArmRecord& blind) {
  const ArmStats s = summarize(board, a, &blind, &blind);
  ArmSummary r;
  r.name = a.key.name;
  r.rank = a.key.rank;
  r.param = a.key.param;
  r.item_kl = a.kl;
  r.n_items = s.n;
  r.kl = s.kl;
  r.kl_median = s.kl_median;
  r.eta = s.eta;
  r.eta_median = s.eta_median;
  r.flip_recover = s.flip_recover;
  r.argmax_agree = s.argmax_agree;
  const double n = a.kl.empty() ? 1.0 : double(a.kl.size());
  r.patch_bytes_fraction = a.cost.bytes_fraction / n;
  r.recompute_fraction = a.cost.recompute_fraction / n;
  r.extra_kv_bytes = a.cost.kv_bytes / n;
  r.extra_flops = a.cost.flops / n;
  if (a.kv_error.max_abs >= 0) {
    r.kv_max_abs_err = a.kv_error.max_abs;
    r.kv_max_rel_err = a.kv_error.max_rel;
    r.kv_max_ulp = a.kv_error.max_ulp;
  }
  return r;
}

// The summary rows: re-prefill (the reference itself, KL 0 by the protocol), then every arm.
void summarize_arms(const Scoreboard& board, ReuseBenchResult& res) {
  const ArmRecord& blind = *board.find({"blind", 0, ""});
  for (size_t i = 0; i < blind.measurement.size(); ++i)
    res.n_flips +=
        blind.last_argmax[i] != board.measurements()[size_t(blind.measurement[i])].ref_argmax;
  ArmSummary rp;
  rp.name = "reprefill";
  rp.eta = rp.eta_median = rp.argmax_agree = 1.0;
  rp.flip_recover = res.n_flips ? 1.0 : NAN;
  rp.item_kl.assign(size_t(res.n_items), 0.0);
  rp.n_items = res.n_items;
  res.arms.push_back(rp);
  for (const ArmRecord& a : board.arms()) res.arms.push_back(summary_row(board, a, blind));
  // A re-prefill of B in context is the recompute of all its tokens from layer 0.
  for (const auto& a : res.arms)
    if (a.name == "partial_reprefill" && a.param == "l=0") {
      res.reprefill_flops = a.extra_flops;
      res.arms[0].extra_flops = a.extra_flops;
      res.arms[0].extra_kv_bytes = a.extra_kv_bytes;
      res.arms[0].recompute_fraction = 1.0;
    }
}

// Paper Table 8: the partial re-prefill share that first reaches the patch's eta.
void match_partial_reprefill(ReuseBenchResult& res) {
  for (int r : {16, 8, 4})
    for (const auto& a : res.arms)
      if (a.name == "patch" && a.rank == r && !std::isnan(a.eta) && res.match_rank == 0) {
        res.match_rank = r;
        res.match_patch_eta = a.eta;
      }
  double best = NAN;
  for (const auto& a : res.arms)
    if (a.name == "partial_reprefill" && !std::isnan(a.eta) && a.eta >= res.match_patch_eta &&
        (std::isnan(best) || a.recompute_fraction < best))
      best = a.recompute_fraction;
  res.partial_reprefill_to_match = best;
}

void finish_means(const RunState& st, ReuseBenchResult& res) {
  const double n = double(res.n_items);
  res.mean_antecedent_tokens /= n;
  res.mean_chunk_tokens /= n;
  res.mean_query_tokens /= n;
  res.canonical_bytes /= n;
  for (auto& l : res.anatomy)
    for (size_t ci = 0; ci < l.rel_norm.size(); ++ci) {
      l.rel_norm[ci] /= n;
      l.rank90[ci] /= n;
      for (double& x : l.spectrum[ci]) x /= n;
    }
  for (double e : res.full_rank_max_rel_err_channel)
    res.full_rank_max_rel_err = std::max(res.full_rank_max_rel_err, e);
  res.timing_reprefill_ms = median(st.t_reprefill);
  res.timing_reuse_blind_ms = median(st.t_blind);
  res.timing_reuse_patch_ms = median(st.t_patch);
  res.timing_compile_ms = median(st.t_compile);
  if (!st.head_cells.empty()) res.head_cells_for_90 = mean(st.head_cells);
}

}  // namespace

Result<ReuseBenchResult> run_reuse_bench(Context& ctx, const std::vector<ReuseItem>& items,
                                         const ReuseBenchOptions& opts) {
  KAMERA_TRY(check_options(opts));
  if (ctx.pool().layout().rope_channel() < 0)
    return make_error(ErrorCode::InvalidArgument,
                      "reuse-bench: the model's KV layout has no rope channel");
  ReuseBenchResult res;
  init_result(ctx, items, opts, res);
  Scoreboard board;
  ArmDriver driver(ctx, board);
  auto arms = reuse_arms(ctx.model(), opts);
  std::vector<EvalItem> eval_items;
  for (const ReuseItem& it : items) eval_items.push_back(eval_item(it));
  RunState st;
  for (size_t i = 0; i < eval_items.size(); ++i) {
    ctx.clear_store();  // every item starts from an empty store
    KAMERA_ASSIGN_OR_RETURN(PreparedItem it, driver.prepare(eval_items[i], int(i), false));
    KAMERA_TRY(run_item(driver, arms, it, opts, res, st));
    if (opts.progress) opts.progress(int(i + 1), int(items.size()));
  }
  finish_means(st, res);
  if (opts.anatomy && items.size() >= 2)
    KAMERA_TRY(pooled_basis_pass(driver, eval_items, opts, st, res));
  summarize_arms(board, res);
  if (opts.baselines) match_partial_reprefill(res);
  return res;
}

nlohmann::json reuse_bench_json(const ReuseBenchResult& r) {
  using nlohmann::json;
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  auto rank = [](int k) {
    return k == kFullRank ? json("full") : k == 0 ? json(nullptr) : json(k);
  };
  json arms = json::array();
  for (const auto& a : r.arms)
    arms.push_back({{"name", a.name},
                    {"rank", rank(a.rank)},
                    {"param", a.param},
                    {"n_items", a.n_items},
                    {"recompute_fraction", a.recompute_fraction},
                    {"extra_kv_bytes", a.extra_kv_bytes},
                    {"extra_flops", a.extra_flops},
                    {"item_kl", a.item_kl},
                    {"kl", a.kl},
                    {"kl_median", a.kl_median},
                    {"eta", num(a.eta)},
                    {"eta_median", num(a.eta_median)},
                    {"flip_recover", num(a.flip_recover)},
                    {"argmax_agree", a.argmax_agree},
                    {"patch_bytes_fraction", a.patch_bytes_fraction},
                    {"kv_max_abs_err", num(a.kv_max_abs_err)},
                    {"kv_max_rel_err", num(a.kv_max_rel_err)},
                    {"kv_max_ulp", a.kv_max_ulp < 0 ? json(nullptr) : json(a.kv_max_ulp)}});
  json anatomy = json::array();
  for (const auto& l : r.anatomy) {
    json row{{"layer", l.layer}};
    for (size_t ch = 0; ch < r.channels.size(); ++ch) {
      row["rel_norm_" + r.channels[ch]] = l.rel_norm[ch];
      row["rank90_" + r.channels[ch]] = l.rank90[ch];
      row["spectrum_" + r.channels[ch]] = l.spectrum[ch];
    }
    anatomy.push_back(row);
  }
  json full_rank = json::object();
  for (size_t ch = 0; ch < r.channels.size(); ++ch)
    full_rank[r.channels[ch]] = r.full_rank_max_rel_err_channel[ch];
  return json{{"n_items", r.n_items},
              {"n_flips", r.n_flips},
              {"mean_tokens",
               {{"antecedent", r.mean_antecedent_tokens},
                {"chunk", r.mean_chunk_tokens},
                {"query", r.mean_query_tokens}}},
              {"relocation_max_ulp", r.relocation_max_ulp},
              {"relocation_max_ulp_layer0", r.relocation_max_ulp_layer0},
              {"relocation_max_abs_err", r.relocation_max_abs_err},
              {"relocation_max_rel_err", r.relocation_max_rel_err},
              {"full_rank_max_rel_err", r.full_rank_max_rel_err},
              {"full_rank_max_rel_err_by_channel", full_rank},
              {"arms", arms},
              {"timing_ms",
               {{"reprefill", r.timing_reprefill_ms},
                {"reuse_blind", r.timing_reuse_blind_ms},
                {"reuse_patch", r.timing_reuse_patch_ms},
                {"compile", r.timing_compile_ms},
                {"rank", rank(r.timing_rank)}}},
              {"delta_by_layer", anatomy},
              {"canonical_bytes", r.canonical_bytes},
              {"reprefill_flops", r.reprefill_flops},
              {"head_cells_for_90", num(r.head_cells_for_90)},
              {"pooled_basis_error_ratio", num(r.pooled_basis_error_ratio)},
              {"table8",
               {{"patch_rank", r.match_rank ? json(r.match_rank) : json(nullptr)},
                {"patch_eta", num(r.match_patch_eta)},
                {"partial_reprefill_fraction", num(r.partial_reprefill_to_match)}}}};
}

}  // namespace kamera
