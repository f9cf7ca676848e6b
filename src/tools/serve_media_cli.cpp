// kamera serve: the options of images in chat messages (server/media_parts.h).
#include "server/server.h"
#include "tools/cli_common.h"

namespace kamera::cli {

void add_serve_media_options(CLI::App& app, ServerOptions& o) {
  app.add_option(
         "--mmproj", o.mmproj,
         "Vision tower in llama.cpp's mmproj GGUF (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, Kimi-VL "
         "beside a deepseek2 decoder, or the mini-VL's): chat messages may then hold "
         "image_url parts (data:image/png|jpeg;base64 URLs) and video parts "
         "({\"type\": \"video\", \"frames\": [url, ...]}; Qwen towers); each picture "
         "is an image chunk")
      ->check(CLI::ExistingFile);
  app.add_option("--allow-local-media", o.allow_local_media,
                 "Let image URLs be local paths or file:// URLs, confined to this directory "
                 "(real paths: no '..' or symlink escape); off by default")
      ->check(CLI::ExistingDirectory);
  app.add_option("--max-image-bytes", o.max_image_bytes,
                 "Largest encoded image (bytes), checked before decoding")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1), size_t(1) << 40));
  app.add_option("--max-image-pixels", o.max_image_pixels,
                 "Largest declared width x height of an image, checked before decoding")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  app.add_option("--max-image-rows", o.max_image_rows,
                 "Most rows (prompt tokens) the vision tower may make of one request's pictures, "
                 "computed from their headers before any is decoded (a 4000 x 4000 picture is "
                 "16,384 rows for a Qwen2-VL tower); more is refused 400 invalid_image")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--max-image-rgb-mb", o.max_image_rgb_mb,
                 "Most decoded RGB (MiB) of one request's pictures together, from their headers "
                 "before any is decoded; more is refused 400 invalid_image")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--max-images", o.max_images,
                 "Most pictures per request (images and video frames)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
}

}  // namespace kamera::cli
