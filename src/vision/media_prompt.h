// A text prompt with pictures and audio clips at their markers, for the CLI's -p (`kamera
// generate/logits --image/--audio`): each "<image>" marker is replaced, in order, by one picture's
// placed chunk and each "<audio>" marker by one clip's, the two kinds in any order. The prompt
// writes each kind's delimiters right around its marker, as the model's chat template does:
//
//   "<|im_start|>user\n<|audio_bos|><audio><|audio_eos|>What is this?<|im_end|>\n..."
//   (Qwen2.5-Omni) "Describe <|vision_start|><image><|vision_end|> briefly." (Qwen2-VL)
//
// The delimiters become their token ids whatever the vocabulary kind; the text runs are
// tokenized as vision/vl_prompt.h tokenizes them (BOS first when the vocabulary's add_bos flag
// says so). A chunk's rows sit at its own layout from where its piece starts (a picture's
// (0, row, col), a clip's (i, i, i)), and text resumes past its extent (vision/rope_index.h).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "reuse/chunk.h"
#include "tokenizer/tokenizer.h"
#include "vision/vl_prompt.h"

namespace kamera {

inline constexpr std::string_view kAudioMarker = "<audio>";

// One kind of media in a prompt: its marker, the delimiters the prompt writes around it, how many
// the prompt must hold and (for media_prompt_pieces) their placed chunks, in the markers' order.
struct PromptMedia {
  std::string_view marker;      // kImageMarker, kAudioMarker
  std::string_view what;        // "image", "audio clip": named by the errors
  VisionDelimiters delimiters;  // empty: the marker stands alone
  size_t count = 0;
  std::vector<ChunkContent> chunks;
};

// Occurrences of `marker` in the prompt.
int count_markers(std::string_view prompt, std::string_view marker);

// The checks of media_prompt_pieces that need no chunk (run it before encoding anything): each
// kind's marker count equals its count, each marker has its delimiters right around it.
Status check_media_prompt(std::string_view prompt, std::span<const PromptMedia> kinds);

// The pieces (text token runs and placed chunks) of the prompt. Errors: as check_media_prompt, a
// kind whose chunks are not its count, a chunk whose width is not decoder_dim.
Result<std::vector<ChunkContent>> media_prompt_pieces(const Tokenizer& tok, std::string_view prompt,
                                                      std::vector<PromptMedia> kinds,
                                                      int decoder_dim);

}  // namespace kamera
