// kamera demo: the agent demo on the mini vision-language model (demo/agent_demo.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "demo/agent_demo.h"
#include "demo/binding_trace.h"
#include "reuse/patch.h"
#include "tools/cli_common.h"
#include "tools/cmd_demo_frames.h"

namespace kamera::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultPng = "build/demo/agent-demo.png";

struct DemoArgs {
  std::string decoder = minivl::kDecoderFile, vision = minivl::kVisionFile;
  std::string rank = "16", png, save_frames;
  int frames = 24, window = 6, reps = 5, recall_every = 4, threads = 1;
  uint64_t clip = 0;
  bool random_weights = false, json = false, quiet = false;
  // --frames DIR: a user's Qwen2-VL model on a folder of frames (cmd_demo_frames.h)
  std::string frames_arg = "24", question;
  int reorder_every = 4;
  // --binding reorder|recall: a frame trace that binds across frames (demo/binding_trace.h)
  std::string binding;
  int reorders = 2;
  bool decoder_given = false, vision_given = false, window_given = false, recall_given = false,
       reps_given = false;
};

// --frames: a stream length (the mini-VL demo) or a folder (the frames demo).
int run_frames(const DemoArgs& a) {
  if (!a.save_frames.empty())
    return fail("--save-frames writes the mini-VL stream's frames; --frames DIR reads yours",
                a.json);
  if (!a.decoder_given || !a.vision_given || a.random_weights)
    return fail(
        "--frames DIR runs the demo on your Qwen2-VL model: give --decoder (the decoder GGUF) "
        "and --vision (its mmproj GGUF)",
        a.json);
  FramesDemoArgs f;
  f.decoder = a.decoder;
  f.vision = a.vision;
  f.dir = a.frames_arg;
  f.rank = a.rank;
  f.question = a.question;
  f.window = a.window_given ? a.window : 0;
  f.reps = a.reps_given ? a.reps : 3;
  f.recall_every = a.recall_given ? a.recall_every : 3;
  f.reorder_every = a.reorder_every;
  f.threads = a.threads;
  f.json = a.json;
  f.quiet = a.quiet;
  return run_frames_demo_cli(f);
}

const char* kDescription =
    "\nThe agent demo on the mini vision-language model (a vision encoder + a Qwen2-VL-style\n"
    "decoder with M-RoPE, trained to answer one-word questions about clips of 32x32 frames with\n"
    "coloured shapes). An agent watches a stream of --frames frames through a sliding window of\n"
    "--window frames:\n"
    "  - each frame is encoded once by the vision encoder (the vision cache) and cached as a\n"
    "    position-free chunk;\n"
    "  - when the window is full, the oldest frame is evicted (the survivors keep their KV and\n"
    "    only move: a position-metadata write, checked bit-for-bit) and the new frame is admitted\n"
    "    with a rank-R conditioning patch formed on the window it joins;\n"
    "  - at every step a question is asked about the window (frame words f0.. count within the\n"
    "    window), alternately single-hop (one frame) and cross-frame (two frames bound together);\n"
    "    every 4th is a RECALL question about a frame evicted earlier, answered on a fork of the\n"
    "    window where the oldest frame is dropped and the evicted one is recalled at the front.\n"
    "Every question is answered twice: kamera (the question forwarded over the cached window:\n"
    "its TTFT is that forward) and re-prefill (one forward over <bos>, the same frames'\n"
    "embeddings and the question: a prefix-cache miss). One line per step shows the window, the\n"
    "question, the gold / kamera / re-prefill answers, both TTFTs and the cache operations; a\n"
    "summary table follows (accuracy, agreement, KL, TTFT speedup per question type).\n"
    "The picture (--png): the stream's frames on top; one row per step below, one box per frame:\n"
    "grey = in the window, green = admitted at this step, yellow = recalled (on the fork), orange\n"
    "= left out of the fork, light = outside; on the right per question a red bar (re-prefill\n"
    "TTFT) above a blue bar (kamera TTFT), on one scale.";

std::string missing_message(const std::string& what, const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return fmt::format(
      "the mini-VL {} {} was not found (looked for {}). The trained weights are committed with "
      "the repository ({} and {}): run the demo from the repository root, update the checkout "
      "if it predates them, or pass --decoder and --vision (docs/MINIVL.md: how they are trained "
      "with kamera-train). To see the mechanics on seeded "
      "random weights instead (answers are noise, timings and cache operations are real): "
      "kamera demo --random-weights",
      what, path, ec ? path : abs.string(), minivl::kDecoderFile, minivl::kVisionFile);
}

std::string bytes_text(double b) {
  if (b < 1024) return fmt::format("{:.0f} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  return fmt::format("{:.2f} MiB", b / (1024 * 1024));
}

std::string ops_text(const DemoStep& st) {
  const DemoOps& o = st.ops;
  std::string s;
  if (st.evicted >= 0) s += fmt::format("-f{} ", st.evicted);
  s += fmt::format("+f{}", st.step);
  if (st.recalled >= 0)
    s += fmt::format(" | fork -f{} recall f{} ({} fwd)", st.fork_dropped, st.recalled,
                     st.fork_forwards);
  if (o.chunks_relocated)
    s += fmt::format(" | reloc {}ch/{}tok{}", o.chunks_relocated, o.tokens_relocated,
                     st.relocation_checked ? (st.relocation_exact ? " exact" : " CHANGED") : "");
  s += fmt::format(" | {} fwd", o.forwards - st.fork_forwards);
  if (o.canonicals_formed || o.patches_formed)
    s += fmt::format(" ({}{}{})", o.canonicals_formed ? "canon" : "",
                     o.canonicals_formed && o.patches_formed ? "+" : "",
                     o.patches_formed ? "patch" : "");
  s += fmt::format(" | {} | {:.2f} ms", bytes_text(double(o.kv_bytes_written)), o.cache_ms);
  return s;
}

// What the run is: the stream, the model, the patches, what each arm does.
void print_intro(const AgentDemoResult& r) {
  const AgentDemoOptions& o = r.options;
  std::printf(
      "kamera demo: an agent watches a %d-frame stream (Test stream %llu) through a window of "
      "%d frames\n",
      o.n_frames, (unsigned long long)o.clip, o.window);
  const std::string model =
      r.decoder_path == r.vision_path ? r.decoder_path : r.decoder_path + " + " + r.vision_path;
  std::printf("  model    %s (%d tokens per frame), %d thread%s\n", model.c_str(),
              r.tokens_per_frame, r.threads, r.threads == 1 ? "" : "s");
  std::printf("  patches  rank %d%s\n", r.rank_used,
              r.rank_is_full
                  ? fmt::format(" (full: a frame has {} tokens)", r.tokens_per_frame).c_str()
                  : "");
  std::printf(
      "  per step the new frame is encoded once and cached; a full window slides: evict the "
      "oldest\n           (survivors only relocate), admit the new frame with a patch formed on "
      "the window\n");
  std::printf(
      "  kamera   = the question forwarded over the cached window; re-prefill = one forward "
      "over\n           [<bos>, the same %d frames' embeddings, question]; TTFT = median of %d "
      "runs\n",
      o.window, o.reps);
  std::printf(
      "  types    1hop = single-hop, cross = cross-frame, recall = about an evicted "
      "frame (f0 on a fork)\n\n");
}

// One line per step: the window, the question with the three answers and both TTFTs, the
// cache operations.
void print_step(const DemoStep& st) {
  const std::string win = fmt::format("f{}-f{}", st.window_first, st.window_last);
  if (!st.question) {
    std::printf("%4d +f%-3d %-8s %-6s %-50s %-8s %-8s %-8s %9s %9s %6s  %s\n", st.step, st.step,
                win.c_str(), "-", "(window filling)", "", "", "", "", "", "", ops_text(st).c_str());
    return;
  }
  const DemoQuestion& q = *st.question;
  const char* type = q.type == DemoQuestionType::SingleHop    ? "1hop"
                     : q.type == DemoQuestionType::CrossFrame ? "cross"
                                                              : "recall";
  std::string text = q.text;
  if (st.recalled >= 0) text = fmt::format("[f0=f{}] ", st.recalled) + text;
  if (q.fallback) text += " (no cross)";
  const auto& w = minivl::words();
  auto word = [&](int32_t id) {
    return id >= 0 && size_t(id) < w.size() ? w[size_t(id)] : std::string("?");
  };
  std::printf("%4d +f%-3d %-8s %-6s %-50s %-8s %-8s %-8s %9.3f %9.3f %5.1fx  %s\n", st.step,
              st.step, win.c_str(), type, text.c_str(), word(q.gold).c_str(),
              word(q.kamera).c_str(), word(q.reprefill).c_str(), q.reprefill_ms, q.kamera_ms,
              q.kamera_ms > 0 ? q.reprefill_ms / q.kamera_ms : 0.0, ops_text(st).c_str());
}

void print_steps(const AgentDemoResult& r) {
  std::printf("%4s %-5s %-8s %-6s %-50s %-8s %-8s %-8s %9s %9s %6s  %s\n", "step", "in", "window",
              "type", "question", "gold", "kamera", "reprefil", "reprf ms", "kamera ms", "ratio",
              "cache ops (slide | admit | fork: chunks, forwards, bytes)");
  for (const auto& st : r.steps) print_step(st);
  std::printf("\n");
}

// Accuracy, agreement, KL and TTFT per question type.
void print_type_table(const AgentDemoResult& r) {
  std::printf("%-12s %4s %11s %15s %9s %10s %11s %11s %8s\n", "question", "n", "kamera acc",
              "re-prefill acc", "agree", "mean KL", "reprf ms", "kamera ms", "speedup");
  auto row = [](const char* name, const DemoTypeSummary& s) {
    if (!s.count) {
      std::printf("%-12s %4d\n", name, 0);
      return;
    }
    std::printf("%-12s %4d %10.0f%% %14.0f%% %8.0f%% %10.2e %11.3f %11.3f %7.1fx\n", name, s.count,
                100.0 * s.kamera_correct / s.count, 100.0 * s.reprefill_correct / s.count,
                100.0 * s.agree / s.count, s.mean_kl, s.reprefill_ms, s.kamera_ms,
                s.kamera_ms > 0 ? s.reprefill_ms / s.kamera_ms : 0.0);
  };
  for (int i = 0; i < 3; ++i)
    row(demo_question_type_name(DemoQuestionType(i)), r.by_type[size_t(i)]);
  row("all", r.all);
  const int cross_fallbacks = r.by_type[0].fallbacks;
  if (cross_fallbacks)
    std::printf("(%d cross-frame turns had no well-posed event in the window: asked single-hop)\n",
                cross_fallbacks);
}

// The TTFT speedup, the cache's work over the run, the wall time and the picture.
void print_totals(const AgentDemoResult& r) {
  const DemoOps& t = r.totals;
  std::printf(
      "\nTTFT: re-prefill %.3f ms, kamera %.3f ms per question: %.1fx faster (median per "
      "question %.1fx)\n",
      r.all.reprefill_ms, r.all.kamera_ms, r.speedup, r.median_speedup);
  std::printf(
      "cache: %d frames encoded once (%.1f ms); %d canonicals and %d rank-%d patches formed, %d "
      "patches applied;\n       %d slides: %d chunks / %lld tokens relocated, no KV byte moved "
      "(survivors bit-identical: %s);\n       %d recalls on forks (%lld pages copied-on-write); "
      "%s written into the pool, %s of patches stored\n",
      t.frames_encoded, t.vision_ms, t.canonicals_formed, t.patches_formed, r.rank_used,
      t.patches_applied, t.chunks_evicted - t.chunks_recalled, t.chunks_relocated,
      (long long)t.tokens_relocated, r.relocation_exact ? "yes" : "NO", t.chunks_recalled,
      (long long)t.cow_pages, bytes_text(double(t.kv_bytes_written)).c_str(),
      bytes_text(double(t.patch_bytes)).c_str());
  const int admits = std::max(1, t.chunks_admitted);
  std::printf(
      "       admission work (off the question path, when a frame arrives): %d forwards over "
      "%lld tokens,\n       %.2f ms per frame on average (the patch's conditioned forward runs "
      "the whole window;\n       for scale: one re-prefill costs %.3f ms per question)\n",
      t.forwards, (long long)t.tokens_forwarded, t.cache_ms / admits, r.all.reprefill_ms);
  std::printf("wall time %.2f s\n", r.wall_s);
  if (!r.png_written.empty())
    std::printf(
        "picture: %s (%d x %d): the stream on top; one row per step: grey = in the window, "
        "green = admitted,\n         yellow = recalled (fork), orange = left out of the fork; red "
        "bar = re-prefill TTFT, blue = kamera TTFT\n",
        r.png_written.c_str(), r.png_width, r.png_height);
}

void print_human(const AgentDemoResult& r, bool quiet) {
  if (!quiet) {
    print_intro(r);
    print_steps(r);
  }
  print_type_table(r);
  print_totals(r);
}

// --binding: the trace only (no model runs): its JSON, and its frames under --save-frames.
int run_binding(const DemoArgs& a) {
  BindingTraceOptions o;
  o.mode = a.binding;
  o.n_frames = a.frames;
  o.window = a.window;
  o.clip = a.clip;
  o.reorders = a.reorders;
  o.recall_every = a.recall_given ? a.recall_every : 2;
  auto t = make_binding_trace(o);
  if (!t.ok()) return fail(t.error(), true);
  if (!a.save_frames.empty())
    if (auto st = write_binding_frames(*t, a.save_frames); !st.ok())
      return fail(st.message(), true);
  print_json(binding_trace_json(*t), 1);
  return 0;
}

int run(DemoArgs a) {
  if (a.frames_arg.empty() || a.frames_arg.find_first_not_of("0123456789") != std::string::npos)
    return run_frames(a);
  if (a.frames_arg.size() > 6 || std::stoi(a.frames_arg) < 2 ||
      std::stoi(a.frames_arg) > minivl::kMaxStreamFrames)
    return fail(fmt::format("--frames: {} not in [2 - {}] (or a folder of frames)", a.frames_arg,
                            minivl::kMaxStreamFrames),
                a.json);
  a.frames = std::stoi(a.frames_arg);
  if (!a.binding.empty()) return run_binding(a);
  std::string decoder = a.decoder, vision = a.vision;
  std::string tmpdir;
  if (a.random_weights) {
    char tmpl[] = "/tmp/kamera-demo-XXXXXX";
    if (!::mkdtemp(tmpl))
      return fail("cannot create a temporary folder for random weights", a.json);
    tmpdir = tmpl;
    decoder = tmpdir + "/minivl-random.gguf";
    vision = tmpdir + "/minivl-random-mmproj.gguf";
    if (auto st = minivl::write_random_minivl(decoder, vision, 1); !st.ok())
      return fail(st.message(), a.json);
  } else {
    if (!fs::exists(decoder)) return fail(missing_message("decoder", decoder), a.json);
    if (!fs::exists(vision)) return fail(missing_message("vision encoder", vision), a.json);
  }
  auto cleanup = [&] {
    if (!tmpdir.empty()) {
      std::error_code ec;
      fs::remove_all(tmpdir, ec);
    }
  };
  auto m = minivl::MiniVl::load(decoder, vision);
  if (!m.ok()) {
    cleanup();
    return fail(m.message(), a.json);
  }
  cleanup();

  AgentDemoOptions o;
  o.n_frames = a.frames;
  o.window = a.window;
  o.clip = a.clip;
  o.reps = a.reps;
  o.recall_every = a.recall_every;
  if (a.rank == "full" || a.rank == "0") {
    o.rank = kFullRank;
  } else {
    char* end = nullptr;
    const long v = std::strtol(a.rank.c_str(), &end, 10);
    if (a.rank.empty() || *end != '\0' || v < 1 || v > 100000)
      return fail("--rank: '" + a.rank + "' is not a positive integer or 'full'", a.json);
    o.rank = int(v);
  }
  if (a.png.empty()) {
    std::error_code ec;
    if (fs::is_directory(fs::path(kDefaultPng).parent_path(), ec) &&
        a.frames <= kAgentDemoPngMaxFrames)
      o.png_path = kDefaultPng;
  } else if (a.png != "none") {
    o.png_path = a.png;
  }
  o.frames_dir = a.save_frames;

  ContextOptions co = agent_demo_context(o, a.threads);
  co.kv_type = kv_type_option();
  auto ctx = Context::create(m->decoder, co);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_agent_demo(*m, **ctx, o);
  if (!r.ok()) return fail(r.message(), a.json);
  r->decoder_path = a.random_weights ? "seeded random weights (seed 1)" : decoder;
  r->vision_path = a.random_weights ? "seeded random weights (seed 1)" : vision;
  if (a.json) {
    json j = agent_demo_json(*r);
    j["config"]["random_weights"] = a.random_weights;
    print_json(j, 2);
    return 0;
  }
  if (a.random_weights)
    std::printf(
        "NOTE: seeded random weights (--random-weights): the answers are noise; the timings and "
        "cache operations are real.\n");
  print_human(*r, a.quiet);
  return 0;
}

}  // namespace

Runner add_demo(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  app.footer(kDescription);
  auto* dec = app.add_option("--decoder", a->decoder,
                             "Decoder GGUF (qwen2vl, the word vocabulary), relative to the "
                             "current folder; with --frames DIR: your Qwen2-VL decoder")
                  ->capture_default_str();
  auto* vis = app.add_option("--vision", a->vision,
                             "Vision encoder GGUF (mmproj-style); with --frames DIR: your "
                             "Qwen2-VL / Qwen2.5-VL mmproj")
                  ->capture_default_str();
  app.add_flag("--random-weights", a->random_weights,
               "Use seeded random weights of the same shapes instead of the files (answers are "
               "noise; shows the mechanics)");
  app.add_option("--frames", a->frames_arg,
                 fmt::format("Stream length N (frames, 2 - {}), or a folder of PNG / JPEG frames "
                             "(sorted by name) watched by your --decoder / --vision pair",
                             minivl::kMaxStreamFrames))
      ->capture_default_str();
  auto* win = app.add_option("--window", a->window,
                             "Frames in the window W (the model was trained on 6; --frames DIR: "
                             "default min(4, frames))")
                  ->capture_default_str()
                  ->check(CLI::Range(2, minivl::kMaxFrames));
  app.add_option("--question", a->question,
                 "--frames DIR: the question asked after the window (default: \"What changed "
                 "between the frames?\")");
  app.add_option("--reorder-every", a->reorder_every,
                 "--frames DIR: every k-th question is asked on the reversed window (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--binding", a->binding,
                 "Print a frame trace that binds across frames instead of running the demo "
                 "(JSON; no model runs): 'reorder' (each set of --window frames asked in stream "
                 "order, then --reorders times re-sorted) or 'recall' (a sliding window; every "
                 "--recall-every-th question, default 2, puts an evicted frame back at a drawn "
                 "place); with --save-frames, its frames. scripts/minivl_frames.py --binding")
      ->check(CLI::IsMember({"reorder", "recall"}));
  app.add_option("--reorders", a->reorders, "--binding reorder: re-sorted views per set")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--clip", a->clip, "Which Test-split stream (seed index)")->capture_default_str();
  app.add_option("--rank", a->rank,
                 "Patch rank R, or 'full' (capped at a frame's token count, where it is full)")
      ->capture_default_str();
  app.add_option("--png", a->png,
                 fmt::format("Picture of the run (default {} when that folder exists; 'none': "
                             "no picture; streams of up to {} frames)",
                             kDefaultPng, kAgentDemoPngMaxFrames));
  app.add_option("--save-frames", a->save_frames,
                 "Write each stream frame as DIR/frame-NNNN.png (32 x 32 RGB) for other clients "
                 "(kamera serve, a replay: scripts/minivl-frames.py); the JSON's questions name "
                 "the frames they see (\"frames\")");
  auto* reps =
      app.add_option("--reps", a->reps,
                     "Timed runs of each arm per question (the median is shown; --frames DIR: 3)")
          ->capture_default_str()
          ->check(CLI::Range(1, 100));
  auto* recall = app.add_option("--recall-every", a->recall_every,
                                "Every k-th question is a recall question (0: none; --frames "
                                "DIR: 3)")
                     ->capture_default_str()
                     ->check(CLI::Range(0, 1000));
  app.add_option("-t,--threads", a->threads,
                 "Threads (the model is tiny: one thread is the fastest for both arms, and keeps "
                 "the timings steady on a busy machine)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("-q,--quiet", a->quiet, "Only the summary (no per-step lines)");
  app.add_flag("--json", a->json, "Print everything (steps and summary) as one JSON object");
  return [a, dec, vis, win, reps, recall] {
    a->decoder_given = dec->count() > 0;
    a->vision_given = vis->count() > 0;
    a->window_given = win->count() > 0;
    a->reps_given = reps->count() > 0;
    a->recall_given = recall->count() > 0;
    return run(*a);
  };
}

}  // namespace kamera::cli
