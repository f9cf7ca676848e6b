// kamera vlm-bench: time to first token of a question about the last frame of a window of video
// frames, on three paths (docs/BENCHMARKS.md):
//   reencode  re-prefill of [anchor][frame 0..F-1][question], every frame through the tower;
//   embedded  the same re-prefill with the frames' embeddings cached (no tower);
//   chunks    kamera's reuse: each frame a position-free chunk whose canonical KV and patch
//             (behind the frames before it) were formed when it arrived; the question is served
//             from relocated + patched rows, so its forward is the question's tokens only.
// Frames are seeded synthetic pictures of --size W x H (each a distinct image).
#include <algorithm>
#include <cmath>

#include "cache/chunk_cache.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "tools/cli_common.h"
#include "vision/image_chunks.h"

namespace kamera::cli {

namespace {

struct VlmBenchArgs {
  std::string decoder, mmproj;
  int frames = 8, width = 224, height = 224, question = 16, rank = 32;
  int threads = default_threads();
  bool json = false;
};

Image synthetic_frame(int w, int h, int seed) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t(
            128 + 90 * std::sin(0.07 * x * (c + 1) + 0.05 * y + seed) + 30 * std::cos(0.3 * seed));
  return img;
}

struct PathResult {
  double ttft_ms = 0, encode_ms = 0;
  int forwards = 0;
  int64_t tokens_computed = 0;
  std::vector<float> logits;
};

// [anchor][frames][question] served with `policy` in a fresh sequence; the first token's logits.
Result<PathResult> serve(ChunkCache& cache, std::span<const ChunkContent> frames,
                         const ChunkContent& question, const ServeOptions& opts) {
  PathResult r;
  ScopedSequence seq(cache.pool());
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const ServeReport rep, cache.assemble(seq.id(), frames, opts));
  KAMERA_ASSIGN_OR_RETURN(
      r.logits, cache.forward_chunk(seq.id(), question, rep.next_position, LogitsMode::Last));
  r.ttft_ms = now_ms() - t0;
  r.forwards = rep.forwards + 1;
  r.tokens_computed = rep.tokens_computed + question.n();
  return r;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

Result<json> run(const VlmBenchArgs& a) {
  KAMERA_ASSIGN_OR_RETURN(auto model, load_for_cli(a.decoder, ""));
  KAMERA_ASSIGN_OR_RETURN(const QwenVisionModel tower, QwenVisionModel::load(a.mmproj));
  if (tower.cfg.out_dim != model->cfg.dim)
    return make_error(ErrorCode::InvalidArgument, "{} projects to width {}, {} is {} wide",
                      a.mmproj, tower.cfg.out_dim, a.decoder, model->cfg.dim);
  std::vector<Image> pictures;
  for (int f = 0; f < a.frames; ++f) pictures.push_back(synthetic_frame(a.width, a.height, f + 1));
  ThreadPool vision_threads(a.threads);
  ImageChunks images(tower, model->fingerprint, &vision_threads);
  // Frames arrive: each is encoded once (timed per frame).
  std::vector<ChunkContent> frames;
  std::vector<double> encode_ms;
  for (const Image& p : pictures) {
    const double t0 = now_ms();
    KAMERA_ASSIGN_OR_RETURN(auto c, images.image(p));
    encode_ms.push_back(now_ms() - t0);
    frames.push_back(*c);
  }
  const int64_t rows = int64_t(frames.size()) * frames[0].n() + a.question + 8;
  KAMERA_ASSIGN_OR_RETURN(auto ctx, context_for(model, a.threads, 4 * rows));
  ChunkCache& cache = ctx->cache();
  std::vector<int32_t> q(size_t(a.question));
  for (int i = 0; i < a.question; ++i) q[size_t(i)] = 10 + (i * 7919) % (model->cfg.n_vocab - 20);
  const ChunkContent question = ChunkContent::from_tokens(q);

  ServeOptions reprefill;
  reprefill.policy = ServePolicy::Reprefill;
  // reencode: the tower runs again on every frame, then the re-prefill
  PathResult reenc;
  {
    ImageChunks cold(tower, model->fingerprint, &vision_threads);
    const double t0 = now_ms();
    std::vector<ChunkContent> again;
    for (const Image& p : pictures) {
      KAMERA_ASSIGN_OR_RETURN(auto c, cold.image(p));
      again.push_back(*c);
    }
    const double enc = now_ms() - t0;
    KAMERA_ASSIGN_OR_RETURN(reenc, serve(cache, again, question, reprefill));
    reenc.encode_ms = enc;
    reenc.ttft_ms += enc;
  }
  KAMERA_ASSIGN_OR_RETURN(const PathResult emb, serve(cache, frames, question, reprefill));
  // chunks: admission (canonicals and patches formed as frames arrive), then the question
  ServeOptions patched;
  patched.policy = ServePolicy::Patch;
  patched.patch.rank = a.rank;
  patched.patch.cap_rank = true;
  const double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const PathResult admit, serve(cache, frames, question, patched));
  const double admit_ms = now_ms() - t0;
  KAMERA_ASSIGN_OR_RETURN(const PathResult chunks, serve(cache, frames, question, patched));

  auto path_json = [&](const PathResult& r) {
    return json{{"ttft_ms", r.ttft_ms},
                {"encode_ms", r.encode_ms},
                {"forwards", r.forwards},
                {"tokens_computed", r.tokens_computed},
                {"max_abs_logit_diff_vs_embedded", max_abs_diff(r.logits, emb.logits)}};
  };
  double scale = 0;
  for (float x : emb.logits) scale = std::max(scale, double(std::fabs(x)));
  return json{{"decoder", model_summary(*model)},
              {"frames", a.frames},
              {"frame_size", {a.width, a.height}},
              {"tokens_per_frame", frames[0].n()},
              {"question_tokens", a.question},
              {"patch_rank", a.rank},
              {"threads", a.threads},
              {"cpu", cpu_feature_string()},
              {"encode_ms_per_frame", encode_ms},
              {"reencode", path_json(reenc)},
              {"embedded", path_json(emb)},
              {"chunks", path_json(chunks)},
              {"chunks_admission_ms", admit_ms},
              {"chunks_admission_forwards", admit.forwards},
              {"logit_scale", scale},
              {"ttft_speedup_vs_reencode", reenc.ttft_ms / chunks.ttft_ms},
              {"ttft_speedup_vs_embedded", emb.ttft_ms / chunks.ttft_ms}};
}

}  // namespace

Runner add_vlm_bench(CLI::App& app) {
  auto a = std::make_shared<VlmBenchArgs>();
  app.add_option("-m,--decoder", a->decoder, "qwen2vl decoder GGUF")->required();
  app.add_option("--mmproj", a->mmproj, "Qwen2-VL vision tower (llama.cpp mmproj GGUF)")
      ->required();
  app.add_option("--frames", a->frames, "Frames in the window")->capture_default_str();
  app.add_option("--width", a->width, "Frame width in pixels")->capture_default_str();
  app.add_option("--height", a->height, "Frame height in pixels")->capture_default_str();
  app.add_option("--question", a->question, "Question tokens")->capture_default_str();
  app.add_option("--rank", a->rank, "Patch rank")->capture_default_str();
  add_threads_option(app, a->threads);
  app.add_flag("--json", a->json, "Print the result as one JSON object (default: indented)");
  return [a] {
    auto r = run(*a);
    if (!r.ok()) return fail(r.error(), a->json);
    print_json(*r, a->json ? -1 : 2);
    return 0;
  };
}

}  // namespace kamera::cli
