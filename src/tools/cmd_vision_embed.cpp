// kamera vision-embed: image (or video frames) -> the tower's embeddings: Qwen2-VL / Qwen2.5-VL /
// Qwen3-VL, Kimi-VL's MoonViT, or SmolVLM's, Gemma 3's, InternVL's or LLaVA-1.5's tower (by the
// mmproj's clip.projector_type).
//
//   kamera vision-embed --mmproj M --image F [--json]
//   kamera vision-embed --mmproj M --frames a.png,b.png,... [--fps 30 --sample-fps 2] [--json]
//
// --json prints {"grid": [t, h, w], "embeddings": [[...], ...]}: one row per merged 2 x 2 patch
// block, raster order within each temporal slice (t = frame pairs; h, w in merged tokens, so the
// row count is t * h * w), plus "tower" (the projector type), "patch_grid" (Hugging Face's
// image_grid_thw, in 14-pixel patches), the resized size and timings. A Kimi-VL tower takes one
// --image (t = 1; "resized" is the size before its padding to multiples of 28). The SmolVLM,
// Gemma 3, InternVL and LLaVA towers take one --image, cut as their processor cuts it: grid
// [tiles, s, s] (SmolVLM's tiles then its global image, InternVL's tiles then its thumbnail; one
// "tile" for Gemma 3's resized picture and LLaVA's square), the tower's rows only (SmolVLM's
// row / column tokens are the decoder's, not the tower's: the chunk a server places holds them
// between the tiles' rows). Without --json a one-line summary goes to stderr.
//
// A Qwen2.5-Omni (qwen2.5o) file's vision half takes --image and --frames as a Qwen2.5-VL tower
// does ("tower" says qwen2.5o). The audio twin, a Qwen2.5-Omni (qwen2.5o), Qwen2-Audio (qwen2a) or
// Qwen3-Omni / Qwen3-ASR (qwen3a, by clip.audio.projector_type) mmproj's audio tower:
//
//   kamera vision-embed --mmproj M --audio clip.wav [--json]
//
// decodes the clip (WAV, FLAC or MP3, told apart by its bytes), resamples it to 16 kHz, cuts
// the tower's log-mel windows (Whisper's 30 s; Qwen3's 8 s) and encodes them as the server does
// an input_audio part: "grid" [windows, rows a window (Qwen3: all rows), 1], "audio" {format,
// sample_rate, seconds, mel_windows}, and the rows as "embeddings" (750 a Whisper window; 13 per
// second for Qwen3).
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "audio/audio_encoder.h"
#include "audio/qwen3_audio_encoder.h"
#include "audio/qwen_audio.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "media/audio_file.h"
#include "media/image.h"
#include "media/log_mel.h"
#include "ops/blas_select.h"
#include "ops/gemm.h"
#include "tools/cli_common.h"
#include "vision/gemma3_encoder.h"
#include "vision/idefics3_encoder.h"
#include "vision/idefics3_preprocess.h"
#include "vision/internvl_encoder.h"
#include "vision/internvl_preprocess.h"
#include "vision/kimi_vision_encoder.h"
#include "vision/llava_chunks.h"
#include "vision/llava_encoder.h"
#include "vision/mmproj_kind.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera::cli {

namespace {

struct VisionEmbedArgs {
  std::string mmproj, image, frames, audio;
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

// What a tower gave, whichever it is: the embeddings and the grids the JSON reports.
struct Embedded {
  std::array<int, 3> grid{}, patch_grid{};  // merged tokens; 14-pixel patches
  std::array<int, 2> resized{};
  size_t frames = 0;
  int dim = 0;
  std::vector<float> rows;
  double load_ms = 0, prep_ms = 0;
  std::vector<double> encode_ms, encode_cpu_ms;
};

// Runs encode --repeat times, timing each (wall and process CPU); the last result is kept.
template <class Encode>
Status timed_encodes(const VisionEmbedArgs& a, Embedded& out, Encode&& encode) {
  for (int r = 0; r < std::max(1, a.repeat); ++r) {
    const double t0 = now_ms(), c0 = process_cpu_ms();
    KAMERA_TRY(encode());
    out.encode_cpu_ms.push_back(process_cpu_ms() - c0);
    out.encode_ms.push_back(now_ms() - t0);
  }
  return Status::Ok();
}

// Qwen2-VL / Qwen2.5-VL / Qwen3-VL: an image, or video frames paired in time.
Status embed_qwen(const VisionEmbedArgs& a, ThreadPool& pool, Embedded& out) {
  double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const QwenVisionModel model, QwenVisionModel::load(a.mmproj));
  out.load_ms = now_ms() - t0;
  QwenImageOptions opt = QwenImageOptions::from(model.cfg);
  if (a.min_pixels > 0) opt.min_pixels = a.min_pixels;
  if (a.max_pixels > 0) opt.max_pixels = a.max_pixels;
  t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const auto frames, load_inputs(a));
  KAMERA_ASSIGN_OR_RETURN(const QwenPatches patches, qwen_preprocess_frames(frames, opt));
  out.prep_ms = now_ms() - t0;
  QwenVisionEncoder enc(model, &pool);
  QwenVisionEmbeddings e;
  KAMERA_TRY(timed_encodes(a, out, [&]() -> Status {
    KAMERA_ASSIGN_OR_RETURN(e, enc.encode(patches));
    return Status::Ok();
  }));
  out.grid = {e.grid_t, e.grid_h, e.grid_w};
  out.patch_grid = {patches.grid_t, patches.grid_h, patches.grid_w};
  out.resized = {patches.resized_width, patches.resized_height};
  out.frames = frames.size();
  out.dim = e.dim;
  out.rows = std::move(e.rows);
  return Status::Ok();
}

// Kimi-VL's MoonViT: one image at its own resolution (vision/kimi_preprocess.h).
Status embed_kimi(const VisionEmbedArgs& a, ThreadPool& pool, Embedded& out) {
  if (a.image.empty() || a.min_pixels > 0 || a.max_pixels > 0)
    return make_error(ErrorCode::InvalidArgument,
                      "{} is a Kimi-VL tower: it takes --image only (no --frames: its video path "
                      "is not here; no --min-pixels / --max-pixels: its processor keeps the "
                      "native size up to 4096 patches)",
                      a.mmproj);
  double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const KimiVisionModel model, KimiVisionModel::load(a.mmproj));
  out.load_ms = now_ms() - t0;
  t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(a.image));
  KAMERA_ASSIGN_OR_RETURN(const KimiPatches patches, kimi_preprocess_image(img, model.cfg));
  out.prep_ms = now_ms() - t0;
  KimiVisionEncoder enc(model, &pool);
  KimiVisionEmbeddings e;
  KAMERA_TRY(timed_encodes(a, out, [&]() -> Status {
    KAMERA_ASSIGN_OR_RETURN(e, enc.encode(patches));
    return Status::Ok();
  }));
  out.grid = {1, e.grid_h, e.grid_w};
  out.patch_grid = {1, patches.grid_h, patches.grid_w};
  out.resized = {patches.width, patches.height};
  out.frames = 1;
  out.dim = e.dim;
  out.rows = std::move(e.rows);
  return Status::Ok();
}

// The towers that read one picture (SmolVLM, Gemma 3, InternVL, LLaVA): --image only.
Status one_picture_only(const VisionEmbedArgs& a, const char* family) {
  if (a.image.empty() || a.min_pixels > 0 || a.max_pixels > 0)
    return make_error(ErrorCode::InvalidArgument,
                      "{} is a {} tower: it takes --image only (one picture, no video; no "
                      "--min-pixels / --max-pixels: its processor sizes the picture itself)",
                      a.mmproj, family);
  return Status::Ok();
}

// A one-picture tower: the picture cut as its processor cuts it (`tiles(img, cfg)`: the tiles in
// the order the prompt places them, or the one resized picture), each tile encoded; the rows of
// all tiles in order, grid [tiles, s, s] (s x s rows per tile), patch_grid [tiles, p, p].
template <class Model, class Encoder, class Tiles>
Status embed_tiles(const VisionEmbedArgs& a, const char* family, ThreadPool& pool, Embedded& out,
                   Tiles&& tiles) {
  KAMERA_TRY(one_picture_only(a, family));
  double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const Model model, Model::load(a.mmproj));
  out.load_ms = now_ms() - t0;
  t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(a.image));
  KAMERA_ASSIGN_OR_RETURN(const std::vector<Image> cut, tiles(img, model.cfg));
  out.prep_ms = now_ms() - t0;
  Encoder enc(model, &pool);
  KAMERA_TRY(timed_encodes(a, out, [&]() -> Status {
    out.rows.clear();
    for (const Image& t : cut) {
      KAMERA_ASSIGN_OR_RETURN(const std::vector<float> r, enc.encode(t));
      out.rows.insert(out.rows.end(), r.begin(), r.end());
    }
    return Status::Ok();
  }));
  const int n = int(cut.size()), dim = model.cfg.out_dim;
  const int per_tile = int(out.rows.size() / size_t(dim) / size_t(n));
  const int s = int(std::lround(std::sqrt(double(per_tile))));
  out.grid = {n, s, s};
  out.patch_grid = {n, model.cfg.side(), model.cfg.side()};
  out.resized = {cut.front().width, cut.front().height};
  out.frames = 1;
  out.dim = dim;
  return Status::Ok();
}

// One image of a SmolVLM / Gemma 3 / InternVL / LLaVA-1.5 tower, by projector type.
Status embed_picture(const std::string& type, const VisionEmbedArgs& a, ThreadPool& pool,
                     Embedded& out) {
  using Tiles = Result<std::vector<Image>>;
  auto one = [](Result<Image> r) -> Tiles {
    if (!r.ok()) return r.error();
    return std::vector<Image>{std::move(*r)};
  };
  if (type == "idefics3")
    return embed_tiles<Idefics3VisionModel, Idefics3VisionEncoder>(
        a, "SmolVLM", pool, out, [](const Image& img, const Idefics3VisionConfig& c) -> Tiles {
          KAMERA_ASSIGN_OR_RETURN(Idefics3Tiles t, idefics3_preprocess(img, c));
          return std::move(t.tiles);
        });
  if (type == "gemma3")
    return embed_tiles<Gemma3VisionModel, Gemma3VisionEncoder>(
        a, "Gemma 3", pool, out,
        [&](const Image& img, const Gemma3VisionConfig& c) { return one(gemma3_picture(img, c)); });
  if (type == "internvl")
    return embed_tiles<InternvlVisionModel, InternvlVisionEncoder>(
        a, "InternVL", pool, out,
        [](const Image& img, const InternvlVisionConfig& c) { return internvl_tiles(img, c); });
  return embed_tiles<LlavaVisionModel, LlavaVisionEncoder>(
      a, "LLaVA", pool, out,
      [&](const Image& img, const LlavaVisionConfig& c) -> Result<std::vector<Image>> {
        if (c.anyres())  // the grid's rows are cut to the picture in the chunk (llava_anyres.h)
          return make_error(ErrorCode::Unsupported,
                            "vision-embed: {} is a LLaVA-1.6 tower (image_grid_pinpoints); "
                            "vision-embed cuts LLaVA-1.5's square only (kamera serve and the C "
                            "API place 1.6 pictures)",
                            a.mmproj);
        return one(llava_square(img, c));
      });
}

// An audio clip through a Qwen2.5-Omni / Qwen2-Audio tower (Whisper's 30-s log-mel windows) or
// a Qwen3-Omni / Qwen3-ASR one (its 8-s windows), as the server encodes an input_audio part:
// decoded, at 16 kHz. grid: [windows, rows per window (Qwen3: all rows), 1].
struct AudioInfo {
  std::string format;
  int sample_rate = 0;
  double seconds = 0;
};

// The clip's 16 kHz samples (media/audio_file.h: WAV, FLAC or MP3, mixed to mono, resampled).
Result<std::vector<float>> read_clip(const VisionEmbedArgs& a, AudioInfo& info) {
  KAMERA_ASSIGN_OR_RETURN(AudioClip clip, load_audio(a.audio, WhisperMelConfig{}.sample_rate));
  info = {audio_format_lower(clip.format), clip.source_rate, clip.seconds};
  return std::move(clip.samples);
}

// Loads the tower (TowerModel), cuts the clip into windows (make_windows) and encodes them.
template <class TowerModel, class Encoder, class Windows>
Status embed_audio_with(const VisionEmbedArgs& a, ThreadPool& pool, Embedded& out, AudioInfo& info,
                        Windows make_windows) {
  double t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const TowerModel model, TowerModel::load(a.mmproj));
  out.load_ms = now_ms() - t0;
  t0 = now_ms();
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> samples, read_clip(a, info));
  const std::vector<LogMel> windows = make_windows(samples, model.cfg.n_mels);
  out.prep_ms = now_ms() - t0;
  Encoder enc(model, &pool);
  KAMERA_TRY(timed_encodes(a, out, [&]() -> Status {
    KAMERA_ASSIGN_OR_RETURN(out.rows, enc.encode(windows, {}));
    return Status::Ok();
  }));
  out.dim = model.cfg.out_dim;
  out.frames = 0;
  const int n = int(windows.size()), rows = int(out.rows.size() / size_t(out.dim));
  out.grid = {n, n > 0 && !std::is_same_v<TowerModel, Qwen3AudioModel> ? rows / n : rows, 1};
  return Status::Ok();
}

Status embed_audio(const VisionEmbedArgs& a, const std::string& type, ThreadPool& pool,
                   Embedded& out, AudioInfo& info) {
  if (is_qwen3_audio_projector(type))
    return embed_audio_with<Qwen3AudioModel, Qwen3AudioEncoder>(
        a, pool, out, info,
        [](std::span<const float> s, int n_mels) { return qwen3_audio_windows(s, n_mels); });
  return embed_audio_with<QwenAudioModel, QwenAudioEncoder>(
      a, pool, out, info, [](std::span<const float> s, int n_mels) {
        WhisperMelConfig mel_cfg;
        mel_cfg.n_mels = n_mels;
        return whisper_log_mel(s, mel_cfg);
      });
}

// The audio tower's projector type of an mmproj vision-embed reads with --audio ("" for none):
// Qwen2.5-Omni's or Qwen2-Audio's clip.projector_type, or Qwen3's clip.audio.projector_type
// (Qwen3-ASR's file, Qwen3-Omni's beside its vision half's "qwen3vl_merger").
std::string audio_tower_type(const std::string& mmproj, const std::string& type) {
  if (is_qwen_audio_projector(type)) return type;
  auto audio = mmproj_audio_projector_type(mmproj);
  return audio.ok() && is_qwen3_audio_projector(*audio) ? *audio : "";
}

bool is_picture_tower(const std::string& type) {
  return type == "idefics3" || type == "gemma3" || type == "internvl" || type == "mlp";
}

json rows_json(const Embedded& e) {
  json rows = json::array();
  const int64_t n_rows = e.dim > 0 ? int64_t(e.rows.size()) / e.dim : 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* p = e.rows.data() + r * e.dim;
    rows.push_back(std::vector<float>(p, p + e.dim));
  }
  return rows;
}

// What every tower's --json reports: the grid, the timings, the BLAS and CPU, the rows.
json embedded_json(const std::string& type, const Embedded& e, const BlasInfo& blas) {
  return json{{"tower", type},
              {"grid", e.grid},
              {"dim", e.dim},
              {"load_ms", e.load_ms},
              {"preprocess_ms", e.prep_ms},
              {"encode_ms", e.encode_ms},
              {"encode_cpu_ms", e.encode_cpu_ms},
              {"blas_threads", blas_threads()},
              {"blas_core", blas.core},
              {"cpu", cpu_feature_string()},
              {"embeddings", rows_json(e)}};
}

int print_audio(const VisionEmbedArgs& a, const std::string& type, ThreadPool& pool,
                const BlasInfo& blas) {
  Embedded e;
  AudioInfo info;
  const Status st = embed_audio(a, type, pool, e, info);
  if (!st.ok()) return fail(st.message(), a.json);
  const double best = *std::min_element(e.encode_ms.begin(), e.encode_ms.end());
  if (!a.json) {
    std::fprintf(stderr,
                 "kamera: %s: %s %.2f s at %d Hz -> %d windows, %zu rows of %d; load %.0f ms, "
                 "preprocess %.1f ms, encode %.1f ms (best of %zu)\n",
                 a.audio.c_str(), info.format.c_str(), info.seconds, info.sample_rate, e.grid[0],
                 e.rows.size() / size_t(e.dim), e.dim, e.load_ms, e.prep_ms, best,
                 e.encode_ms.size());
    return 0;
  }
  json j = embedded_json(type, e, blas);
  j["audio"] = {{"format", info.format},
                {"sample_rate", info.sample_rate},
                {"seconds", info.seconds},
                {"mel_windows", e.grid[0]}};
  print_json(j);
  return 0;
}

// Whether the tower reads the input given: --audio an audio tower's (audio_type, "" for none),
// --image and --frames a picture tower's (an Omni file's vision half, a Qwen2.5-VL or Qwen3-VL
// tower, among them).
Status check_input(const VisionEmbedArgs& a, const std::string& type,
                   const std::string& audio_type) {
  bool pictures = audio_type.empty();
  if (!pictures) {  // an audio tower: pictures where the file holds a vision half too
    KAMERA_ASSIGN_OR_RETURN(pictures, mmproj_has_vision_encoder(a.mmproj));
  }
  if (!a.audio.empty() && audio_type.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: --audio needs a Qwen2.5-Omni (qwen2.5o), Qwen2-Audio (qwen2a) or "
                      "Qwen3-Omni / Qwen3-ASR (qwen3a) mmproj; this one's projector type is '{}'",
                      a.mmproj, type);
  if (a.audio.empty() && !pictures)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: projector type '{}' is an audio tower with no vision tower: give "
                      "--audio",
                      a.mmproj, audio_type);
  return Status::Ok();
}

int run_vision_embed(const VisionEmbedArgs& a) {
  if (int(!a.image.empty()) + int(!a.frames.empty()) + int(!a.audio.empty()) != 1)
    return fail("give exactly one of --image, --frames and --audio", a.json);
  auto type = mmproj_projector_type(a.mmproj);
  if (!type.ok()) return fail(type.message(), a.json);
  const std::string audio_type = audio_tower_type(a.mmproj, *type);
  if (Status st = check_input(a, *type, audio_type); !st.ok()) return fail(st.message(), a.json);
  set_blas_threads(a.threads);
  const BlasInfo& blas = ensure_blas_kernels();  // the kernels of the CPU's level
  ThreadPool pool(a.threads);
  Embedded e;
  if (!a.audio.empty()) return print_audio(a, audio_type, pool, blas);
  if (!is_qwen_projector(*type) && *type != "qwen2.5o" && *type != "kimivl" &&
      !is_picture_tower(*type))
    return fail(fmt::format("{}: projector type '{}' is not a tower vision-embed reads (Qwen2-VL, "
                            "Qwen2.5-VL, Qwen3-VL, Kimi-VL, SmolVLM, Gemma 3, InternVL, LLaVA-1.5)",
                            a.mmproj, *type),
                a.json);
  const Status st = *type == "kimivl"         ? embed_kimi(a, pool, e)
                    : is_picture_tower(*type) ? embed_picture(*type, a, pool, e)
                                              : embed_qwen(a, pool, e);
  if (!st.ok()) return fail(st.message(), a.json);
  const double best = *std::min_element(e.encode_ms.begin(), e.encode_ms.end());
  const int64_t n_rows = e.dim > 0 ? int64_t(e.rows.size()) / e.dim : 0;
  if (!a.json) {
    std::fprintf(stderr,
                 "kamera: %s: %d x %d -> grid [%d, %d, %d], %lld rows of %d; load %.0f ms, "
                 "preprocess %.1f ms, encode %.1f ms (best of %zu)\n",
                 a.mmproj.c_str(), e.resized[0], e.resized[1], e.grid[0], e.grid[1], e.grid[2],
                 (long long)n_rows, e.dim, e.load_ms, e.prep_ms, best, e.encode_ms.size());
    return 0;
  }
  json j = embedded_json(*type, e, blas);
  j["patch_grid"] = e.patch_grid;
  j["resized"] = e.resized;
  j["frames"] = e.frames;
  print_json(j);
  return 0;
}

}  // namespace

Runner add_vision_embed(CLI::App& app) {
  auto a = std::make_shared<VisionEmbedArgs>();
  app.add_option("--mmproj", a->mmproj,
                 "Qwen2-VL / Qwen2.5-VL / Qwen3-VL, Kimi-VL, SmolVLM (idefics3), Gemma 3, InternVL "
                 "or LLaVA-1.5 (mlp) mmproj GGUF (llama.cpp's layout), or Qwen2.5-Omni's "
                 "(qwen2.5o) or Qwen3-Omni's (qwen3vl_merger + qwen3a: their vision halves); "
                 "with --audio, Qwen2.5-Omni (qwen2.5o), Qwen2-Audio (qwen2a) or Qwen3-Omni / "
                 "Qwen3-ASR (qwen3a)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--image", a->image, "PNG or JPEG image");
  app.add_option("--frames", a->frames, "Video frames: comma-separated PNG/JPEG paths, in order");
  app.add_option("--audio", a->audio,
                 "An audio clip (WAV, FLAC or MP3) for a Qwen2.5-Omni / Qwen2-Audio / Qwen3-Omni / "
                 "Qwen3-ASR mmproj's audio tower: its rows, as the server encodes an input_audio "
                 "part");
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
