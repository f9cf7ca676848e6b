// kamera window-bench: the window operations (slide, reorder, recall) against full re-prefill.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "bench/cascade_bench.h"
#include "bench/placement_bench.h"
#include "bench/window_bench.h"
#include "tools/cli_common.h"
#include "tools/window_bench_estimate.h"

namespace kamera::cli {

namespace {

struct WindowBenchArgs {
  std::string model, tokenizer, items, scenario = "all", removal_ranks = "4,16,full", ks = "3,4,6";
  int rank = 8, samples = 24, window_chunks = 5, limit = 12, threads = default_threads();
  int steps = 24, set_size = 4, pool_chunks = 10;
  size_t patch_budget = 0;
  std::vector<std::string> plans = {"fixed"};
  double plan_blind = 0.01, plan_energy = 0.9;
  int probe_tokens = 1;
  double recall_share = 0.5;
  std::string thresholds = "0.01,0.015,0.02,0.025,0.03,0.04,0.05",
              share_thresholds = "0.05,0.1,0.2,0.4";
  uint64_t seed = 1;
  bool json = false, quiet = false;
  std::string mmproj;  // estimate: the mini-VL's encoder (frames as segments)
  int antecedents = 3;
  double kl_threshold = 1e-3;
};

Result<std::vector<int>> int_list(const std::string& s, const char* what, bool allow_full) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (allow_full && item == "full") {
      out.push_back(kFullRank);
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000)
      return make_error(ErrorCode::InvalidArgument, "{}: '{}' is not a positive integer{}", what,
                        item, allow_full ? " or 'full'" : "");
    out.push_back(int(v));
  }
  if (out.empty()) return make_error(ErrorCode::InvalidArgument, "{} is empty", what);
  return out;
}

// --scenario placement: the placement policies over the synthetic agent traces.
int run_placement(const WindowBenchArgs& a, std::shared_ptr<const Model> loaded,
                  const std::vector<ReuseItem>& items) {
  const Model& m = *loaded;
  PlacementOptions o;
  o.steps = a.steps;
  o.set_size = a.set_size;
  o.pool_chunks = a.pool_chunks;
  o.rank = a.rank == 0 ? kFullRank : a.rank;
  o.patch_budget = a.patch_budget;
  o.plans = a.plans;
  o.plan_blind = a.plan_blind;
  o.plan_energy = a.plan_energy;
  o.seed = a.seed;
  const double t0 = now_ms();
  if (!a.quiet)
    o.progress = [&](const std::string& t, const std::string& p, int done, int total) {
      if (done == total)
        std::fprintf(stderr, "kamera: window-bench placement %s/%s %d questions, %.1f s elapsed\n",
                     t.c_str(), p.c_str(), total, (now_ms() - t0) / 1e3);
    };
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = placement_bench_kv_tokens(m);
  co.store_bytes = size_t(1) << 34;
  auto ctx = Context::create(loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_placement_bench(**ctx, items, o);
  if (!r.ok()) return fail(r.message(), a.json);
  json j = placement_bench_json(*r);
  j["model"] = model_summary(m);
  j["items_file"] = a.items;
  j["threads"] = a.threads;
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  std::printf("%-8s %-8s %-8s %6s %9s %6s %6s %5s %10s %8s %8s %10s %10s %10s %7s %7s\n", "trace",
              "policy", "plan", "forms", "form_tok", "hits", "blind", "rank", "patch_B", "ttft_ms",
              "pp_ms", "kl_same", "kl_blind", "kl_arrival", "agr_sm", "agr_arr");
  for (const auto& w : r->rows)
    std::printf(
        "%-8s %-8s %-8s %6.2f %9.1f %6.2f %6.2f %5.1f %10.0f %8.2f %8.2f %10.3e %10.3e %10.3e "
        "%7.2f %7.2f\n",
        w.trace.c_str(), w.policy.c_str(), w.plan.c_str(), w.forms_per_question,
        w.form_tokens_per_question, w.hit_rate, w.blind_share, w.mean_rank, w.patch_bytes,
        w.ttft_ms, w.reprefill_ms, w.kl_same, w.kl_blind, w.kl_arrival, w.agree_same,
        w.agree_arrival);
  for (const auto& n : r->notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

// --scenario cascade: refresh policies for the stale dependents of a recall (or a slide).
Result<std::vector<double>> double_list(const std::string& s, const char* what) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0))
      return make_error(ErrorCode::InvalidArgument, "{}: '{}' is not a number >= 0", what, item);
    out.push_back(v);
  }
  return out;
}

int run_cascade_scenario(const WindowBenchArgs& a, std::shared_ptr<const Model> loaded,
                         const std::vector<ReuseItem>& items) {
  CascadeOptions o;
  o.steps = a.steps;
  o.window_chunks = a.window_chunks;
  o.pool_chunks = a.pool_chunks;
  o.recall_share = a.recall_share;
  o.rank = a.rank == 0 ? kFullRank : a.rank;
  o.probe_tokens = a.probe_tokens;
  o.seed = a.seed;
  auto th = double_list(a.thresholds, "--thresholds");
  auto sh = double_list(a.share_thresholds, "--share-thresholds");
  if (!th.ok() || !sh.ok()) return fail(th.ok() ? sh.message() : th.message(), a.json);
  o.probe_thresholds = *th;
  o.share_thresholds = *sh;
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = cascade_bench_kv_tokens(*loaded);
  co.store_bytes = size_t(1) << 34;
  auto ctx = Context::create(loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_cascade_bench(**ctx, items, o);
  if (!r.ok()) return fail(r.message(), a.json);
  json j = cascade_bench_json(*r);
  j["model"] = model_summary(*loaded);
  j["items_file"] = a.items;
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  std::printf("%-8s %9s %7s %9s %10s %11s %8s\n", "policy", "threshold", "stale", "refreshes",
              "fwd_tokens", "kl", "eta");
  for (const auto& w : r->rows)
    std::printf("%-8s %9s %7.2f %9.2f %10.1f %11.3e %8.3f\n", w.policy.c_str(),
                std::isnan(w.threshold) ? "-" : fmt::format("{:g}", w.threshold).c_str(),
                w.stale_per_question, w.refreshes_per_question, w.forward_tokens_per_question, w.kl,
                w.eta);
  if (!r->rows.empty())
    std::printf("re-prefill of the window: %.1f forward tokens per question\n",
                r->rows[0].reprefill_tokens_per_question);
  for (const auto& n : r->notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

int run(const WindowBenchArgs& a) {
  if (a.scenario == "estimate")
    return run_estimate_scenario({a.model, a.tokenizer, a.items, a.mmproj, a.rank, a.antecedents,
                                  a.limit, a.threads, a.kl_threshold, a.seed, a.json, a.quiet});
  if (a.items.empty()) return fail("--items is required", a.json);
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  auto items = load_reuse_items(a.items, m);
  if (!items.ok()) return fail(items.message(), a.json);
  if (a.scenario == "placement") return run_placement(a, *loaded, *items);
  if (a.scenario == "cascade") return run_cascade_scenario(a, *loaded, *items);
  WindowBenchOptions o;
  if (a.scenario != "all") o.scenarios = {a.scenario};
  o.rank = a.rank == 0 ? kFullRank : a.rank;
  auto rr = int_list(a.removal_ranks, "--removal-ranks", true);
  if (!rr.ok()) return fail(rr.message(), a.json);
  o.removal_ranks = *rr;
  auto ks = int_list(a.ks, "--k", false);
  if (!ks.ok()) return fail(ks.message(), a.json);
  for (int k : *ks)
    if (k < 2 || k > 8) return fail("--k values must be in [2, 8]", a.json);
  o.reorder_k = *ks;
  o.reorder_samples = a.samples;
  o.window_chunks = a.window_chunks;
  o.max_items = a.limit;
  o.seed = a.seed;
  const double t0 = now_ms();
  const bool tty = isatty(2);
  if (!a.quiet)
    o.progress = [&, tty](const std::string& s, int done, int total) {
      if (!tty && done != total && done % std::max(1, total / 4) != 0) return;
      std::fprintf(stderr, "%skamera: window-bench %s %d/%d items, %.1f s elapsed%s",
                   tty ? "\r" : "", s.c_str(), done, total, (now_ms() - t0) / 1e3,
                   tty && done != total ? "   " : "\n");
    };
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = window_bench_kv_tokens(m);
  co.store_bytes = size_t(1) << 34;
  auto ctx = Context::create(*loaded, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_window_bench(**ctx, *items, o);
  if (!r.ok()) return fail(r.message(), a.json);
  json j = window_bench_json(*r);
  j["model"] = model_summary(m);
  j["items_file"] = a.items;
  j["rank"] = a.rank;
  j["threads"] = a.threads;
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  std::printf("%-8s %-12s %-14s %5s %4s %11s %8s %8s %8s %10s %10s\n", "scenario", "group", "arm",
              "rank", "n", "kl", "eta", "flip_rec", "argmax", "ms", "bytes");
  for (const auto& w : r->arms) {
    auto f = [](double x, const char* fm) {
      return std::isnan(x) ? std::string("-") : fmt::format(fmt::runtime(fm), x);
    };
    const std::string rank = w.rank == kFullRank ? "full" : w.rank ? std::to_string(w.rank) : "-";
    std::printf("%-8s %-12s %-14s %5s %4d %11.3e %8s %8s %8.3f %10s %10.0f\n", w.scenario.c_str(),
                w.group.c_str(), w.name.c_str(), rank.c_str(), w.n, w.kl,
                f(w.eta, "{:.3f}").c_str(), f(w.flip_recover, "{:.2f}").c_str(), w.argmax_agree,
                f(w.ms, "{:.3f}").c_str(), w.bytes);
  }
  for (const auto& n : r->notes) std::printf("note: %s\n", n.c_str());
  std::printf("eta: slide relative to keep-as-is; reorder and recall relative to blind reuse\n");
  return 0;
}

}  // namespace

Runner add_window_bench(CLI::App& app) {
  auto a = std::make_shared<WindowBenchArgs>();
  add_model_option(app, a->model);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (for text items)")
      ->check(CLI::ExistingFile);
  app.add_option("--items", a->items,
                 "JSONL items (as reuse-bench); their antecedents and chunks form the chunk pool, "
                 "their queries the probes (required but with --scenario estimate --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option(
         "--scenario", a->scenario,
         "slide, reorder, recall, all (the three), or placement (chunk order as a "
         "scheduling variable over synthetic agent traces: reread, rerank, revisit), or cascade "
         "(refresh policies for the stale dependents of recalls), or estimate (cheap estimates of "
         "a "
         "reused segment's change against the true KL: slide, reorder, recall compositions)")
      ->capture_default_str()
      ->check(
          CLI::IsMember({"slide", "reorder", "recall", "all", "placement", "cascade", "estimate"}));
  app.add_option("--mmproj", a->mmproj,
                 "estimate: the mini-VL's encoder (-m its decoder): held-out clips' frames as "
                 "segments instead of --items")
      ->check(CLI::ExistingFile);
  app.add_option("--antecedents", a->antecedents,
                 "estimate: antecedents of the stored context (mini-VL: at most 5)")
      ->capture_default_str()
      ->check(CLI::Range(2, 8));
  app.add_option("--kl-threshold", a->kl_threshold,
                 "estimate: a skipped case with a KL above this is a false skip")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rank", a->rank,
                 "Patch rank of the reorder, recall and estimate patch arms (0 = full; capped at "
                 "min(tokens, "
                 "KV width))")
      ->capture_default_str();
  app.add_option("--removal-ranks", a->removal_ranks, "slide: ranks of the removal patch")
      ->capture_default_str();
  app.add_option("--k", a->ks,
                 "reorder: antecedent set sizes K (exhaustive up to --samples orderings)")
      ->capture_default_str();
  app.add_option("--samples", a->samples, "reorder: orderings sampled when K! is larger")
      ->capture_default_str();
  app.add_option(
         "--window-chunks", a->window_chunks,
         "recall, cascade: chunks in the window (recall: turnover tau steps by 1/window-chunks)")
      ->capture_default_str();
  app.add_option("--steps", a->steps, "placement, cascade: questions per trace")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--set-size", a->set_size, "placement: chunks shown per question")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  app.add_option("--pool-chunks", a->pool_chunks, "placement, cascade: distinct chunks of a trace")
      ->capture_default_str()
      ->check(CLI::Range(2, 4096));
  app.add_option(
         "--plans", a->plans,
         "placement: patch plans, comma-separated: fixed (every chunk behind another, the "
         "fixed rank), adaptive (blind or a smaller rank, learned per chunk from its formed "
         "patches)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"fixed", "adaptive"}));
  app.add_option("--plan-blind", a->plan_blind,
                 "placement, adaptive plan: serve a chunk blind when its patches carried less than "
                 "this share of its canonical's energy (median)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--plan-energy", a->plan_energy,
                 "placement, adaptive plan: the planned rank keeps this share of the first "
                 "patch's energy")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--patch-budget", a->patch_budget,
                 "placement: bytes of patches the store keeps, least recently used dropped first "
                 "(0 = no cap)")
      ->capture_default_str();
  app.add_option("--probe-tokens", a->probe_tokens,
                 "cascade: tokens the staleness probe re-forwards per dependent")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--recall-share", a->recall_share,
                 "cascade: share of steps that recall an evicted chunk")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--thresholds", a->thresholds,
                 "cascade: probe thresholds (relative row error) of the refresh policy")
      ->capture_default_str();
  app.add_option("--share-thresholds", a->share_thresholds,
                 "cascade: thresholds of the free signal (changed antecedent token share)")
      ->capture_default_str();
  app.add_option("--limit", a->limit,
                 "Items used per scenario (0 = all; estimate with --mmproj: clips, 0 = 100)")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Seed of the chunk choices")->capture_default_str();
  add_threads_option(app, a->threads);
  app.add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  app.add_flag("--json", a->json, "Print the result as JSON");
  return [a] { return run(*a); };
}

}  // namespace kamera::cli
