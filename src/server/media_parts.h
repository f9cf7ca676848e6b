// Images and video in /v1/chat/completions messages, on the HTTP side: OpenAI content parts are
// read, checked against the limits before decoding, decoded, encoded by the vision tower
// (vision/media_tower.h; a Qwen tower once per distinct picture, vision/image_chunks.h: keyed by
// pixels, preprocessing and both models), and recorded by its place in the typed RequestMedia
// (serve/request_media.h: messages[i].content[j] -> chunk id, rows, delimiters). The body is not
// rewritten: the prompt code meets the part where the client put it and takes its chunk from
// there, between the vision delimiters where the tower's prompt has them (Qwen2-VL,
// MediaPart::open_text and close_text, server/prompt_parts.h; the mini-VL's frames stand bare,
// as it was trained):
//
//   {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
//   {"type": "video", "frames": ["data:image/jpeg;base64,...", {"url": "..."}, ...], "fps": 2}
//     -> MediaPart{i, j, ID}   (prompt: <|vision_start|>, the chunk ID, <|vision_end|>)
//     (the mini-VL: a video part is refused)
//   {"type": "input_audio", "input_audio": {"data": "UklGR...", "format": "wav"}}
//     -> MediaPart{i, j, ID}   (a Qwen2.5-Omni audio tower: <|audio_bos|>, ID, <|audio_eos|>;
//        "format" wav, mp3 or flac, decoded by libsndfile and resampled to 16 kHz,
//        media/audio_decode.h; the clip kept by its samples)
//
// A video is one chunk whose frames pair in time: t advances per pair (Qwen2-VL), or by seconds
// (Qwen2.5-VL: t = trunc(k * 2 / fps * tokens_per_second), fps from the optional "fps" field,
// default 2; vision/video_time.h). The chunk's KV is then the chunk cache's, as for any chunk:
// formed once, relocated and patched wherever it appears. With a store (the server's), the
// embeddings are looked up in its tiers too and written through to them, so a restarted server
// on the same --store-dir / --redis does not run the tower for a picture it has seen.
// Every refusal is a 4xx with a stable code:
//   vision_not_enabled (400)       an image part, but the server has no --mmproj
//   too_many_images (400)          more pictures (images + video frames) than max_images
//   invalid_media_part (400)       a part without its URL, a video without frames, a bad fps,
//                                  a video to a tower that reads single frames (the mini-VL)
//   remote_media_unsupported (400) http(s) URLs (the server makes no network requests)
//   unsupported_url (400)          any other URL scheme
//   local_media_disabled (403)     a path or file: URL without --allow-local-media
//   media_path_forbidden (403)     a path outside that directory (after "..", symlinks)
//   media_not_found (404)          no such file inside it
//   invalid_data_url (400), invalid_base64 (400)
//   unsupported_media_type (415)   not image/png or image/jpeg (by MIME type and by content);
//                                  an input_audio format other than wav, mp3, flac; bytes of
//                                  another container than the declared format; more than 8
//                                  channels, a rate outside 1 kHz to 384 kHz
//   audio_too_large (413)          an input_audio part's data over max_image_bytes; a clip whose
//                                  header declares more seconds than the context or
//                                  max_image_rows can take (refused before its samples are read)
//   invalid_audio (400)            a truncated or malformed file
//   image_too_large (413)          over max_image_bytes (encoded) or max_image_pixels (declared
//                                  width x height, read from the header before any pixel)
//   invalid_image (400)            truncated or malformed image, or one the tower cannot take
//                                  (the mini-VL: any size but its 32 x 32 frames); the request's
//                                  pictures over max_image_rows rows or max_image_rgb_bytes of
//                                  decoded RGB (both from the headers, before any decode)
//   context_length_exceeded (400)  the pictures' rows, plus the fewest tokens the prompt's text
//                                  can take (its bytes over the longest vocabulary piece) and
//                                  one to generate, over the model's context
// The cost refusals name the part where the request's sum crossed the bound in `param`
// (messages[i].content[j]), and come before any picture of the request is decoded or encoded.
// A request whose client leaves stops its encode between two of the tower's layers.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "model/model.h"
#include "serve/request_media.h"
#include "server/json_fields.h"
#include "server/prometheus.h"
#include "vision/media_tower.h"
#include "vision/vl_prompt.h"

namespace kamera {

struct MediaOptions {
  std::string allow_local_dir;  // empty: local paths and file: URLs are refused
  size_t max_image_bytes = size_t(20) << 20;
  int64_t max_image_pixels = 16'000'000;
  int max_images = 16;                               // pictures per request, video frames included
  int64_t max_image_rows = 4096;                     // rows the tower makes of a request's pictures
  int64_t max_image_rgb_bytes = int64_t(192) << 20;  // their decoded RGB, summed
};

// A content value that may hold media parts: a chat message's "content" (a string or an array
// of parts) or a completions prompt's array of parts. `message` is its media parts' place in
// RequestMedia (messages[message].content[j]; a completions prompt: 0), `where` the param that
// names them ("messages[3].content", "prompt").
struct MediaContent {
  const ojson* content = nullptr;
  size_t message = 0;
  std::string where;
};

// The contents of a chat body's messages, in order.
std::vector<MediaContent> chat_media_contents(const ojson& body);

class ServerMedia {
 public:
  // Loads the tower and checks that it pairs with the decoder (load_media_tower, audio_tower.h).
  // store (optional): a Qwen tower's embeddings are looked up in it and written through to it.
  static Result<std::unique_ptr<ServerMedia>> load(const std::string& mmproj, const Model& decoder,
                                                   const MediaOptions& opts, int threads,
                                                   ChunkStore* store = nullptr);

  // Reads the media parts of body["messages"] (see above) and fills `out`: each part's chunk,
  // rows and delimiters at its place (RequestMedia::parts), the chunks, the counts; a refusal
  // otherwise. The body is left as the client sent it: the prompt code takes each part's chunk
  // from `out` where it meets the part (server/prompt_parts.h). Every picture is read and sized
  // (its header), the request's cost checked, then each decoded and encoded. stop (may be
  // empty): true once the client has left; the encode then stops. Thread-safe: decoding runs in
  // the caller's thread, the tower one request at a time.
  std::optional<HttpError> prepare(const ojson& body, RequestMedia& out, ServerMetrics& metrics,
                                   const std::function<bool()>& stop = {});
  // The same over content values named one by one (a completions prompt's parts: {&prompt, 0,
  // "prompt"}; its media parts are then places (0, j) of RequestMedia).
  std::optional<HttpError> prepare(std::span<const MediaContent> contents, RequestMedia& out,
                                   ServerMetrics& metrics, const std::function<bool()>& stop = {});

  const MediaOptions& options() const { return opts_; }
  // The decoder reads the mini-VL's word prompt (bare frames, then the question's words:
  // server/prompt_parts.h), not a chat template's text with delimited pictures.
  bool word_prompt() const { return tower_->word_prompt(); }

 private:
  struct Part;  // one media part's pictures, read and sized (media_parts.cpp)
  ServerMedia(std::unique_ptr<MediaTower> tower, const Model& decoder, const MediaOptions& opts);
  std::optional<HttpError> picture_bytes(const ojson& ref, std::vector<uint8_t>& bytes,
                                         ImageSize& size) const;
  std::optional<HttpError> read_part(const ojson& part, Part& out) const;
  std::optional<HttpError> read_audio(const ojson& part, Part& out) const;
  std::optional<HttpError> check_cost(std::span<const MediaContent> contents,
                                      std::span<const Part> parts) const;
  std::optional<HttpError> add_part(Part& part, RequestMedia& out, ServerMetrics& metrics,
                                    const std::function<bool()>& stop);
  std::optional<HttpError> add_audio(Part& part, RequestMedia& out,
                                     const std::function<bool()>& stop);
  void record(const Part& part, const std::shared_ptr<const ChunkContent>& chunk, bool encoded,
              const VisionDelimiters& d, RequestMedia& out) const;

  std::unique_ptr<MediaTower> tower_;
  const Model& decoder_;
  MediaOptions opts_;
  size_t piece_bytes_;  // the decoder's longest vocabulary piece (the text's fewest tokens)
  std::mutex mu_;       // guards the tower (its image cache and scratch)
};

// Whether a chat body has image or video parts (to refuse them when no tower is loaded).
bool has_media_parts(const ojson& body);
// Whether a content value (an array of parts) has image or video parts.
bool has_media_items(const ojson& content);

}  // namespace kamera
