#include "vision/media_tower.h"

#include "core/thread_pool.h"
#include "vision/encoder.h"
#include "vision/frame_chunk.h"
#include "vision/gemma3_chunks.h"
#include "vision/idefics3_chunks.h"
#include "vision/image_chunks.h"
#include "vision/internvl_chunks.h"
#include "vision/kimi_chunks.h"
#include "vision/llava_chunks.h"
#include "vision/mmproj_kind.h"
#include "vision/video_time.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

// Qwen2-VL / Qwen2.5-VL / Qwen3-VL: the image cache of vision/image_chunks.h over the tower.
class QwenTower final : public MediaTower {
 public:
  // tokens_per_second: a Qwen2.5-VL video's time scale (vision/video_time.h; Qwen2.5-Omni's 25)
  QwenTower(QwenVisionModel tower, const Model& decoder, int threads, ChunkStore* store,
            double tokens_per_second)
      : tower_(std::move(tower)),
        delimiters_(qwen_picture_delimiters(decoder.tokenizer ? &*decoder.tokenizer : nullptr)),
        pool_(threads),
        images_(tower_, decoder.fingerprint, &pool_) {
    images_.set_store(store);
    images_.set_tokens_per_second(tokens_per_second);
  }
  VisionDelimiters delimiters() const override { return delimiters_; }
  // Qwen3-VL's video is pairs of frames with timestamps between (vision/qwen3vl_video.h): not
  // through this interface yet
  bool takes_video() const override { return !tower_.cfg.qwen3(); }
  Result<int64_t> rows(std::span<const ImageSize> pictures) const override {
    const ImageSize& first = pictures.front();
    return qwen_picture_rows(int(first.width), int(first.height), int(pictures.size()),
                             images_.options());
  }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double fps,
                                                    const std::function<bool()>& stop) override {
    images_.set_stop(stop);
    auto c = images_.frames(pictures, encoded, fps);
    images_.set_stop({});
    return c;
  }
  ImageChunks::Stats stats() const override { return images_.stats(); }
  void set_store(ChunkStore* store) override { images_.set_store(store); }

 private:
  QwenVisionModel tower_;
  VisionDelimiters delimiters_;
  ThreadPool pool_;
  ImageChunks images_;
};

// The mini-VL: one frame, encoded as it comes (a few hundred thousand multiply-adds; the frame's
// KV is the chunk cache's all the same, keyed by the chunk's content).
class MiniVlTower final : public MediaTower {
 public:
  explicit MiniVlTower(VisionModel m) : model_(std::move(m)), enc_(model_) {}
  VisionDelimiters delimiters() const override { return {}; }
  bool word_prompt() const override { return true; }
  bool takes_video() const override { return false; }
  Result<int64_t> rows(std::span<const ImageSize> pictures) const override {
    const int side = model_.cfg.image_size;
    for (const ImageSize& s : pictures)
      if (s.width != side || s.height != side) return frame_size_error(s.width, s.height);
    return int64_t(pictures.size()) * model_.cfg.n_tokens();
  }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double, const std::function<bool()>&) override {
    if (encoded) *encoded = false;
    const int side = model_.cfg.image_size;
    if (pictures.size() != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "the mini-VL reads one frame per image part, not {} pictures",
                        pictures.size());
    const Image& img = pictures.front();
    if (img.width != side || img.height != side) return frame_size_error(img.width, img.height);
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, frame_chunk(enc_, img.rgb));
    if (encoded) *encoded = true;
    return std::make_shared<const ChunkContent>(std::move(c));
  }

 private:
  Error frame_size_error(int64_t width, int64_t height) const {
    const int side = model_.cfg.image_size;
    return make_error(ErrorCode::InvalidArgument,
                      "the mini-VL reads {} x {} frames; this picture is {} x {} (it is not "
                      "resized: the model was trained on frames of that size only)",
                      side, side, width, height);
  }
  VisionModel model_;
  VisionEncoder enc_;  // holds a pointer to model_
};

// One picture through a picture cache (KimiImageChunks, Idefics3ImageChunks), `stop` asked
// between the tower's layers.
template <class Images>
Result<std::shared_ptr<const ChunkContent>> stoppable_image(Images& images, const Image& img,
                                                            bool* encoded,
                                                            const std::function<bool()>& stop) {
  images.set_stop(stop);
  auto c = images.image(img, encoded);
  images.set_stop({});
  return c;
}

// A tower that reads one picture per image part (no video) through a picture cache.
class OnePictureTower : public MediaTower {
 public:
  OnePictureTower(std::string name, VisionDelimiters delimiters)
      : name_(std::move(name)), delimiters_(std::move(delimiters)) {}
  VisionDelimiters delimiters() const override { return delimiters_; }
  bool takes_video() const override { return false; }
  Result<int64_t> rows(std::span<const ImageSize> pictures) const override {
    const ImageSize& s = pictures.front();  // one picture: chunk() refuses more
    return picture_rows(int(s.width), int(s.height));
  }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double,
                                                    const std::function<bool()>& stop) override {
    if (encoded) *encoded = false;
    if (pictures.size() != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "{}'s tower reads one picture per image part, not {} (no video)", name_,
                        pictures.size());
    return picture(pictures.front(), encoded, stop);
  }

 protected:
  virtual Result<int64_t> picture_rows(int width, int height) const = 0;
  virtual Result<std::shared_ptr<const ChunkContent>> picture(
      const Image& img, bool* encoded, const std::function<bool()>& stop) = 0;

 private:
  std::string name_;
  VisionDelimiters delimiters_;
};

// A family's tower and its picture cache (vision/*_chunks.h: Kimi-VL's, SmolVLM's tiles and global
// image with their tokens, Gemma 3's resized picture, InternVL's tiles and thumbnail, LLaVA's
// square), which holds a reference to the tower; `rows` says how many rows a picture of a size
// gives.
template <class Vision, class Chunks>
class CachedPictureTower final : public OnePictureTower {
 public:
  using Rows = Result<int64_t> (*)(const Vision& tower, const Chunks& images, int width,
                                   int height);
  // make(tower, fingerprint, pool) builds the picture cache over the tower this object holds.
  template <class Make>
  CachedPictureTower(std::string name, VisionDelimiters delimiters, Vision tower, Rows rows,
                     const Model& decoder, int threads, ChunkStore* store, Make make)
      : OnePictureTower(std::move(name), std::move(delimiters)),
        tower_(std::move(tower)),
        rows_(rows),
        pool_(std::max(1, threads)),
        images_(make(tower_, decoder.fingerprint, &pool_)) {
    images_.set_store(store);
  }
  ImageChunks::Stats stats() const override { return images_.stats(); }
  void set_store(ChunkStore* store) override { images_.set_store(store); }

 private:
  Result<int64_t> picture_rows(int width, int height) const override {
    return rows_(tower_, images_, width, height);
  }
  Result<std::shared_ptr<const ChunkContent>> picture(const Image& img, bool* encoded,
                                                      const std::function<bool()>& stop) override {
    return stoppable_image(images_, img, encoded, stop);
  }
  Vision tower_;
  Rows rows_;
  ThreadPool pool_;
  Chunks images_;  // holds a reference to tower_
};

// The towers whose picture cache is made of the tower, the decoder's fingerprint and a pool.
template <class Chunks, class Vision>
std::unique_ptr<MediaTower> picture_tower(std::string name, VisionDelimiters delimiters,
                                          Vision tower,
                                          typename CachedPictureTower<Vision, Chunks>::Rows rows,
                                          const Model& decoder, int threads, ChunkStore* store) {
  return std::make_unique<CachedPictureTower<Vision, Chunks>>(
      std::move(name), std::move(delimiters), std::move(tower), rows, decoder, threads, store,
      [](const Vision& t, const auto& fingerprint, ThreadPool* pool) {
        return Chunks(t, fingerprint, pool);
      });
}

const Tokenizer* tokenizer_of(const Model& decoder) {
  return decoder.tokenizer ? &*decoder.tokenizer : nullptr;
}

Status check_pair(const std::string& mmproj, int out_dim, const Model& decoder) {
  if (out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, out_dim, decoder.cfg.dim);
  return Status::Ok();
}

}  // namespace

Result<int64_t> MediaTower::audio_rows(int64_t) const {
  return make_error(
      ErrorCode::InvalidArgument,
      "the --mmproj tower reads no audio (input_audio parts need a qwen2.5o, qwen2a or qwen3a "
      "tower)");
}

Result<std::shared_ptr<const ChunkContent>> MediaTower::audio_chunk(std::span<const float>,
                                                                    bool* encoded,
                                                                    const std::function<bool()>&) {
  if (encoded) *encoded = false;
  return make_error(
      ErrorCode::InvalidArgument,
      "the --mmproj tower reads no audio (input_audio parts need a qwen2.5o, qwen2a or qwen3a "
      "tower)");
}

bool MediaTower::takes(const std::string& type) {
  return is_qwen_projector(type) || type == "qwen2.5o" || type == "kimivl" || type == "idefics3" ||
         type == "gemma3" || type == "internvl" || type == "mlp" || type == "ldp" ||
         type == "ldpv2" || type == "kamera-minivl";
}

Result<std::unique_ptr<MediaTower>> MediaTower::load(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  KAMERA_ASSIGN_OR_RETURN(const std::string type, mmproj_projector_type(mmproj));
  if (type == "kimivl") {  // Kimi-VL: MoonViT beside a deepseek2 (MLA) decoder
    if (decoder.cfg.arch != Arch::Deepseek2)
      return make_error(ErrorCode::InvalidArgument,
                        "--mmproj: a Kimi-VL tower needs a deepseek2 decoder; {} is '{}'",
                        decoder.source, arch_name(decoder.cfg.arch));
    KAMERA_ASSIGN_OR_RETURN(KimiVisionModel m, KimiVisionModel::load(mmproj));
    KAMERA_TRY(check_kimi_pair(m.cfg, decoder.cfg, mmproj));
    return picture_tower<KimiImageChunks>(
        "Kimi-VL", kimi_delimiters(tokenizer_of(decoder)), std::move(m),
        [](const KimiVisionModel& t, const KimiImageChunks&, int w, int h) -> Result<int64_t> {
          return kimi_picture_rows(w, h, t.cfg);
        },
        decoder, threads, store);
  }
  if (type == "idefics3") {  // SmolVLM / SmolVLM2: SigLIP beside a llama (SmolLM2) decoder
    KAMERA_ASSIGN_OR_RETURN(Idefics3VisionModel m, Idefics3VisionModel::load(mmproj));
    KAMERA_TRY(check_idefics3_pair(m.cfg, decoder, mmproj));
    KAMERA_ASSIGN_OR_RETURN(Idefics3TokenRows tokens, Idefics3TokenRows::from(decoder));
    // (its tiles' tokens are in the chunk: no delimiters)
    return std::unique_ptr<MediaTower>(
        std::make_unique<CachedPictureTower<Idefics3VisionModel, Idefics3ImageChunks>>(
            "SmolVLM", VisionDelimiters{}, std::move(m),
            [](const Idefics3VisionModel&, const Idefics3ImageChunks& c, int w,
               int h) -> Result<int64_t> { return c.rows(w, h); },
            decoder, threads, store,
            [tokens = std::move(tokens)](const Idefics3VisionModel& t, const auto& fingerprint,
                                         ThreadPool* pool) mutable {
              return Idefics3ImageChunks(t, std::move(tokens), fingerprint, pool);
            }));
  }
  if (type == "gemma3") {  // Gemma 3: SigLIP + pooling beside a gemma3 decoder
    KAMERA_ASSIGN_OR_RETURN(Gemma3VisionModel m, Gemma3VisionModel::load(mmproj));
    KAMERA_TRY(check_gemma3_pair(m.cfg, decoder, mmproj));
    return picture_tower<Gemma3ImageChunks>(
        "Gemma 3", gemma3_delimiters(tokenizer_of(decoder)), std::move(m),
        [](const Gemma3VisionModel&, const Gemma3ImageChunks& c, int, int) -> Result<int64_t> {
          return c.rows();
        },
        decoder, threads, store);
  }
  if (type == "internvl") {  // InternVL: InternViT + pixel shuffle beside a qwen2 / qwen3 decoder
    KAMERA_ASSIGN_OR_RETURN(InternvlVisionModel m, InternvlVisionModel::load(mmproj));
    KAMERA_TRY(check_internvl_pair(m.cfg, decoder, mmproj));
    return picture_tower<InternvlImageChunks>(
        "InternVL", internvl_delimiters(tokenizer_of(decoder)), std::move(m),
        [](const InternvlVisionModel& t, const InternvlImageChunks&, int w,
           int h) -> Result<int64_t> { return internvl_picture_rows(w, h, t.cfg); },
        decoder, threads, store);
  }
  if (type == "mlp" || type == "ldp" || type == "ldpv2") {  // LLaVA, MobileVLM: CLIP, llama
    KAMERA_ASSIGN_OR_RETURN(LlavaVisionModel m, LlavaVisionModel::load(mmproj));
    KAMERA_TRY(check_llava_pair(m.cfg, decoder, mmproj));
    // (its rows have no delimiter around them)
    return picture_tower<LlavaImageChunks>(
        "LLaVA", VisionDelimiters{}, std::move(m),
        [](const LlavaVisionModel&, const LlavaImageChunks& c, int w, int h) -> Result<int64_t> {
          return c.rows(w, h);
        },
        decoder, threads, store);
  }
  if (!is_mrope(decoder.cfg.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "--mmproj needs a qwen2vl or qwen3vl (M-RoPE) decoder, a Kimi-VL tower "
                      "beside a deepseek2 one, a SmolVLM tower beside a llama one, a Gemma 3 "
                      "tower beside a gemma3 one, an InternVL tower beside a qwen2 or qwen3 one or "
                      "a LLaVA tower beside a llama one; {} is '{}'",
                      decoder.source, arch_name(decoder.cfg.arch));
  if (type == "kamera-minivl") {
    if (!decoder.tokenizer)
      return make_error(ErrorCode::InvalidArgument,
                        "--mmproj: {} has no vocabulary (the mini-VL's prompt is its words)",
                        decoder.source);
    KAMERA_ASSIGN_OR_RETURN(VisionModel m, VisionModel::load(mmproj));
    KAMERA_TRY(check_pair(mmproj, m.cfg.out_dim, decoder));
    return std::unique_ptr<MediaTower>(new MiniVlTower(std::move(m)));
  }
  if (qwen_picture_delimiters(tokenizer_of(decoder)).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "--mmproj: {} has no {} / {} (or {} / {}) tokens in its vocabulary",
                      decoder.source, kVisionStart, kVisionEnd, kVisionBos, kVisionEos);
  KAMERA_ASSIGN_OR_RETURN(QwenVisionModel tower, QwenVisionModel::load(mmproj));
  KAMERA_TRY(check_qwen_pair(tower.cfg, decoder.cfg, mmproj));
  // an Omni file's vision half times video at the thinker's 25 positions a second
  const double tps = type == "qwen2.5o" ? kOmniPositionsPerSecond : kDefaultTokensPerSecond;
  return std::unique_ptr<MediaTower>(
      new QwenTower(std::move(tower), decoder, std::max(1, threads), store, tps));
}

}  // namespace kamera
