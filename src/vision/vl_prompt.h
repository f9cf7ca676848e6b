// A text prompt with images: each "<image>" marker is replaced, in order, by one image's
// embedding rows. The prompt writes the vision delimiters around the marker itself, as Qwen2-VL's
// chat template does:
//
//   "Describe <|vision_start|><image><|vision_end|> briefly."
//
// The delimiters become their token ids whatever the vocabulary kind (SentencePiece vocabularies
// do not parse control tokens in text); the text runs are tokenized as the CLI tokenizes a prompt
// (BOS first when the vocabulary's add_bos flag says so).
#pragma once

#include <string_view>
#include <vector>

#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"
#include "vision/qwen_vision_encoder.h"

namespace kamera {

inline constexpr std::string_view kImageMarker = "<image>";
inline constexpr std::string_view kVisionStart = "<|vision_start|>";
inline constexpr std::string_view kVisionEnd = "<|vision_end|>";

// Id of the vocabulary piece equal to `text`, or -1.
int32_t find_piece(const Tokenizer& tok, std::string_view text);

// Markers in the prompt.
int count_image_markers(std::string_view prompt);

// The checks of vl_prompt_pieces that need no model: counts and delimiters (cheap; run it before
// encoding images).
Status check_vl_prompt(std::string_view prompt, size_t n_images);

// The pieces (text token runs and placed images, see rope_index.h) of the prompt. Errors: marker
// and image counts differ, a marker without the delimiters right around it, a vocabulary without
// the delimiter tokens, an image whose width is not decoder_dim.
Result<std::vector<ChunkContent>> vl_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                   std::vector<QwenVisionEmbeddings> images,
                                                   int decoder_dim);

}  // namespace kamera
