// The audio tower behind MediaTower (audio_tower.h).
#include "audio/audio_tower.h"

#include <algorithm>

#include "audio/audio_chunks.h"
#include "audio/qwen_audio.h"
#include "core/thread_pool.h"
#include "vision/mmproj_kind.h"

namespace kamera {

namespace {

// Qwen2-Audio's tower (or Qwen2.5-Omni's audio half alone): clips through the cache of
// audio/audio_chunks.h; pictures refused by name.
class QwenAudioTower final : public MediaTower {
 public:
  QwenAudioTower(QwenAudioModel tower, const Model& decoder, int threads, ChunkStore* store)
      : tower_(std::move(tower)),
        delimiters_(kamera::audio_delimiters(decoder.tokenizer ? &*decoder.tokenizer : nullptr)),
        pool_(std::max(1, threads)),
        clips_(tower_, decoder.fingerprint, &pool_) {
    clips_.set_store(store);
  }
  VisionDelimiters delimiters() const override { return {}; }
  bool takes_video() const override { return false; }
  Result<int64_t> rows(std::span<const ImageSize>) const override { return no_pictures(); }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image>, bool* encoded, double,
                                                    const std::function<bool()>&) override {
    if (encoded) *encoded = false;
    return no_pictures();
  }
  bool takes_audio() const override { return true; }
  VisionDelimiters audio_delimiters() const override { return delimiters_; }
  Result<int64_t> audio_rows(int64_t n_samples) const override {
    return qwen_audio_rows(n_samples);
  }
  Result<std::shared_ptr<const ChunkContent>> audio_chunk(
      std::span<const float> samples, bool* encoded, const std::function<bool()>& stop) override {
    clips_.set_stop(stop);
    auto c = clips_.clip(samples, encoded);
    clips_.set_stop({});
    return c;
  }
  ImageChunks::Stats stats() const override { return clips_.stats(); }
  void set_store(ChunkStore* store) override { clips_.set_store(store); }

 private:
  Error no_pictures() const {
    return make_error(ErrorCode::InvalidArgument,
                      "this {} file holds an audio tower and no vision tower (send "
                      "input_audio parts)",
                      tower_.cfg.projector);
  }
  QwenAudioModel tower_;
  VisionDelimiters delimiters_;
  ThreadPool pool_;
  QwenAudioChunks clips_;  // holds a reference to tower_
};

// Qwen2.5-Omni's file with both halves: pictures through its vision half (a Qwen2.5-VL tower,
// MediaTower::load), clips through its audio half. Each keeps its own cache; both write through
// to the one store.
class OmniTower final : public MediaTower {
 public:
  OmniTower(std::unique_ptr<MediaTower> vision, std::unique_ptr<MediaTower> audio)
      : vision_(std::move(vision)), audio_(std::move(audio)) {}
  VisionDelimiters delimiters() const override { return vision_->delimiters(); }
  // Qwen2.5-Omni times a video's slices at 25 positions a second (position_id_per_seconds), where
  // the Qwen2.5-VL tower's video path scales by its 2 tokens a second: not through here
  bool takes_video() const override { return false; }
  Result<int64_t> rows(std::span<const ImageSize> pictures) const override {
    return vision_->rows(pictures);
  }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double fps,
                                                    const std::function<bool()>& stop) override {
    if (encoded) *encoded = false;
    if (pictures.size() != 1)
      return make_error(ErrorCode::InvalidArgument,
                        "Qwen2.5-Omni's vision tower reads one picture per image part here, not "
                        "{} (no video)",
                        pictures.size());
    return vision_->chunk(pictures, encoded, fps, stop);
  }
  bool takes_audio() const override { return true; }
  VisionDelimiters audio_delimiters() const override { return audio_->audio_delimiters(); }
  Result<int64_t> audio_rows(int64_t n_samples) const override {
    return audio_->audio_rows(n_samples);
  }
  Result<std::shared_ptr<const ChunkContent>> audio_chunk(
      std::span<const float> samples, bool* encoded, const std::function<bool()>& stop) override {
    return audio_->audio_chunk(samples, encoded, stop);
  }
  ImageChunks::Stats stats() const override { return vision_->stats(); }
  void set_store(ChunkStore* store) override {
    vision_->set_store(store);
    audio_->set_store(store);
  }

 private:
  std::unique_ptr<MediaTower> vision_, audio_;
};

}  // namespace

Result<std::unique_ptr<MediaTower>> load_media_tower(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  KAMERA_ASSIGN_OR_RETURN(const std::string type, mmproj_projector_type(mmproj));
  if (!is_qwen_audio_projector(type)) return MediaTower::load(mmproj, decoder, threads, store);
  // the audio tower (Qwen2-Audio's, or Qwen2.5-Omni's audio half) beside its qwen2vl thinker
  KAMERA_ASSIGN_OR_RETURN(QwenAudioModel m, QwenAudioModel::load(mmproj));
  KAMERA_TRY(check_qwen_audio_pair(m.cfg, decoder, mmproj));
  std::unique_ptr<MediaTower> audio =
      std::make_unique<QwenAudioTower>(std::move(m), decoder, threads, store);
  KAMERA_ASSIGN_OR_RETURN(const bool has_vision, mmproj_has_vision_encoder(mmproj));
  if (type != "qwen2.5o" || !has_vision) return audio;
  // and its vision half, a Qwen2.5-VL tower beside the same thinker
  KAMERA_ASSIGN_OR_RETURN(auto vision, MediaTower::load(mmproj, decoder, threads, store));
  return std::unique_ptr<MediaTower>(
      std::make_unique<OmniTower>(std::move(vision), std::move(audio)));
}

}  // namespace kamera
