// --mmproj / --image / --audio for the commands that run a prompt (generate, logits): each image
// is decoded, preprocessed as the Hugging Face processor does, encoded by the mmproj's tower and
// placed at its "<image>" marker; each audio clip is decoded (WAV, FLAC or MP3), brought to 16 kHz,
// encoded by the mmproj's audio tower and placed at its "<audio>" marker (vision/media_prompt.h).
// The tower is the server's (audio/audio_tower.h load_media_tower: vision/media_tower.h's picture
// towers and the audio towers): Qwen2-VL / Qwen2.5-VL / Qwen3-VL beside a qwen2vl / qwen3vl
// decoder, Kimi-VL's MoonViT beside a deepseek2 one, SmolVLM's and LLaVA's beside a llama one,
// Gemma 3's beside a gemma3 one, InternVL's beside a qwen2 / qwen3 one, Qwen2.5-Omni's audio tower
// beside its qwen2vl thinker; each writes its own delimiters around the marker.
#include "audio/audio_chunks.h"
#include "audio/audio_tower.h"
#include "media/audio_file.h"
#include "media/image.h"
#include "tools/cli_common.h"
#include "vision/media_prompt.h"
#include "vision/media_tower.h"

namespace kamera::cli {

void add_vl_options(CLI::App& app, VlArgs& a) {
  app.add_option("--mmproj", a.mmproj,
                 "Vision or audio tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL / "
                 "Qwen3-VL, Kimi-VL beside a deepseek2 decoder, SmolVLM, Gemma 3, InternVL, "
                 "LLaVA; Qwen2.5-Omni's audio tower beside its qwen2vl thinker), for --image / "
                 "--audio")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a.images,
                 "PNG or JPEG image for the next <image> marker of -p, written between the "
                 "tower's delimiters as its chat template writes them: "
                 "<|vision_start|><image><|vision_end|> (Qwen), "
                 "<|media_start|>image<|media_content|><image><|media_end|> (Kimi-VL, where the "
                 "vocabulary has those tokens; a bare <image> otherwise) (repeatable, in order; "
                 "needs --mmproj)")
      ->check(CLI::ExistingFile);
  app.add_option("--audio", a.audios,
                 "WAV, FLAC or MP3 clip for the next <audio> marker of -p, written between the "
                 "audio tower's delimiters: <|audio_bos|><audio><|audio_eos|> (Qwen2.5-Omni); "
                 "decoded and resampled to 16 kHz as the server decodes an input_audio part, its "
                 "rows on positions (i, i, i) after the delimiter (repeatable, in order; needs "
                 "an audio --mmproj)")
      ->check(CLI::ExistingFile);
}

namespace {

// The marker counts against the options, before anything loads.
Status check_counts(const VlArgs& a, const std::string& prompt) {
  if (a.mmproj.empty())
    return make_error(ErrorCode::InvalidArgument, "{} needs --mmproj (the {} tower)",
                      a.images.empty() ? "--audio" : "--image",
                      a.images.empty() ? "audio" : "vision");
  const std::pair<std::string_view, size_t> kinds[] = {{kImageMarker, a.images.size()},
                                                       {kAudioMarker, a.audios.size()}};
  for (const auto& [marker, n] : kinds) {
    const int markers = count_markers(prompt, marker);
    if (markers != int(n))
      return make_error(ErrorCode::InvalidArgument,
                        "-p has {} {} marker(s) but {} --{} option(s) were given", markers, marker,
                        n, marker == kImageMarker ? "image" : "audio");
  }
  return Status::Ok();
}

// What the tower takes, checked against what was given (by name, before anything is encoded).
Status check_tower(const VlArgs& a, const MediaTower& tower) {
  if (tower.word_prompt())
    return make_error(ErrorCode::InvalidArgument,
                      "--image: {} is the mini-VL's encoder (its prompt is words: kamera demo, "
                      "kamera serve); give another family's mmproj",
                      a.mmproj);
  if (!a.audios.empty() && !tower.takes_audio())
    return make_error(ErrorCode::InvalidArgument,
                      "--audio {}: {} is a picture tower; audio needs an audio tower's mmproj "
                      "(Qwen2.5-Omni's)",
                      a.audios.front(), a.mmproj);
  return Status::Ok();
}

Result<ChunkContent> picture_chunk(MediaTower& tower, const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
  const ImageSize size{img.width, img.height};
  if (auto rows = tower.rows(std::span<const ImageSize>(&size, 1)); !rows.ok())
    return make_error(ErrorCode::InvalidArgument, "--image {}: {}", path, rows.message());
  KAMERA_ASSIGN_OR_RETURN(auto chunk, tower.chunk(std::span<const Image>(&img, 1), nullptr, 0, {}));
  std::fprintf(stderr, "kamera: %s: %d x %d -> %d image tokens\n", path.c_str(), img.width,
               img.height, chunk->n());
  return *chunk;
}

Result<ChunkContent> clip_chunk(MediaTower& tower, const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(const AudioClip clip, load_audio(path, kAudioSampleRate));
  KAMERA_ASSIGN_OR_RETURN(auto chunk, tower.audio_chunk(clip.samples, nullptr, {}));
  std::fprintf(stderr, "kamera: %s: %s, %.2f s at %d Hz -> %d audio rows\n", path.c_str(),
               audio_format_lower(clip.format).c_str(), clip.seconds, clip.source_rate, chunk->n());
  return *chunk;
}

}  // namespace

Result<std::vector<ChunkContent>> vl_pieces(const VlArgs& a, const Model& decoder,
                                            const std::string& prompt, int threads,
                                            std::vector<const char*>* kinds) {
  if (!decoder.tokenizer)
    return make_error(ErrorCode::InvalidArgument,
                      "the decoder has no tokenizer: -p with "
                      "<image> or <audio> markers needs one");
  KAMERA_TRY(check_counts(a, prompt));
  KAMERA_ASSIGN_OR_RETURN(auto tower, load_media_tower(a.mmproj, decoder, threads, nullptr));
  KAMERA_TRY(check_tower(a, *tower));
  std::vector<PromptMedia> media = {
      {kImageMarker, "image", tower->delimiters(), a.images.size(), {}},
      {kAudioMarker, "audio clip", tower->audio_delimiters(), a.audios.size(), {}}};
  KAMERA_TRY(check_media_prompt(prompt, media));  // before the tower runs
  for (const std::string& path : a.images) {
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, picture_chunk(*tower, path));
    media[0].chunks.push_back(std::move(c));
  }
  for (const std::string& path : a.audios) {
    KAMERA_ASSIGN_OR_RETURN(ChunkContent c, clip_chunk(*tower, path));
    media[1].chunks.push_back(std::move(c));
  }
  if (kinds) {  // the media pieces' kinds, in the prompt's order
    kinds->clear();
    for (size_t at = 0;;) {
      const size_t i = prompt.find(kImageMarker, at), k = prompt.find(kAudioMarker, at);
      if (i == std::string::npos && k == std::string::npos) break;
      kinds->push_back(i < k ? "image" : "audio");
      at = std::min(i, k) + 1;
    }
  }
  return media_prompt_pieces(*decoder.tokenizer, prompt, std::move(media),
                             decoder.cfg.input_width());
}

}  // namespace kamera::cli
