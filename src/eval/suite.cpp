#include "eval/suite.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/clock.h"
#include "eval/items.h"
#include "eval/metrics.h"

namespace kamera {

namespace {

std::string stem_of(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

}  // namespace

Result<std::vector<EvalSplit>> default_splits(const Model& model, const std::string& data_dir,
                                              bool smoke) {
  namespace fs = std::filesystem;
  std::vector<EvalSplit> splits;
  const std::string stem = stem_of(model.source);
  const fs::path dev = fs::path(data_dir) / fmt::format("reuse-{}.jsonl", stem);
  const fs::path held = fs::path(data_dir) / "heldout" / fmt::format("reuse-{}.jsonl", stem);
  const int limit = smoke ? 4 : 0;
  if (model.tokenizer && fs::exists(dev) && fs::exists(held)) {
    for (auto [name, path] : {std::pair{"dev", dev}, std::pair{"heldout", held}}) {
      auto items = load_reuse_items(path.string(), model);
      if (!items.ok()) return items.error();
      if (limit && int(items->size()) > limit) items->resize(limit);
      splits.push_back({name, path.string(), name, std::move(items.value())});
    }
  } else {
    TokenItemSpec ts;
    ts.n_items = smoke ? 4 : 12;
    ts.seed = 1;
    const int room = model.cfg.ctx_len - 1 - ts.query_tokens;
    ts.antecedent_tokens = std::min(ts.antecedent_tokens, room / 2);
    ts.chunk_tokens = std::min(ts.chunk_tokens, room / 2);
    splits.push_back({"random-tokens",
                      fmt::format("random_token_items(seed={}, A={}, B={}, Q={})", ts.seed,
                                  ts.antecedent_tokens, ts.chunk_tokens, ts.query_tokens),
                      "heldout", random_token_items(model, ts)});
  }
  // Frames on the M-RoPE decoders, but not on qwen3vl's: an image row there carries deepstack
  // slices, which the token-recompute baselines (Engine::layer_step on hidden rows) do not add
  if (model.cfg.rope.mrope != MropeMode::None && model.cfg.n_deepstack == 0) {
    FrameItemSpec fs_;
    fs_.n_items = smoke ? 4 : 12;
    fs_.seed = 2;
    splits.push_back({"frames",
                      fmt::format("frame_items(seed={}, grid={}x{}, Q={})", fs_.seed, fs_.grid_h,
                                  fs_.grid_w, fs_.query_tokens),
                      "heldout", frame_items(model, fs_)});
  }
  return splits;
}

ReuseBenchOptions suite_reuse_options(const Model& model, bool smoke) {
  ReuseBenchOptions o;
  o.baselines = true;
  o.anatomy = true;
  o.timing_rank = 16;
  if (smoke) {
    o.ranks = {1, 4, 8, 16, kFullRank};
    o.cacheblend_share = {0.15, 0.5};
    o.epic_k = {8};
    o.delta_token_share = {0.25, 0.5};
    o.matched_ranks = {4};
  } else {
    o.ranks = {1, 2, 4, 8, 16, 32, kFullRank};
  }
  (void)model;
  return o;
}

int64_t suite_kv_tokens(const std::vector<EvalSplit>& splits, const SuiteOptions& opts) {
  int64_t n = 0;
  for (const EvalSplit& s : splits) n = std::max(n, harness_kv_tokens(s.items));
  const int max_len = *std::max_element(opts.timing_lengths.begin(), opts.timing_lengths.end());
  return std::max<int64_t>(n, 4 * (1 + 32 + max_len + 32));
}

namespace {

// Serve vs re-prefill of a `len`-token chunk B into the pool behind a cached 32-token antecedent:
// median ms of re-prefilling B, placing its canonical, and placing it with a patch.
Result<nlohmann::json> time_serve(Context& ctx, int len, const SuiteOptions& opts) {
  const Model& model = ctx.model();
  KvPool& pool = ctx.pool();
  TokenItemSpec ts;
  ts.n_items = 1;
  ts.antecedent_tokens = 32;
  ts.chunk_tokens = len;
  ts.query_tokens = 1;
  ts.seed = 100 + uint64_t(len);
  const ReuseItem it = random_token_items(model, ts)[0];
  ctx.clear_store();
  ChunkCache& cc = ctx.cache();
  const int32_t pB = cc.anchor_extent() + it.antecedent.extent();
  ScopedSequence prefix(pool);
  KAMERA_TRY(cc.append_anchor(prefix.id()));
  if (auto r = cc.forward_chunk(prefix.id(), it.antecedent, cc.anchor_extent()); !r.ok())
    return r.error();
  KAMERA_ASSIGN_OR_RETURN(auto canon, cc.canonical(it.chunk));
  const std::vector<ChunkContent> ab = {it.antecedent, it.chunk};
  KAMERA_ASSIGN_OR_RETURN(auto cond, cc.conditioned(ab));
  PatchOptions po;
  po.rank = opts.timing_rank;
  po.cap_rank = true;
  po.head_dim = model.cfg.head_dim;
  KAMERA_ASSIGN_OR_RETURN(const Patch patch, form_patch(cond.back(), canon->kv, po));
  std::vector<double> t_re, t_blind, t_patch;
  for (int rep = 0; rep < std::max(1, opts.timing_reps); ++rep) {
    for (int arm = 0; arm < 3; ++arm) {
      KAMERA_ASSIGN_OR_RETURN(const SeqId fork, pool.fork(prefix.id()));
      const double t0 = now_ms();
      Status st = Status::Ok();
      if (arm == 0) {
        auto r = cc.forward_chunk(fork, it.chunk, pB, LogitsMode::None);
        if (!r.ok()) st = r.error();
      } else {
        st = cc.append_chunk(fork, *canon, arm == 2 ? &patch : nullptr, pB);
      }
      const double ms = now_ms() - t0;
      pool.free_sequence(fork);
      KAMERA_TRY(st);
      (arm == 0 ? t_re : arm == 1 ? t_blind : t_patch).push_back(ms);
    }
  }
  return nlohmann::json{{"chunk_tokens", len},
                        {"antecedent_tokens", 32},
                        {"patch_rank", opts.timing_rank},
                        {"reprefill_ms", median(t_re)},
                        {"blind_ms", median(t_blind)},
                        {"patch_ms", median(t_patch)},
                        {"reps", std::max(1, opts.timing_reps)}};
}

}  // namespace

Result<nlohmann::json> run_eval_suite(Context& ctx, const std::vector<EvalSplit>& splits,
                                      const SuiteOptions& opts) {
  using nlohmann::json;
  const Model& model = ctx.model();
  json out{{"kind", "kamera-eval"}, {"suite", opts.smoke ? "smoke" : "all"}};
  const ReuseBenchOptions base = suite_reuse_options(model, opts.smoke);
  json js = json::array();
  for (const EvalSplit& s : splits) {
    ReuseBenchOptions o = base;
    o.output_patches = opts.output_patches;
    if (opts.progress)
      o.progress = [&](int done, int total) { opts.progress(s.name, done, total); };
    auto r = run_reuse_bench(ctx, s.items, o);
    if (!r.ok()) return with_context(r.error(), "split " + s.name);
    js.push_back(
        {{"name", s.name},
         {"source", s.source},
         {"role", s.role},
         {"kind", s.items.empty() || s.items[0].chunk.is_tokens() ? "tokens" : "embeddings"},
         {"result", reuse_bench_json(*r)}});
  }
  out["splits"] = js;
  json timing = json::array();
  int done = 0;
  for (int len : opts.timing_lengths) {
    ++done;
    if (1 + 32 + len > model.cfg.ctx_len) continue;
    KAMERA_ASSIGN_OR_RETURN(json row, time_serve(ctx, len, opts));
    timing.push_back(std::move(row));
    if (opts.progress) opts.progress("timing", done, int(opts.timing_lengths.size()));
  }
  out["timing_by_length"] = timing;
  return out;
}

}  // namespace kamera
