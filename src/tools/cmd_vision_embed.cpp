// kamera vision-embed: image (or video frames) -> the Qwen2-VL / Qwen2.5-VL tower's embeddings.
//
//   kamera vision-embed --mmproj M --image F [--json]
//   kamera vision-embed --mmproj M --frames a.png,b.png,... [--fps 30 --sample-fps 2] [--json]
//
// --json prints {"grid": [t, h, w], "embeddings": [[...], ...]}: one row per merged 2 x 2 patch
// block, raster order within each temporal slice (t = frame pairs; h, w in merged tokens, so the
// row count is t * h * w), plus "patch_grid" (Hugging Face's image_grid_thw, in 14-pixel patches),
// the resized size and timings. Without --json a one-line summary goes to stderr.
#include <time.h>

#include <algorithm>
#include <sstream>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "media/image.h"
#include "ops/blas_select.h"
#include "ops/gemm.h"
#include "tools/cli_common.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera::cli {

namespace {

struct VisionEmbedArgs {
  std::string mmproj, image, frames;
  double fps = 0, sample_fps = 2.0;
  int64_t min_pixels = 0, max_pixels = 0;
  int threads = default_threads();
  int repeat = 1;
  bool json = false;
};

// CPU seconds of the whole process (all threads), in ms: the work done, whatever the host's load.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The frames of --image or --frames (sampled at --sample-fps when --fps is given).
Result<std::vector<Image>> load_inputs(const VisionEmbedArgs& a) {
  std::vector<std::string> paths =
      a.image.empty() ? split_list(a.frames) : std::vector<std::string>{a.image};
  if (paths.empty()) return make_error(ErrorCode::InvalidArgument, "give --image or --frames");
  if (!a.frames.empty() && a.fps > 0) {
    KAMERA_ASSIGN_OR_RETURN(auto idx, qwen_sample_frames(int(paths.size()), a.fps, a.sample_fps));
    std::vector<std::string> kept;
    for (int i : idx) kept.push_back(paths[size_t(i)]);
    paths = kept;
  }
  std::vector<Image> images;
  for (const std::string& p : paths) {
    KAMERA_ASSIGN_OR_RETURN(Image img, load_image(p));
    images.push_back(std::move(img));
  }
  return images;
}

int run_vision_embed(const VisionEmbedArgs& a) {
  if (a.image.empty() == a.frames.empty())
    return fail("give exactly one of --image and --frames", a.json);
  double t0 = now_ms();
  auto model = QwenVisionModel::load(a.mmproj);
  if (!model.ok()) return fail(model.message(), a.json);
  const double load_ms = now_ms() - t0;
  QwenImageOptions opt = QwenImageOptions::from(model->cfg);
  if (a.min_pixels > 0) opt.min_pixels = a.min_pixels;
  if (a.max_pixels > 0) opt.max_pixels = a.max_pixels;
  t0 = now_ms();
  auto frames = load_inputs(a);
  if (!frames.ok()) return fail(frames.message(), a.json);
  auto patches = qwen_preprocess_frames(*frames, opt);
  if (!patches.ok()) return fail(patches.message(), a.json);
  const double prep_ms = now_ms() - t0;
  set_blas_threads(a.threads);
  const BlasInfo& blas = ensure_blas_kernels();  // the kernels of the CPU's level
  ThreadPool pool(a.threads);
  QwenVisionEncoder enc(*model, &pool);
  Result<QwenVisionEmbeddings> emb = make_error(ErrorCode::Internal, "not run");
  std::vector<double> encode_ms, encode_cpu_ms;
  for (int r = 0; r < std::max(1, a.repeat); ++r) {
    t0 = now_ms();
    const double c0 = process_cpu_ms();
    emb = enc.encode(*patches);
    encode_cpu_ms.push_back(process_cpu_ms() - c0);
    encode_ms.push_back(now_ms() - t0);
    if (!emb.ok()) return fail(emb.message(), a.json);
  }
  const double best = *std::min_element(encode_ms.begin(), encode_ms.end());
  if (!a.json) {
    std::fprintf(stderr,
                 "kamera: %s: %d x %d -> grid [%d, %d, %d], %lld rows of %d; load %.0f ms, "
                 "preprocess %.1f ms, encode %.1f ms (best of %zu)\n",
                 a.mmproj.c_str(), patches->resized_width, patches->resized_height, emb->grid_t,
                 emb->grid_h, emb->grid_w, (long long)emb->n_rows(), emb->dim, load_ms, prep_ms,
                 best, encode_ms.size());
    return 0;
  }
  json rows = json::array();
  for (int64_t r = 0; r < emb->n_rows(); ++r) {
    const float* p = emb->rows.data() + r * emb->dim;
    rows.push_back(std::vector<float>(p, p + emb->dim));
  }
  print_json(json{{"grid", {emb->grid_t, emb->grid_h, emb->grid_w}},
                  {"patch_grid", {patches->grid_t, patches->grid_h, patches->grid_w}},
                  {"resized", {patches->resized_width, patches->resized_height}},
                  {"frames", frames->size()},
                  {"dim", emb->dim},
                  {"load_ms", load_ms},
                  {"preprocess_ms", prep_ms},
                  {"encode_ms", encode_ms},
                  {"encode_cpu_ms", encode_cpu_ms},
                  {"blas_threads", blas_threads()},
                  {"blas_core", blas.core},
                  {"cpu", cpu_feature_string()},
                  {"embeddings", rows}});
  return 0;
}

}  // namespace

Runner add_vision_embed(CLI::App& app) {
  auto a = std::make_shared<VisionEmbedArgs>();
  app.add_option("--mmproj", a->mmproj, "Qwen2-VL / Qwen2.5-VL mmproj GGUF (llama.cpp's layout)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--image", a->image, "PNG or JPEG image");
  app.add_option("--frames", a->frames, "Video frames: comma-separated PNG/JPEG paths, in order");
  app.add_option("--fps", a->fps, "Frame rate of --frames; when set, frames are sampled");
  app.add_option("--sample-fps", a->sample_fps, "Sampling rate for --frames with --fps")
      ->capture_default_str();
  app.add_option("--min-pixels", a->min_pixels, "Override the file's min_pixels");
  app.add_option("--max-pixels", a->max_pixels, "Override the file's max_pixels");
  app.add_option("--repeat", a->repeat, "Encode this many times (timing: the best is reported)")
      ->capture_default_str();
  add_threads_option(app, a->threads);
  app.add_flag("--json", a->json, "Print the grid and embeddings as JSON");
  return [a] { return run_vision_embed(*a); };
}

}  // namespace kamera::cli
