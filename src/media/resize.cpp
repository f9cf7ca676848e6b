#include "media/resize.h"

#include <algorithm>
#include <cmath>

namespace kamera {

namespace media_detail {

double bilinear_kernel(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double lanczos_kernel(double x) {
  auto sinc = [](double t) {
    if (t == 0.0) return 1.0;
    t *= M_PI;
    return std::sin(t) / t;
  };
  if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3.0);
  return 0.0;
}

}  // namespace media_detail

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

// Per output pixel: the first input index, the tap count, and ksize fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weight;  // out x ksize
};

// PIL's filters: the kernel and its support at scale 1.
struct Filter {
  double (*kernel)(double);
  double support;
};
constexpr Filter kBilinear{media_detail::bilinear_kernel, 1.0};
constexpr Filter kBicubic{media_detail::bicubic_kernel, 2.0};
constexpr Filter kLanczos{media_detail::lanczos_kernel, 3.0};

Taps precompute_taps(int in_size, int out_size, const Filter& filter) {
  const double scale = double(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter.support * filterscale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weight.assign(size_t(out_size) * t.ksize, 0);
  std::vector<double> k(size_t(t.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(int(center - support + 0.5), 0);
    const int xmax = std::min(int(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[size_t(x)] = filter.kernel((x + xmin - center + 0.5) * ss);
      ww += k[size_t(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      const double f = w * double(1 << kPrecisionBits);
      t.weight[size_t(xx) * t.ksize + x] = int32_t(w < 0 ? -0.5 + f : 0.5 + f);
    }
    t.first[size_t(xx)] = xmin;
    t.count[size_t(xx)] = xmax;
  }
  return t;
}

inline uint8_t clip8(int32_t v) {
  return uint8_t(std::clamp(v >> kPrecisionBits, 0, 255));
}

// out (out_w x rows) from rows [row0, row0 + rows) of in.
void resample_horizontal(const Image& in, int row0, const Taps& t, Image* out) {
  for (int y = 0; y < out->height; ++y) {
    const uint8_t* src = in.rgb.data() + size_t(y + row0) * in.width * 3;
    uint8_t* dst = out->rgb.data() + size_t(y) * out->width * 3;
    for (int xx = 0; xx < out->width; ++xx) {
      const int32_t* k = t.weight.data() + size_t(xx) * t.ksize;
      const uint8_t* s = src + size_t(t.first[size_t(xx)]) * 3;
      int32_t a0 = 1 << (kPrecisionBits - 1), a1 = a0, a2 = a0;
      for (int x = 0; x < t.count[size_t(xx)]; ++x) {
        a0 += s[x * 3 + 0] * k[x];
        a1 += s[x * 3 + 1] * k[x];
        a2 += s[x * 3 + 2] * k[x];
      }
      dst[xx * 3 + 0] = clip8(a0);
      dst[xx * 3 + 1] = clip8(a1);
      dst[xx * 3 + 2] = clip8(a2);
    }
  }
}

// out (in.width x out_h); taps index rows of `in` shifted by -row0.
void resample_vertical(const Image& in, int row0, const Taps& t, Image* out) {
  const size_t stride = size_t(in.width) * 3;
  for (int yy = 0; yy < out->height; ++yy) {
    const int32_t* k = t.weight.data() + size_t(yy) * t.ksize;
    const uint8_t* s = in.rgb.data() + size_t(t.first[size_t(yy)] - row0) * stride;
    uint8_t* dst = out->rgb.data() + size_t(yy) * stride;
    for (size_t c = 0; c < stride; ++c) {
      int32_t a = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < t.count[size_t(yy)]; ++y) a += s[size_t(y) * stride + c] * k[y];
      dst[c] = clip8(a);
    }
  }
}

Result<Image> resize_with(const Image& in, int out_w, int out_h, const Filter& filter) {
  if (out_w < 1 || out_h < 1 || out_w > (1 << 16) || out_h > (1 << 16))
    return make_error(ErrorCode::InvalidArgument, "resize: bad output size {} x {}", out_w, out_h);
  if (in.width < 1 || in.height < 1 || in.rgb.size() != size_t(in.pixels()) * 3)
    return make_error(ErrorCode::InvalidArgument, "resize: bad input image {} x {}", in.width,
                      in.height);
  if (out_w == in.width && out_h == in.height) return in;
  const Taps th = precompute_taps(in.width, out_w, filter),
             tv = precompute_taps(in.height, out_h, filter);
  const bool need_h = out_w != in.width, need_v = out_h != in.height;
  Image tmp;
  const Image* src = &in;
  int row0 = 0;
  if (need_h) {  // only the rows the vertical pass reads
    const int first = tv.first.front(), last = tv.first.back() + tv.count.back();
    tmp.width = out_w;
    tmp.height = need_v ? last - first : in.height;
    row0 = need_v ? first : 0;
    tmp.rgb.resize(size_t(tmp.width) * tmp.height * 3);
    resample_horizontal(in, row0, th, &tmp);
    src = &tmp;
    if (!need_v) return tmp;
  }
  Image out;
  out.width = src->width;
  out.height = out_h;
  out.rgb.resize(size_t(out.width) * out_h * 3);
  resample_vertical(*src, need_h ? row0 : 0, tv, &out);
  return out;
}

}  // namespace

Result<Image> resize_bicubic(const Image& in, int out_w, int out_h) {
  return resize_with(in, out_w, out_h, kBicubic);
}

Result<Image> resize_bilinear(const Image& in, int out_w, int out_h) {
  return resize_with(in, out_w, out_h, kBilinear);
}

Result<Image> resize_lanczos(const Image& in, int out_w, int out_h) {
  return resize_with(in, out_w, out_h, kLanczos);
}

Result<Image> crop_image(const Image& in, int x, int y, int w, int h) {
  if (x < 0 || y < 0 || w < 1 || h < 1 || x + w > in.width || y + h > in.height)
    return make_error(ErrorCode::InvalidArgument, "crop: {} x {} at ({}, {}) outside {} x {}", w, h,
                      x, y, in.width, in.height);
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(size_t(w) * h * 3);
  for (int r = 0; r < h; ++r)
    std::copy(in.at(x, y + r), in.at(x, y + r) + size_t(w) * 3, out.rgb.data() + size_t(r) * w * 3);
  return out;
}

}  // namespace kamera
