#include "server/media_tower.h"

#include <xxhash.h>

#include <list>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/encoder.h"
#include "vision/frame_chunk.h"
#include "vision/image_chunks.h"
#include "vision/kimi_vision_encoder.h"
#include "vision/vl_prompt.h"

namespace kamera {

namespace {

// Qwen2-VL / Qwen2.5-VL / Qwen3-VL: the image cache of vision/image_chunks.h over the tower.
class QwenTower final : public MediaTower {
 public:
  QwenTower(QwenVisionModel tower, const Model& decoder, int threads, ChunkStore* store)
      : tower_(std::move(tower)), pool_(threads), images_(tower_, decoder.fingerprint, &pool_) {
    images_.set_store(store);
  }
  bool delimited() const override { return true; }
  // Qwen3-VL's video is pairs of frames with timestamps between (vision/qwen3vl_video.h): not
  // through this interface yet
  bool takes_video() const override { return !tower_.cfg.qwen3(); }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double fps) override {
    return images_.frames(pictures, encoded, fps);
  }

 private:
  QwenVisionModel tower_;
  ThreadPool pool_;
  ImageChunks images_;
};

// The mini-VL: one frame, encoded as it comes (a few hundred thousand multiply-adds; the frame's
// KV is the chunk cache's all the same, keyed by the chunk's content).
class MiniVlTower final : public MediaTower {
 public:
  explicit MiniVlTower(VisionModel m) : model_(std::move(m)), enc_(model_) {}
  bool delimited() const override { return false; }
  bool word_prompt() const override { return true; }
  bool takes_video() const override { return false; }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double) override {
    if (encoded) *encoded = false;
    const int side = model_.cfg.image_size;
    if (pictures.size() != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "the mini-VL reads one frame per image part, not {} pictures",
                        pictures.size());
    const Image& img = pictures.front();
    if (img.width != side || img.height != side)
      return make_error(ErrorCode::InvalidArgument,
                        "the mini-VL reads {} x {} frames; this picture is {} x {} (it is not "
                        "resized: the model was trained on frames of that size only)",
                        side, side, img.width, img.height);
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, frame_chunk(enc_, img.rgb));
    if (encoded) *encoded = true;
    return std::make_shared<const ChunkContent>(std::move(c));
  }

 private:
  VisionModel model_;
  VisionEncoder enc_;  // holds a pointer to model_
};

// Kimi-VL: one picture per image part; its embeddings kept by picture (XXH3-128 of the pixels
// and both fingerprints), the least recently used dropped beyond 64.
class KimiTower final : public MediaTower {
 public:
  KimiTower(KimiVisionModel tower, const Model& decoder, int threads)
      : tower_(std::move(tower)),
        decoder_fp_(decoder.fingerprint),
        pool_(threads),
        enc_(tower_, &pool_) {}
  bool delimited() const override { return false; }
  bool takes_video() const override { return false; }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double) override {
    if (encoded) *encoded = false;
    if (pictures.size() != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "Kimi-VL's tower reads one picture per image part, not {} (no video)",
                        pictures.size());
    const Image& img = pictures.front();
    const ChunkId key = picture_key(img);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
    KAMERA_ASSIGN_OR_RETURN(const KimiPatches p, kimi_preprocess_image(img, tower_.cfg));
    KAMERA_ASSIGN_OR_RETURN(KimiVisionEmbeddings e, enc_.encode(p));
    auto c = std::make_shared<ChunkContent>();
    c->dim = e.dim;
    c->embeddings = std::move(e.rows);
    for (int i = 0; i < c->n(); ++i) c->layout.push_back(Pos::linear(i));
    if (encoded) *encoded = true;
    lru_.emplace_front(key, std::move(c));
    if (lru_.size() > 64) lru_.pop_back();
    return lru_.front().second;
  }

 private:
  ChunkId picture_key(const Image& img) const {
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    const int wh[] = {img.width, img.height};
    XXH3_128bits_update(st, wh, sizeof(wh));
    XXH3_128bits_update(st, img.rgb.data(), img.rgb.size());
    XXH3_128bits_update(st, tower_.fingerprint.data(), sizeof(tower_.fingerprint));
    XXH3_128bits_update(st, decoder_fp_.data(), sizeof(decoder_fp_));
    XXH3_128bits_update(st, &tower_.cfg.in_token_limit, sizeof(int));
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    return {h.high64, h.low64};
  }
  KimiVisionModel tower_;
  std::array<uint64_t, 2> decoder_fp_;
  ThreadPool pool_;
  KimiVisionEncoder enc_;  // holds a pointer to tower_
  std::list<std::pair<ChunkId, std::shared_ptr<const ChunkContent>>> lru_;
};

Status check_pair(const std::string& mmproj, int out_dim, const Model& decoder) {
  if (out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, out_dim, decoder.cfg.dim);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<MediaTower>> MediaTower::load(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  std::string type;
  {
    KAMERA_ASSIGN_OR_RETURN(auto f, GgufFile::open(mmproj));
    type = f->get_string(gguf_key::kClipProjectorType).value_or("");
  }
  if (type == "kimivl") {  // Kimi-VL: MoonViT beside a deepseek2 (MLA) decoder
    if (decoder.cfg.arch != Arch::Deepseek2)
      return make_error(ErrorCode::InvalidArgument,
                        "--mmproj: a Kimi-VL tower needs a deepseek2 decoder; {} is '{}'",
                        decoder.source, arch_name(decoder.cfg.arch));
    KAMERA_ASSIGN_OR_RETURN(KimiVisionModel m, KimiVisionModel::load(mmproj));
    KAMERA_TRY(check_pair(mmproj, m.cfg.out_dim, decoder));
    return std::unique_ptr<MediaTower>(new KimiTower(std::move(m), decoder, std::max(1, threads)));
  }
  if (!is_mrope(decoder.cfg.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "--mmproj needs a qwen2vl or qwen3vl (M-RoPE) decoder, or a Kimi-VL tower "
                      "beside a deepseek2 one; {} is '{}'",
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
  if (!decoder.tokenizer || find_piece(*decoder.tokenizer, kVisionStart) < 0 ||
      find_piece(*decoder.tokenizer, kVisionEnd) < 0)
    return make_error(ErrorCode::InvalidArgument,
                      "--mmproj: {} has no {} / {} tokens in its vocabulary", decoder.source,
                      kVisionStart, kVisionEnd);
  KAMERA_ASSIGN_OR_RETURN(QwenVisionModel tower, QwenVisionModel::load(mmproj));
  KAMERA_TRY(check_qwen_pair(tower.cfg, decoder.cfg, mmproj));
  return std::unique_ptr<MediaTower>(
      new QwenTower(std::move(tower), decoder, std::max(1, threads), store));
}

}  // namespace kamera
