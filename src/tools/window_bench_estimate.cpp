#include "tools/window_bench_estimate.h"

#include <cstdio>

#include "bench/estimate_bench.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct Loaded {
  std::shared_ptr<const Model> model;
  std::vector<EstimateGroup> groups;
  std::vector<ChunkContent> pool;
  std::vector<int32_t> anchor;  // empty: the model's default
};

Result<Loaded> load_groups(const EstimateArgs& a) {
  Loaded l;
  if (!a.mmproj.empty()) {  // the mini-VL: frames as segments
    KAMERA_ASSIGN_OR_RETURN(auto mv, minivl::MiniVl::load(a.model, a.mmproj));
    KAMERA_ASSIGN_OR_RETURN(l.groups, minivl_estimate_groups(mv, a.limit > 0 ? a.limit : 100, 0,
                                                             a.antecedents, l.pool));
    l.model = mv.decoder;
    l.anchor = {minivl::bos_id()};
    return l;
  }
  if (a.items.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "--scenario estimate needs --items (a text model) or --mmproj (the mini-VL)");
  KAMERA_ASSIGN_OR_RETURN(l.model, load_for_cli(a.model, a.tokenizer));
  KAMERA_ASSIGN_OR_RETURN(auto items, load_reuse_items(a.items, *l.model));
  if (a.limit > 0 && int(items.size()) > a.limit) items.resize(size_t(a.limit));
  l.groups = text_estimate_groups(*l.model, items, a.antecedents, a.seed, l.pool);
  return l;
}

void print_table(const EstimateResult& r, const EstimateOptions& o) {
  std::printf("%-6s %4s %10s %10s %7s %s\n", "arm", "n", "kl_mean", "kl_median", "above", "eta");
  for (const auto& t : r.arms)
    std::printf("%-6s %4d %10.3e %10.3e %7.2f %s\n", t.arm.c_str(), t.n, t.kl_mean, t.kl_median,
                t.above, std::isnan(t.eta) ? "-" : fmt::format("{:.3f}", t.eta).c_str());
  std::printf("\n%-6s %-8s %-24s %8s %8s", "arm", "cases", "estimator", "spearman", "pearson");
  for (double s : o.skip_shares) std::printf("  skip %.2f: t, false", s);
  std::printf("\n");
  auto f = [](double x) { return std::isnan(x) ? std::string("-") : fmt::format("{:.3f}", x); };
  for (const auto& e : r.rows) {
    const bool brief = e.estimator == "recommended" || e.estimator == "oracle" ||
                       e.estimator == "random" || e.estimator == "context_near";
    if (e.composition != "all" && !brief) continue;  // per composition: the baselines only
    std::printf("%-6s %-8s %-24s %8s %8s", e.arm.c_str(), e.composition.c_str(),
                e.estimator.c_str(), f(e.spearman).c_str(), f(e.pearson).c_str());
    for (const auto& s : e.skips) std::printf("  %9.3g %6s", s.threshold, f(s.false_skip).c_str());
    std::printf("\n");
  }
  std::printf("false: share of skipped cases with KL > %g; t: the estimate's quantile\n",
              o.kl_threshold);
}

}  // namespace

int run_estimate_scenario(const EstimateArgs& a) {
  auto l = load_groups(a);
  if (!l.ok()) return fail(l.error(), a.json);
  EstimateOptions o;
  o.rank = a.rank == 0 ? kFullRank : a.rank;
  o.kl_threshold = a.kl_threshold;
  o.seed = a.seed;
  const double t0 = now_ms();
  if (!a.quiet)
    o.progress = [&](int done, int total) {
      if (done == total || done % std::max(1, total / 4) == 0)
        std::fprintf(stderr, "kamera: window-bench estimate %d/%d groups, %.1f s elapsed\n", done,
                     total, (now_ms() - t0) / 1e3);
    };
  ContextOptions co;
  co.swa_full = true;
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = estimate_bench_kv_tokens(*l->model);
  co.store_bytes = size_t(1) << 34;
  if (!l->anchor.empty()) co.anchor = l->anchor;
  auto ctx = Context::create(l->model, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_estimate_bench(**ctx, l->groups, l->pool, o);
  if (!r.ok()) return fail(r.error(), a.json);
  if (a.json) {
    json j = estimate_bench_json(*r, o);
    j["model"] = model_summary(*l->model);
    j["groups"] = l->groups.size();
    j["antecedents"] = a.antecedents;
    print_json(j, 2);
    return 0;
  }
  print_table(*r, o);
  for (const auto& n : r->notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

}  // namespace kamera::cli
