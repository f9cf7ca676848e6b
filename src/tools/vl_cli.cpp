// --mmproj / --image for the commands that run a prompt (generate, logits): each image is decoded,
// preprocessed as the Hugging Face processor does, encoded by the mmproj's tower and placed at
// its "<image>" marker (vision/vl_prompt.h).
#include "core/thread_pool.h"
#include "media/image.h"
#include "tools/cli_common.h"
#include "vision/qwen_vision_encoder.h"
#include "vision/vl_prompt.h"

namespace kamera::cli {

void add_vl_options(CLI::App& app, VlArgs& a) {
  app.add_option("--mmproj", a.mmproj,
                 "Vision tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL), for --image")
      ->check(CLI::ExistingFile);
  app.add_option("--image", a.images,
                 "PNG or JPEG image for the next <image> marker of -p, written as "
                 "<|vision_start|><image><|vision_end|> (repeatable, in order; needs --mmproj)")
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
  if (!is_mrope(decoder.cfg.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "images need a qwen2vl or qwen3vl (M-RoPE) decoder; this one is '{}'",
                      arch_name(decoder.cfg.arch));
  const int markers = count_image_markers(prompt);
  if (markers != int(a.images.size()))
    return make_error(ErrorCode::InvalidArgument,
                      "-p has {} <image> marker(s) but {} --image option(s) were given", markers,
                      a.images.size());
  KAMERA_TRY(check_vl_prompt(prompt, a.images.size()));  // before the tower runs
  KAMERA_ASSIGN_OR_RETURN(const QwenVisionModel tower, QwenVisionModel::load(a.mmproj));
  KAMERA_TRY(check_qwen_pair(tower.cfg, decoder.cfg, a.mmproj));
  const QwenImageOptions opt = QwenImageOptions::from(tower.cfg);
  ThreadPool pool(threads);
  QwenVisionEncoder enc(tower, &pool);
  std::vector<QwenVisionEmbeddings> images;
  for (const std::string& path : a.images) {
    KAMERA_ASSIGN_OR_RETURN(const Image img, load_image(path));
    KAMERA_ASSIGN_OR_RETURN(const QwenPatches patches, qwen_preprocess_image(img, opt));
    KAMERA_ASSIGN_OR_RETURN(QwenVisionEmbeddings e, enc.encode(patches));
    std::fprintf(stderr, "kamera: %s: %d x %d -> %lld image tokens (grid %d x %d)\n", path.c_str(),
                 patches.resized_width, patches.resized_height, (long long)e.n_rows(), e.grid_h,
                 e.grid_w);
    images.push_back(std::move(e));
  }
  return vl_prompt_pieces(*decoder.tokenizer, prompt, std::move(images), decoder.cfg.input_width());
}

}  // namespace kamera::cli
