// The audio tower behind MediaTower (audio_tower.h).
#include "audio/audio_tower.h"

#include <algorithm>

#include "audio/audio_chunks.h"
#include "audio/qwen3_audio.h"
#include "audio/qwen_audio.h"
#include "core/thread_pool.h"
#include "vision/mmproj_kind.h"

namespace kamera {

namespace {

// An audio tower (Qwen2.5-Omni's audio half, Qwen2-Audio's, Qwen3-Omni's or Qwen3-ASR's): clips
// through its cache of audio/audio_chunks.h; pictures refused by name.
template <class TowerModel, class Chunks>
class AudioTower final : public MediaTower {
 public:
  AudioTower(TowerModel tower, const Model& decoder, VisionDelimiters delimiters,
             int64_t (*rows)(int64_t), int threads, ChunkStore* store)
      : tower_(std::move(tower)),
        delimiters_(std::move(delimiters)),
        rows_(rows),
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
  Result<int64_t> audio_rows(int64_t n_samples) const override { return rows_(n_samples); }
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
  TowerModel tower_;
  VisionDelimiters delimiters_;
  int64_t (*rows_)(int64_t);
  ThreadPool pool_;
  Chunks clips_;  // holds a reference to tower_
};

// An Omni file with both halves (Qwen2.5-Omni's, Qwen3-Omni's): pictures through its vision half
// (a Qwen2.5-VL or Qwen3-VL tower, MediaTower::load), clips through its audio half. Each keeps its
// own cache; both write through to the one store.
class OmniTower final : public MediaTower {
 public:
  OmniTower(std::string family, std::unique_ptr<MediaTower> vision,
            std::unique_ptr<MediaTower> audio)
      : family_(std::move(family)), vision_(std::move(vision)), audio_(std::move(audio)) {}
  VisionDelimiters delimiters() const override { return vision_->delimiters(); }
  // a video's frames as one chunk of the vision half: Qwen2.5-Omni's slices at the thinker's 25
  // positions a second (MediaTower::load sets the time scale; no audio track interleaved).
  // Qwen3-Omni's video timing is not implemented: its video parts are refused.
  bool takes_video() const override { return family_ == "Qwen2.5-Omni" && vision_->takes_video(); }
  Result<int64_t> rows(std::span<const ImageSize> pictures) const override {
    return vision_->rows(pictures);
  }
  Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures, bool* encoded,
                                                    double fps,
                                                    const std::function<bool()>& stop) override {
    if (encoded) *encoded = false;
    if (pictures.size() != 1 && !takes_video())
      return make_error(ErrorCode::InvalidArgument,
                        "{}'s vision tower reads one picture per image part here, not {} (no "
                        "video)",
                        family_, pictures.size());
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
  // pictures' and clips' counters together
  ImageChunks::Stats stats() const override {
    ImageChunks::Stats s = vision_->stats();
    const ImageChunks::Stats a = audio_->stats();
    s.hits += a.hits;
    s.encodes += a.encodes;
    s.store_hits += a.store_hits;
    s.encode_ms += a.encode_ms;
    return s;
  }
  void set_store(ChunkStore* store) override {
    vision_->set_store(store);
    audio_->set_store(store);
  }

 private:
  std::string family_;
  std::unique_ptr<MediaTower> vision_, audio_;
};

// The audio tower alone, or, where the file holds a vision half too (clip.has_vision_encoder:
// Qwen2.5-Omni's, Qwen3-Omni's), one tower of both: the one loader path of every Omni file.
Result<std::unique_ptr<MediaTower>> with_vision_half(std::unique_ptr<MediaTower> audio,
                                                     const char* family, const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  KAMERA_ASSIGN_OR_RETURN(const bool has_vision, mmproj_has_vision_encoder(mmproj));
  if (!has_vision) return audio;
  auto vision = MediaTower::load(mmproj, decoder, threads, store);
  if (!vision.ok())
    return make_error(vision.code(), "{}'s vision half: {}", family, vision.message());
  return std::unique_ptr<MediaTower>(
      std::make_unique<OmniTower>(family, std::move(vision.value()), std::move(audio)));
}

// Qwen2-Audio's tower, or Qwen2.5-Omni's file: its audio half beside the qwen2vl thinker, and its
// vision half (a Qwen2.5-VL tower) where the file holds one.
Result<std::unique_ptr<MediaTower>> load_qwen_audio(const std::string& mmproj, const Model& decoder,
                                                    int threads, ChunkStore* store) {
  const Tokenizer* tok = decoder.tokenizer ? &*decoder.tokenizer : nullptr;
  KAMERA_ASSIGN_OR_RETURN(QwenAudioModel m, QwenAudioModel::load(mmproj));
  KAMERA_TRY(check_qwen_audio_pair(m.cfg, decoder, mmproj));
  std::unique_ptr<MediaTower> audio = std::make_unique<AudioTower<QwenAudioModel, QwenAudioChunks>>(
      std::move(m), decoder, audio_delimiters(tok), &qwen_audio_rows, threads, store);
  return with_vision_half(std::move(audio), "Qwen2.5-Omni", mmproj, decoder, threads, store);
}

// Qwen3-ASR's tower, or Qwen3-Omni's file: its audio half beside the qwen3vl / qwen3vlmoe
// thinker, and its vision half (a Qwen3-VL tower) where the file holds one.
Result<std::unique_ptr<MediaTower>> load_qwen3_audio(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  const Tokenizer* tok = decoder.tokenizer ? &*decoder.tokenizer : nullptr;
  KAMERA_ASSIGN_OR_RETURN(Qwen3AudioModel m, Qwen3AudioModel::load(mmproj));
  KAMERA_TRY(check_qwen3_audio_pair(m.cfg, decoder, mmproj));
  std::unique_ptr<MediaTower> audio =
      std::make_unique<AudioTower<Qwen3AudioModel, Qwen3AudioChunks>>(
          std::move(m), decoder, qwen3_audio_delimiters(tok), &qwen3_audio_rows, threads, store);
  return with_vision_half(std::move(audio), "Qwen3-Omni", mmproj, decoder, threads, store);
}

}  // namespace

Result<std::unique_ptr<MediaTower>> load_media_tower(const std::string& mmproj,
                                                     const Model& decoder, int threads,
                                                     ChunkStore* store) {
  KAMERA_ASSIGN_OR_RETURN(const std::string type, mmproj_projector_type(mmproj));
  if (is_qwen_audio_projector(type)) return load_qwen_audio(mmproj, decoder, threads, store);
  // (Qwen3's files name the audio half's type under clip.audio.*: "" or the vision half's above)
  KAMERA_ASSIGN_OR_RETURN(const std::string audio, mmproj_audio_projector_type(mmproj));
  if (is_qwen3_audio_projector(audio)) return load_qwen3_audio(mmproj, decoder, threads, store);
  return MediaTower::load(mmproj, decoder, threads, store);
}

}  // namespace kamera
