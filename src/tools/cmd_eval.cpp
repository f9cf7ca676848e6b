// kamera eval: the evaluation suite (every arm of the reuse harness, the literature's baselines,
// the deficit's anatomy, serve-vs-re-prefill time by chunk length) on one model, as JSON for
// `kamera report`.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "eval/minivl_eval.h"
#include "eval/suite.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {

struct EvalArgs {
  std::string model, tokenizer, suite = "smoke", items, data_dir = "data", out, mmproj;
  int threads = default_threads();
  int clips = 100;
  std::string clip_range = "heldout";
  std::string patch_kind = "svd";
  std::vector<int> ranks;  // mini-vl: empty = MiniVlEvalOptions' default
  bool json = false, quiet = false, two_frame = false;
};

std::string pct(const json& x) {
  return x.is_null() ? std::string("-") : fmt::format("{:.3f}", x.get<double>());
}

// --suite mini-vl: the project's trained vision-language model on held-out clips.
int run_minivl_suite(const EvalArgs& a) {
  const std::string dec = a.model.empty() ? minivl::kDecoderFile : a.model;
  const std::string vis = a.mmproj.empty() ? minivl::kVisionFile : a.mmproj;
  for (const std::string& f : {dec, vis})
    if (!std::filesystem::exists(f))
      return fail(fmt::format("{} does not exist: the mini-VL weights are committed under "
                              "models/minivl/ (run from the repository root), or pass -m and "
                              "--mmproj",
                              f),
                  a.json);
  auto mv = minivl::MiniVl::load(dec, vis);
  if (!mv.ok()) return fail(mv.message(), a.json);
  MiniVlEvalOptions o;
  o.n_clips = a.clips;
  o.first_clip = a.clip_range == "dev" ? kMiniVlDevFirstClip : 0;
  o.output_patches = a.patch_kind == "both";
  o.two_frame = a.two_frame;
  for (int r : a.ranks)
    if (r < 1 && r != kFullRank)
      return fail(fmt::format("--ranks: {} is not a rank (>= 1, or -1 for full)", r), a.json);
  if (!a.ranks.empty()) o.ranks = a.ranks;
  ContextOptions co = minivl_eval_context(*mv, o, a.threads);
  co.kv_type = kv_type_option();
  auto ctx = Context::create(mv->decoder, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  const double t0 = now_ms();
  if (!a.quiet)
    o.progress = [&](int done, int total) {
      if (done % std::max(1, total / 10) != 0 && done != total) return;
      const double el = (now_ms() - t0) / 1e3;
      std::fprintf(stderr, "kamera: eval mini-vl: %d/%d clips, %.1f s, ETA %.1f s\n", done, total,
                   el, el / done * (total - done));
    };
  auto r = run_minivl_eval(*mv, **ctx, o);
  if (!r.ok()) return fail(r.message(), a.json);
  json& j = *r;
  j["model_name"] = "minivl";
  j["decoder"] = dec;
  j["mmproj"] = vis;
  j["threads"] = a.threads;
  j["seconds"] = (now_ms() - t0) / 1e3;
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << j.dump(1) << "\n";
    if (!f) return fail(fmt::format("--out {}: write failed", a.out), a.json);
  }
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  std::printf("mini-vl: %d held-out clips, %d questions, %.1f s\n", j["clips"].get<int>(),
              j["questions"].get<int>(), j["seconds"].get<double>());
  std::printf("  %-16s %-10s %9s %9s %9s %9s %9s %8s %8s %9s\n", "arm", "knob", "acc single",
              "acc cross", "acc two", "KL", "eta", "flips", "flip_rec", "bytes");
  for (const auto& arm : j["arms"]) {
    const auto& fam = arm["by_family"];
    const auto& all = fam["all"];
    auto acc = [&](const char* f) {
      return fam.contains(f) ? fmt::format("{:.3f}", fam[f]["accuracy"].get<double>())
                             : std::string("-");
    };
    std::printf("  %-16s %-10s %9s %9s %9s %9.2e %9s %8d %8s %9.3f\n",
                arm["arm"].get<std::string>().c_str(), arm["knob"].get<std::string>().c_str(),
                acc("single_hop").c_str(), acc("cross_frame").c_str(), acc("two_frame").c_str(),
                all["kl"].get<double>(), pct(all["eta"]).c_str(), all["flips"].get<int>(),
                pct(all["flip_recover"]).c_str(), arm["extra_bytes_fraction"].get<double>());
  }
  if (!a.out.empty()) std::printf("\nwrote %s\n", a.out.c_str());
  return 0;
}

// The splits: --items alone, or the default item files (seeded random items without them).
Result<std::vector<EvalSplit>> eval_splits(const EvalArgs& a, const Model& m, bool smoke) {
  if (a.items.empty()) return default_splits(m, a.data_dir, smoke);
  KAMERA_ASSIGN_OR_RETURN(auto items, load_reuse_items(a.items, m));
  std::vector<EvalSplit> splits;
  splits.push_back({"items", a.items, "dev", std::move(items)});
  return splits;
}

// --out must be writable: fail before the long run, not after it.
bool out_writable(const std::string& out) {
  const auto dir = std::filesystem::path(out).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream probe(out, std::ios::app);
  return bool(probe);
}

// Progress of the suite's stages on stderr: on a terminal one line updates in place; in a log,
// a line per tenth of the stage.
struct StageProgress {
  double t0 = 0, stage_t0 = 0;
  bool tty = false;
  std::string last_stage{};

  void operator()(const std::string& stage, int done, int total) {
    if (stage != last_stage) {
      last_stage = stage;
      stage_t0 = now_ms();
    }
    if (!tty && done != total && done % std::max(1, total / 10) != 0) return;
    const double el = (now_ms() - stage_t0) / 1e3;
    std::fprintf(stderr, "%skamera: eval %s: %d/%d done, %.1f s, ETA %.1f s (total %.1f s)%s",
                 tty ? "\r" : "", stage.c_str(), done, total, el, el / done * (total - done),
                 (now_ms() - t0) / 1e3, tty && done != total ? "   " : "\n");
  }
};

ContextOptions eval_context_options(const EvalArgs& a, const std::vector<EvalSplit>& splits,
                                    const SuiteOptions& so) {
  ContextOptions co;
  co.swa_full = true;  // reuse measured on every row of sliding-window layers
  co.kv_type = kv_type_option();
  co.n_threads = a.threads;
  co.kv_tokens = suite_kv_tokens(splits, so);
  co.store_bytes = size_t(1) << 34;
  return co;
}

std::string knob_text(const json& arm) {
  std::string knob = arm["param"].get<std::string>();
  if (knob.empty() && !arm["rank"].is_null())
    knob = "rank=" + (arm["rank"].is_string() ? arm["rank"].get<std::string>()
                                              : std::to_string(arm["rank"].get<int>()));
  return knob;
}

// The result as tables: per split its arms, then serve vs re-prefill by chunk length.
void print_suite(const EvalArgs& a, const Model& m, const json& j) {
  std::printf("%s (%s), suite %s, %.1f s\n", j["model_name"].get<std::string>().c_str(),
              arch_name(m.cfg.arch), a.suite.c_str(), j["seconds"].get<double>());
  for (const auto& s : j["splits"]) {
    const auto& res = s["result"];
    std::printf("\nsplit %s (%s, %d items, %d flips)\n", s["name"].get<std::string>().c_str(),
                s["role"].get<std::string>().c_str(), res["n_items"].get<int>(),
                res["n_flips"].get<int>());
    std::printf("  %-20s %-16s %11s %8s %8s %9s %9s\n", "arm", "knob", "kl", "eta", "flip_rec",
                "bytes", "recompute");
    for (const auto& arm : res["arms"])
      std::printf("  %-20s %-16s %11.3e %8s %8s %9.3f %9.3f\n",
                  arm["name"].get<std::string>().c_str(), knob_text(arm).c_str(),
                  arm["kl"].get<double>(), pct(arm["eta"]).c_str(),
                  pct(arm["flip_recover"]).c_str(), arm["patch_bytes_fraction"].get<double>(),
                  arm["recompute_fraction"].get<double>());
  }
  std::printf("\nserve vs re-prefill of the chunk (median ms):\n");
  for (const auto& t : j["timing_by_length"])
    std::printf("  %4d tokens: re-prefill %.3f, blind %.3f, patch(rank %d) %.3f\n",
                t["chunk_tokens"].get<int>(), t["reprefill_ms"].get<double>(),
                t["blind_ms"].get<double>(), t["patch_rank"].get<int>(),
                t["patch_ms"].get<double>());
  if (!a.out.empty()) std::printf("\nwrote %s\n", a.out.c_str());
}

int run_eval_cmd(const EvalArgs& a) {
  if (a.suite == "mini-vl") return run_minivl_suite(a);
  if (a.model.empty()) return fail("--model is required (except for --suite mini-vl)", a.json);
  auto loaded = load_for_cli(a.model, a.tokenizer);
  if (!loaded.ok()) return fail(loaded.message(), a.json);
  const Model& m = **loaded;
  const bool smoke = a.suite == "smoke";
  auto splits = eval_splits(a, m, smoke);
  if (!splits.ok()) return fail(splits.message(), a.json);
  if (!a.out.empty() && !out_writable(a.out))
    return fail(fmt::format("--out {}: cannot write", a.out), a.json);
  SuiteOptions so;
  so.smoke = smoke;
  so.output_patches = a.patch_kind == "both";
  if (smoke) so.timing_lengths = {16, 64};
  const double t0 = now_ms();
  StageProgress progress{t0, t0, isatty(2) != 0};
  if (!a.quiet) {
    so.progress = [&progress](const std::string& stage, int done, int total) {
      progress(stage, done, total);
    };
    for (const auto& s : *splits)
      std::fprintf(stderr, "kamera: eval split %s: %zu items from %s (%s)\n", s.name.c_str(),
                   s.items.size(), s.source.c_str(), s.role.c_str());
  }
  auto ctx = Context::create(*loaded, eval_context_options(a, *splits, so));
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_eval_suite(**ctx, *splits, so);
  if (!r.ok()) return fail(r.message(), a.json);
  json& j = *r;
  j["model"] = model_summary(m);
  j["model_name"] = std::filesystem::path(m.source).stem().string();
  j["threads"] = a.threads;
  j["seconds"] = (now_ms() - t0) / 1e3;
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << j.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!f) return fail(fmt::format("--out {}: write failed", a.out), a.json);
  }
  if (a.json) {
    print_json(j, 2);
    return 0;
  }
  print_suite(a, m, j);
  return 0;
}

}  // namespace

Runner add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  app.footer(
      "Splits: data/reuse-<model stem>.jsonl (dev: defaults were chosen on it) and\n"
      "data/heldout/reuse-<model stem>.jsonl (held out: never used for tuning) when both exist;\n"
      "otherwise seeded random-token items (synthetic models: exactness and speed, not accuracy).\n"
      "M-RoPE models add frame items (embedding chunks on a (t, h, w) grid).\n"
      "Example: kamera eval -m stories260K.bin -z tok512.bin --suite all -o results/stories.json");
  app.add_option("-m,--model", a->model,
                 "Model file: .gguf, or a llama2.c checkpoint (.bin); for mini-vl the decoder")
      ->check(CLI::ExistingFile);
  app.add_option("-z,--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (for text items)")
      ->check(CLI::ExistingFile);
  app.add_option("--suite", a->suite,
                 "smoke: 4 items per split and short sweeps (CI); all: every item and sweep; "
                 "mini-vl: the project's vision-language model on held-out clips (accuracy by "
                 "question family per arm; -m/--mmproj default to models/minivl/)")
      ->capture_default_str()
      ->check(CLI::IsMember({"smoke", "all", "mini-vl"}));
  app.add_option("--mmproj", a->mmproj, "mini-vl: the vision encoder GGUF (mmproj-style)");
  app.add_option("--clips", a->clips, "mini-vl: held-out clips (all their questions)")
      ->capture_default_str();
  app.add_option("--clip-range", a->clip_range,
                 "mini-vl: heldout (test clips from 0, the reported range) or dev (test clips "
                 "from 100000); neither is trained on")
      ->capture_default_str()
      ->check(CLI::IsMember({"heldout", "dev"}));
  app.add_flag("--two-frame", a->two_frame,
               "mini-vl: clips with the two-frame question family too (mini-VL v2, "
               "models/minivl-v2/)");
  app.add_option("--ranks", a->ranks,
                 "mini-vl: patch ranks, e.g. 1,2,4,8,16 (-1: full; default 1,2,4,16,64,-1)")
      ->delimiter(',');
  app.add_option("--items", a->items, "Use this JSONL file as the only split")
      ->check(CLI::ExistingFile);
  app.add_option("--patch-kind", a->patch_kind,
                 "svd: the rank-m SVD patch arms; both: also output-aware patch arms "
                 "(patch_output) at the same ranks and bytes (docs/PATCHES.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"svd", "both"}));
  app.add_option("--data-dir", a->data_dir, "Where the default item files are")
      ->capture_default_str();
  app.add_option("-o,--out", a->out, "Write the result JSON here (for kamera report)");
  add_threads_option(app, a->threads);
  app.add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  app.add_flag("--json", a->json, "Print the full result as JSON");
  return [a] { return run_eval_cmd(*a); };
}

}  // namespace kamera::cli
