// A vision tower (an mmproj) beside its decoder, whatever its family: decoded pictures in, one
// placed chunk (embedding rows with their (t, h, w) layout) out. Every entry point that serves
// pictures takes its tower here: the server's media parts (--mmproj), `generate/logits --mmproj`,
// `kamera chat --mmproj` (vision/vl_chat_session.h) and the C / Python API (kamera_vision). The
// kind is read from the file's clip.projector_type:
//
//   qwen2vl_merger, qwen2.5vl_merger   Qwen2-VL / Qwen2.5-VL (vision/image_chunks.h): pictures of
//                                      any size, preprocessed and encoded once per distinct
//                                      picture; a video's frames pair in time. The prompt writes
//                                      <|vision_start|> and <|vision_end|> around each picture, as
//                                      Qwen2-VL's chat template does (delimiters()).
//   kamera-minivl                      the mini-VL (vision/encoder.h, docs/MINIVL.md): one frame
//                                      of image_size x image_size pixels (32 x 32) per image part,
//                                      a chunk of its token grid with layout (0, row, col); no
//                                      video. The model was trained on bare frames, so no
//                                      delimiters (delimiters() is empty) and the prompt is the
//                                      mini-VL's word prompt (server/prompt_parts.h).
//   kimivl                             Kimi-VL's MoonViT (vision/kimi_vision.h) beside a deepseek2
//                                      decoder: one picture per image part at its own resolution,
//                                      a chunk of its merged tokens on linear positions (the
//                                      decoder's rope is 1-D); embeddings kept by picture (and in
//                                      the store, as a Qwen tower's). No
//                                      video (vision/kimi_chunks.h). Where the decoder's vocabulary
//                                      has them, the prompt writes Kimi-VL's
//                                      <|media_start|>image<|media_content|> ... <|media_end|>
//                                      around each picture, as its chat template does; without
//                                      them (make-model's random vocabularies) nothing.
//   idefics3                           SmolVLM / SmolVLM2's SigLIP (vision/idefics3_vision.h)
//                                      beside a llama decoder: one picture per image part, cut
//                                      into tiles and a global image as its processor does, one
//                                      chunk of linear positions holding the whole prompt of the
//                                      picture (the tiles' rows and the <fake_token_around_image>,
//                                      <row_r_col_c>, "\n", <global-img> tokens' embedding rows:
//                                      vision/idefics3_chunks.h), so no delimiters; kept by
//                                      picture (and in the store). No video.
//   gemma3                             Gemma 3's SigLIP with average pooling
//                                      (vision/gemma3_vision.h) beside a gemma3 decoder: one
//                                      picture per image part, resized to the tower's size, a chunk
//                                      of its pooled rows on linear positions between
//                                      <start_of_image> and <end_of_image> (delimiters()), as
//                                      llama.cpp's mtmd writes them; kept by picture (and in the
//                                      store). No video. The decoder reads the rows causally
//                                      (llama.cpp and the model: bidirectionally; docs/VISION.md).
//   internvl                           InternVL's InternViT with pixel shuffle and MLP
//                                      (vision/internvl_vision.h) beside a qwen2 or qwen3 decoder:
//                                      one picture per image part, cut into tiles and a thumbnail
//                                      as its processor cuts them, a chunk of their rows on linear
//                                      positions between <img> and </img> (delimiters()), as
//                                      llama.cpp's mtmd writes them; kept by picture (and in the
//                                      store). No video.
//   qwen2.5o                           Qwen2.5-Omni's one file of two towers beside a qwen2vl
//                                      decoder (the thinker). Here its vision half alone: a
//                                      Qwen2.5-VL tower as above, between <|vision_start|> /
//                                      <|vision_end|>, or <|vision_bos|> / <|vision_eos|> where the
//                                      vocabulary names them so (Qwen2.5-Omni's own:
//                                      qwen_picture_delimiters); a video's frames as Qwen2.5-VL's,
//                                      its slices timed at the thinker's 25 positions a second
//                                      (vision/video_time.h). audio/audio_tower.h's
//                                      load_media_tower (the server's loader) adds its audio half:
//                                      input_audio parts (WAV, resampled to 16 kHz), one clip a
//                                      chunk of its rows on positions (i, i, i) between
//                                      <|audio_bos|> and <|audio_eos|> (audio_delimiters()), kept
//                                      by its samples (and in the store: audio/audio_chunks.h).
//   qwen2a                             Qwen2-Audio's audio tower, the same Whisper-style tower
//                                      (audio/qwen_audio.h), loaded by load_media_tower only;
//                                      pictures are refused by name.
//   qwen3a (clip.audio.projector_type) Qwen3-ASR's (and Qwen3-Omni's) audio tower
//                                      (audio/qwen3_audio.h, loaded by load_media_tower) beside a
//                                      qwen3vl / qwen3vlmoe thinker: as qwen2.5o, between
//                                      <|audio_start|> and <|audio_end|>, 13 rows per 100 mel
//                                      frames (1 s); Qwen3-Omni's file: both halves, as qwen2.5o.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "media/image.h"
#include "model/model.h"
#include "reuse/chunk.h"
#include "vision/image_chunks.h"
#include "vision/vl_prompt.h"

namespace kamera {

class ChunkStore;

class MediaTower {
 public:
  virtual ~MediaTower() = default;

  // Whether a tower of this projector type (mmproj_projector_type) loads here: every family's.
  static bool takes(const std::string& projector_type);

  // Loads the tower and checks that it pairs with the decoder (a qwen2vl decoder of the tower's
  // projected width; a Qwen tower also needs the vision delimiters in the decoder's vocabulary).
  // store (optional): a Qwen tower looks embeddings up in it and writes them through to it.
  static Result<std::unique_ptr<MediaTower>> load(const std::string& mmproj, const Model& decoder,
                                                  int threads, ChunkStore* store);

  // What the prompt writes around each picture (empty: nothing).
  virtual VisionDelimiters delimiters() const = 0;
  // Whether the decoder reads the mini-VL's word prompt (server/prompt_parts.h).
  virtual bool word_prompt() const { return false; }
  // Whether several pictures may form one video chunk.
  virtual bool takes_video() const = 0;
  // The rows (decoder embedding rows: prompt tokens) the tower makes of one image or a video's
  // frames of these declared sizes, from the sizes alone, before any is decoded. Errors
  // (InvalidArgument): sizes the tower cannot take, with the reason.
  virtual Result<int64_t> rows(std::span<const ImageSize> pictures) const = 0;
  // The placed chunk of one picture (an image) or of a video's frames. encoded: whether this call
  // ran the tower (false: its embeddings were cached). fps: a video's frame rate (0: the default).
  // stop (may be empty): asked between the tower's layers; true ends the encode with an error.
  // Errors (InvalidArgument): a picture the tower cannot take, with the reason.
  // Not thread-safe: the caller serializes calls.
  virtual Result<std::shared_ptr<const ChunkContent>> chunk(std::span<const Image> pictures,
                                                            bool* encoded, double fps,
                                                            const std::function<bool()>& stop) = 0;

  // Whether the tower reads audio clips (input_audio parts).
  virtual bool takes_audio() const { return false; }
  // What the prompt writes around each clip (empty: nothing).
  virtual VisionDelimiters audio_delimiters() const { return {}; }
  // The rows a clip of n_samples at 16 kHz makes. Errors (InvalidArgument): a tower without audio.
  virtual Result<int64_t> audio_rows(int64_t n_samples) const;
  // The placed chunk of one clip of 16 kHz mono samples; encoded and stop as chunk()'s.
  virtual Result<std::shared_ptr<const ChunkContent>> audio_chunk(
      std::span<const float> samples, bool* encoded, const std::function<bool()>& stop);
  // The picture cache's counters (all zero for a tower that keeps none: the mini-VL's).
  virtual ImageChunks::Stats stats() const { return {}; }
  // Embeddings are looked up in, and written through to, this store from now on (nullptr: none).
  virtual void set_store(ChunkStore*) {}
};

}  // namespace kamera
