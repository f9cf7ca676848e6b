// Image resampling exactly as PIL's Image.resize(size, Image.BILINEAR / BICUBIC / LANCZOS) does it
// for RGB images (Pillow's Resample.c algorithm, re-implemented): separable, horizontal pass
// first, each pass rounded to 8 bits; the kernel (triangle: support 1; cubic: a = -0.5, support 2;
// Lanczos: sinc(x) sinc(x/3), support 3) is widened by the scale factor when downscaling
// (antialiasing); coefficients are
// computed in double, normalised per output pixel and applied in 22-bit fixed point. Hugging
// Face's image processors resize through PIL, so this gives their pixels bit for bit.
#pragma once

#include "core/status.h"
#include "media/image.h"

namespace kamera {

// A new image of out_w x out_h (each in [1, 1 << 16]). Same size: a copy, as PIL returns.
Result<Image> resize_bicubic(const Image& in, int out_w, int out_h);
// The same with PIL's BILINEAR filter (Hugging Face's Gemma 3 processor).
Result<Image> resize_bilinear(const Image& in, int out_w, int out_h);
// The same with PIL's LANCZOS filter (Hugging Face's Idefics3 / SmolVLM processors).
Result<Image> resize_lanczos(const Image& in, int out_w, int out_h);

// The w x h pixels of `in` from (x, y) (numpy's img[y:y+h, x:x+w]). Errors: a box outside it.
Result<Image> crop_image(const Image& in, int x, int y, int w, int h);

namespace media_detail {
// PIL's bilinear (triangle) kernel: 1 - |x| on (-1, 1).
double bilinear_kernel(double x);
// The cubic convolution kernel PIL uses (a = -0.5).
double bicubic_kernel(double x);
// PIL's Lanczos kernel (a = 3): sinc(x) sinc(x / 3) on [-3, 3).
double lanczos_kernel(double x);
}  // namespace media_detail

}  // namespace kamera
