#include "tools/cmd_demo_frames.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "demo/frames_demo.h"
#include "media/image.h"
#include "reuse/patch.h"
#include "tools/cli_common.h"
#include "vision/qwen_preprocess.h"

namespace kamera::cli {

namespace {

// KV pool room: the window, its forks and scratch sequences, re-prefill, blind (largest frame).
Result<int64_t> kv_tokens_for(const std::vector<std::string>& frames, const QwenVisionModel& tower,
                              int window) {
  const QwenImageOptions opt = QwenImageOptions::from(tower.cfg);
  int64_t most = 0;
  for (const auto& f : frames) {
    KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(f));
    KAMERA_ASSIGN_OR_RETURN(
        const ResizedSize s,
        qwen_smart_resize(img.height, img.width, opt.factor(), opt.min_pixels, opt.max_pixels));
    most = std::max<int64_t>(most, int64_t(s.height / opt.factor()) * (s.width / opt.factor()));
  }
  return 8 * int64_t(window + 2) * (most + 2 + 16) + 1024;
}

std::string kl_text(double v) {
  return fmt::format("{:.2e}", v);
}

void print_human(const FramesDemoResult& r, bool quiet) {
  const FramesDemoOptions& o = r.options;
  std::printf("kamera demo: an agent watches %d frames through a window of %d\n", r.n_frames,
              o.window);
  std::printf("  model    %s + %s, %d thread%s\n", r.decoder_path.c_str(), r.vision_path.c_str(),
              r.threads, r.threads == 1 ? "" : "s");
  std::printf("  question \"%s\"; patches rank %s\n", o.question.c_str(),
              o.rank == kFullRank ? "full" : std::to_string(o.rank).c_str());
  std::printf(
      "  kamera = the question over the cached window; re-prefill = one forward over [anchor, "
      "the same frames, question];\n  blind = the frames' canonicals without patches. KL against "
      "re-prefill; flip = the argmax differs\n\n");
  if (!quiet) {
    std::printf("%4s %-24s %6s %9s %9s %-8s %-16s %10s %10s %5s %9s %9s\n", "step", "frame", "rows",
                "encode ms", "admit ms", "question", "frames seen", "KL", "KL blind", "flip",
                "reprf ms", "kamera ms");
    for (const auto& st : r.steps) {
      std::printf("%4d %-24s %6d %9.2f %9.2f", st.step, st.frame.substr(0, 24).c_str(), st.tokens,
                  st.encode_ms, st.admit_ms);
      if (st.question) {
        std::string seen;
        for (int f : st.q.frames) {
          if (!seen.empty()) seen += ',';
          seen += std::to_string(f);
        }
        std::printf(" %-8s %-16s %10s %10s %5s %9.3f %9.3f", st.q.situation.c_str(), seen.c_str(),
                    kl_text(st.q.kl).c_str(), kl_text(st.q.kl_blind).c_str(),
                    st.q.kamera != st.q.reprefill ? "yes" : "no", st.q.reprefill_ms,
                    st.q.kamera_ms);
      }
      std::printf("\n");
    }
    std::printf("\n");
  }
  std::printf("%-8s %4s %10s %10s %7s %6s %11s %10s %10s %8s\n", "question", "n", "mean KL",
              "KL blind", "eta", "flips", "blind flips", "reprf ms", "kamera ms", "speedup");
  auto row = [](const char* name, const FramesDemoSummary& s) {
    if (!s.count) return (void)std::printf("%-8s %4d\n", name, 0);
    std::printf("%-8s %4d %10s %10s %7s %6d %11d %10.3f %10.3f %7.1fx\n", name, s.count,
                kl_text(s.mean_kl).c_str(), kl_text(s.mean_kl_blind).c_str(),
                std::isnan(s.eta) ? "-" : fmt::format("{:.3f}", s.eta).c_str(), s.flips,
                s.blind_flips, s.reprefill_ms, s.kamera_ms,
                s.kamera_ms > 0 ? s.reprefill_ms / s.kamera_ms : 0.0);
  };
  row("slide", r.slide);
  row("reorder", r.reorder);
  row("recall", r.recall);
  row("all", r.all);
  std::printf(
      "vision encode %.2f ms per frame (once each); admission %.2f ms per frame; wall %.2f s\n",
      r.encode_ms_per_frame, r.admit_ms_per_frame, r.wall_s);
}

}  // namespace

int run_frames_demo_cli(const FramesDemoArgs& a) {
  auto frames = list_frames(a.dir);
  if (!frames.ok()) return fail(frames.error(), a.json);
  auto tower = QwenVisionModel::load(a.vision);
  if (!tower.ok()) return fail(tower.error(), a.json);
  auto model = load_for_cli(a.decoder, "");
  if (!model.ok()) return fail(model.error(), a.json);
  FramesDemoOptions o;
  o.window = a.window > 0 ? a.window : std::min<int>(4, int(frames->size()));
  o.reps = a.reps;
  o.recall_every = a.recall_every;
  o.reorder_every = a.reorder_every;
  if (!a.question.empty()) o.question = a.question;
  if (a.rank == "full" || a.rank == "0") {
    o.rank = kFullRank;
  } else {
    char* end = nullptr;
    const long v = std::strtol(a.rank.c_str(), &end, 10);
    if (a.rank.empty() || *end != '\0' || v < 1 || v > 100000)
      return fail("--rank: '" + a.rank + "' is not a positive integer or 'full'", a.json);
    o.rank = int(v);
  }
  auto kv = kv_tokens_for(*frames, *tower, o.window);
  if (!kv.ok()) return fail(kv.error(), a.json);
  auto ctx = context_for(*model, a.threads, *kv);
  if (!ctx.ok()) return fail(ctx.error(), a.json);
  auto r = run_frames_demo(**ctx, *tower, *frames, o);
  if (!r.ok()) return fail(r.error(), a.json);
  if (a.json) {
    print_json(frames_demo_json(*r), 2);
    return 0;
  }
  print_human(*r, a.quiet);
  return 0;
}

}  // namespace kamera::cli
