// A text prompt with images: each "<image>" marker is replaced, in order, by one image's
// embedding rows. The prompt writes the vision delimiters around the marker itself, as Qwen2-VL's
// chat template does:
//
//   "Describe <|vision_start|><image><|vision_end|> briefly."
//
// The delimiters become their token ids whatever the vocabulary kind (SentencePiece vocabularies
// do not parse control tokens in text); the text runs are tokenized as the CLI tokenizes a prompt
// (BOS first when the vocabulary's add_bos flag says so).
//
// Other towers write other delimiters (VisionDelimiters: Kimi-VL's are in vision/kimi_chunks.h),
// or none: then the marker stands alone ("Describe <image> briefly.").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

inline constexpr std::string_view kImageMarker = "<image>";
inline constexpr std::string_view kVisionStart = "<|vision_start|>";
inline constexpr std::string_view kVisionEnd = "<|vision_end|>";
// Qwen2.5-Omni's names for the tokens around a picture (its processor's vision_bos_token /
// vision_eos_token; its vocabulary has no <|vision_start|>).
inline constexpr std::string_view kVisionBos = "<|vision_bos|>";
inline constexpr std::string_view kVisionEos = "<|vision_eos|>";

// Id of the vocabulary piece equal to `text`, or -1.
int32_t find_piece(const Tokenizer& tok, std::string_view text);

// What a prompt writes right before and right after a picture's rows: as text (a chat message's
// text parts, the prompt around an <image> marker) and as token ids. Both empty: none.
struct VisionDelimiters {
  std::string open_text, close_text;
  std::vector<int32_t> open, close;
  bool empty() const { return open_text.empty() && close_text.empty(); }
};

// Qwen2-VL's <|vision_start|> / <|vision_end|> in `tok`'s vocabulary (empty if either is missing).
VisionDelimiters qwen_delimiters(const Tokenizer* tok);
// What a Qwen-VL tower's pictures are written between in `tok`'s vocabulary: qwen_delimiters, or
// where the vocabulary lacks either, Qwen2.5-Omni's <|vision_bos|> / <|vision_eos|> (empty if it
// has neither pair). llama.cpp's mtmd writes the text <|vision_start|> for every Qwen2.5-VL-type
// tower, the Omni file's vision half included (docs/VISION.md, "Pictures and clips").
VisionDelimiters qwen_picture_delimiters(const Tokenizer* tok);

// Markers in the prompt.
int count_image_markers(std::string_view prompt);

// The checks of vl_prompt_pieces that need no model: counts and delimiters (cheap; run it before
// encoding images). The default delimiters are Qwen2-VL's.
Status check_vl_prompt(std::string_view prompt, size_t n_images);
Status check_vl_prompt(std::string_view prompt, size_t n_images, const VisionDelimiters& d);

// The pieces (text token runs and placed images, see rope_index.h) of the prompt. Errors: marker
// and image counts differ, a marker without the delimiters right around it, a vocabulary without
// the delimiter tokens, an image whose width is not decoder_dim.
Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<QwenVisionEmbeddings> images,
                                                   int decoder_dim);
// The same for placed image chunks (any tower) between the delimiters d (their token ids; none:
// the marker stands alone). Errors: as above, and an image of another width than decoder_dim.
Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<ChunkContent> images,
                                                   const VisionDelimiters& d, int decoder_dim);

}  // namespace kamera
