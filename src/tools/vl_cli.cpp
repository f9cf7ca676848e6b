// --mmproj / --image for the commands that run a prompt (generate, logits): each image is decoded,
// preprocessed as the Hugging Face processor does, encoded by the mmproj's tower and placed at
// its "<image>" marker (vision/vl_prompt.h). The tower is the server's (vision/media_tower.h):
// Qwen2-VL / Qwen2.5-VL / Qwen3-VL beside a qwen2vl / qwen3vl decoder, Kimi-VL's MoonViT beside
// a deepseek2 one, SmolVLM's and LLaVA's beside a llama one, Gemma 3's beside a gemma3 one,
// InternVL's beside a qwen2 / qwen3 one; each writes its own delimiters around the marker.
#include "media/image.h"
#include "tools/cli_common.h"
#include "vision/media_tower.h"
#include "vision/vl_prompt.h"

namespace kamera::cli {

void add_vl_options(CLI::App& app, VlArgs& a) {
  app.add_option("--mmproj", a.mmproj,
                 "Vision tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, or "
                 "Kimi-VL beside a deepseek2 decoder), for --image")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a.images,
                 "PNG or JPEG image for the next <image> marker of -p, written between the "
                 "tower's delimiters as its chat template writes them: "
                 "<|vision_start|><image><|vision_end|> (Qwen), "
                 "<|media_start|>image<|media_content|><image><|media_end|> (Kimi-VL, where the "
                 "vocabulary has those tokens; a bare <image> otherwise) (repeatable, in order; "
                 "needs --mmproj)")
      ->check(CLI::ExistingFile);
}

Result<std::vector<ChunkContent>> vl_pieces(const VlArgs& a, const Model& decoder,
                                            const std::string& prompt, int threads) {
  if (!decoder.tokenizer)
    return make_error(ErrorCode::InvalidArgument,
                      "the decoder has no tokenizer: -p with "
                      "<image> markers needs one");
  if (a.mmproj.empty())
    return make_error(ErrorCode::InvalidArgument, "--image needs --mmproj (the vision tower)");
  const int markers = count_image_markers(prompt);
  if (markers != int(a.images.size()))
    return make_error(ErrorCode::InvalidArgument,
                      "-p has {} <image> marker(s) but {} --image option(s) were given", markers,
                      a.images.size());
  KAMERA_ASSIGN_OR_RETURN(auto tower, MediaTower::load(a.mmproj, decoder, threads, nullptr));
  if (tower->word_prompt())
    return make_error(ErrorCode::InvalidArgument,
                      "--image: {} is the mini-VL's encoder (its prompt is words: kamera demo, "
                      "kamera serve); give another family's mmproj",
                      a.mmproj);
  const VisionDelimiters d = tower->delimiters();
  KAMERA_TRY(check_vl_prompt(prompt, a.images.size(), d));  // before the tower runs
  std::vector<ChunkContent> images;
  for (const std::string& path : a.images) {
    KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
    KAMERA_ASSIGN_OR_RETURN(auto chunk,
                            tower->chunk(std::span<const Image>(&img, 1), nullptr, 0, {}));
    std::fprintf(stderr, "kamera: %s: %d x %d -> %d image tokens\n", path.c_str(), img.width,
                 img.height, chunk->n());
    images.push_back(*chunk);
  }
  return vl_prompt_pieces(*decoder.tokenizer, prompt, std::move(images), d,
                          decoder.cfg.input_width());
}

}  // namespace kamera::cli
