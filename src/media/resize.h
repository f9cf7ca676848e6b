// Image resampling exactly as PIL's Image.resize(size, Image.BICUBIC) does it for RGB images
// (Pillow's Resample.c algorithm, re-implemented): separable, horizontal pass first, each pass
// rounded to 8 bits; the cubic kernel (a = -0.5, support 2) is widened by the scale factor when
// downscaling (antialiasing); coefficients are computed in double, normalised per output pixel
// and applied in 22-bit fixed point. Hugging Face's image processors resize through PIL, so this
// gives their pixels bit for bit.
#pragma once

#include "core/status.h"
#include "media/image.h"

namespace kamera {

// A new image of out_w x out_h (each in [1, 1 << 16]). Same size: a copy, as PIL returns.
Result<Image> resize_bicubic(const Image& in, int out_w, int out_h);

namespace media_detail {
// The cubic convolution kernel PIL uses (a = -0.5).
double bicubic_kernel(double x);
}  // namespace media_detail

}  // namespace kamera
