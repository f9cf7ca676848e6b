// The committed tiny SmolVLM2 pair and llama.cpp's view of it (tests/data/idefics3/README.md):
// paths, readers and llama.cpp's overview resize, for the idefics3 tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "media/image.h"

namespace idefics3_fixture {

inline const std::string kDir = std::string(KAMERA_SOURCE_DIR) + "/tests/data/idefics3/";

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(size_t(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4));
  return v;
}

// max |a - b| / max |b|
inline double rel_diff(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(b[i])));
  }
  return num / den;
}

// llama.cpp's overview resize as its mtmd-image.cpp describes it: corners aligned (source step
// (in - 1) / (out - 1) in f32), linear in x then in y in f32, truncated to 8 bits.
inline kamera::Image bilinear_corners(const kamera::Image& in, int w, int h) {
  kamera::Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(size_t(w) * h * 3);
  const float sx = float(in.width - 1) / float(w - 1), sy = float(in.height - 1) / float(h - 1);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const float fx = float(x) * sx, fy = float(y) * sy;
      const int x0 = std::min(int(fx), in.width - 1), y0 = std::min(int(fy), in.height - 1);
      const int x1 = std::min(x0 + 1, in.width - 1), y1 = std::min(y0 + 1, in.height - 1);
      const float tx = fx - float(x0), ty = fy - float(y0);
      for (int c = 0; c < 3; ++c) {
        const float a = in.at(x0, y0)[c], b = in.at(x1, y0)[c];
        const float d = in.at(x0, y1)[c], e = in.at(x1, y1)[c];
        const float top = a + (b - a) * tx, bottom = d + (e - d) * tx;
        out.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t(top + (bottom - top) * ty);
      }
    }
  return out;
}

}  // namespace idefics3_fixture
