// Image and video preprocessing of the Qwen2-VL family, as Hugging Face's Qwen2VLImageProcessor
// does it (Qwen2.5-VL uses the same processor):
//   1. smart_resize: both sides to multiples of factor = patch x merge (28), the area within
//      [min_pixels, max_pixels], the aspect ratio kept (transformers' image_processing_qwen2_vl);
//   2. resize with PIL's BICUBIC (media/resize.h: antialiased when downscaling, 8-bit result);
//   3. rescale by 1/255 (in double, stored as f32), normalise (x - mean) / std in f32;
//   4. the temporal patch: frames in pairs (an image is repeated; an odd frame count repeats the
//      last frame), and the flattening
//        patches (t, h/m, w/m, m, m) -> rows; values (channel, frame, py, px) -> columns,
//      i.e. numpy's reshape(t, 2, 3, h/m, m, p, w/m, m, p).transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).
// Video: frames are sampled from a list of decoded images at a target fps as qwen_vl_utils does
// (qwen_sample_frames), then processed together (all resized to the first frame's target size).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "vision/qwen_vision.h"

namespace kamera {

struct QwenImageOptions {
  int patch = 14, merge = 2, temporal_patch = 2;
  int64_t min_pixels = 56 * 56, max_pixels = 12845056;
  std::array<float, 3> mean = kClipMean, std = kClipStd;

  int factor() const { return patch * merge; }
  int patch_values() const { return 3 * temporal_patch * patch * patch; }
  static QwenImageOptions from(const QwenVisionConfig& c);
};

struct ResizedSize {
  int height = 0, width = 0;
};

// transformers' smart_resize (Python round() is half-to-even). Errors: a side of 0, or an
// aspect ratio over 200.
Result<ResizedSize> qwen_smart_resize(int height, int width, int factor, int64_t min_pixels,
                                      int64_t max_pixels);

// The rows (merged tokens) the tower makes of n_frames pictures whose first is width x height
// (every frame is resized to the first one's size), from the sizes alone: what a server bounds
// before decoding a picture. Errors as qwen_smart_resize's.
Result<int64_t> qwen_picture_rows(int width, int height, int n_frames, const QwenImageOptions& opt);

// What the tower reads: grid_t x grid_h x grid_w patches (HF's image_grid_thw), each of
// patch_values floats, in the order above.
struct QwenPatches {
  int grid_t = 0, grid_h = 0, grid_w = 0;
  int patch_values = 0;
  int resized_width = 0, resized_height = 0;
  std::vector<float> values;  // (grid_t * grid_h * grid_w) x patch_values

  int64_t n_patches() const { return int64_t(grid_t) * grid_h * grid_w; }
};

// One image (its frame is repeated to fill the temporal patch).
Result<QwenPatches> qwen_preprocess_image(const Image& image, const QwenImageOptions& opt);
// Video frames (already sampled, e.g. by qwen_sample_frames): all are resized to the size
// smart_resize gives the first; an odd count repeats the last frame.
Result<QwenPatches> qwen_preprocess_frames(std::span<const Image> frames,
                                           const QwenImageOptions& opt);

// Indices of the frames to keep from n_frames recorded at source_fps, sampled at target_fps as
// qwen_vl_utils' smart_nframes does: the count rounded to an even number within
// [min_frames, min(max_frames, n_frames)], spread evenly (linspace, rounded half-to-even).
Result<std::vector<int>> qwen_sample_frames(int n_frames, double source_fps, double target_fps,
                                            int min_frames = 4, int max_frames = 768);

// Steps 3 and 4 on frames already resized to the same multiple-of-factor size.
QwenPatches qwen_patchify(std::span<const Image> resized, const QwenImageOptions& opt);

// Step 3 alone for one pixel value of channel c (the exact f32 the processor produces).
float qwen_normalize(uint8_t v, int c, const QwenImageOptions& opt);

}  // namespace kamera
