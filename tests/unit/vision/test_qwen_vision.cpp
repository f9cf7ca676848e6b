// The Qwen2-VL / Qwen2.5-VL vision tower: its mmproj GGUF round-trips (both of llama.cpp's FFN
// namings load to the same tower), the vision kernels equal their definitions, and the engine's
// forward equals a naive double-precision forward written from Hugging Face's model code (dense
// masked attention, rotate_half RoPE, per-pixel patch convolution), for both variants, images and
// video. The comparison with llama.cpp's own encoder is in test_qwen_vision_llamacpp.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "ops/vision_ops.h"
#include "support/temp_path.h"
#include "vision/qwen_vision_encoder.h"

namespace {

using namespace kamera;

QwenVisionConfig tiny(const char* arch) {
  auto c = qwen_vision_preset(arch, "tiny");
  EXPECT_TRUE(c.has_value());
  return *c;
}

// Deterministic test pictures with structure at every scale.
Image picture(int w, int h, int seed) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 90 * std::sin(0.21 * x * (c + 1) + 0.13 * y + seed) +
                         30 * std::cos(0.05 * x * y + c);
        img.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t(std::clamp(v, 0.0, 255.0));
      }
  return img;
}

QwenPatches patches_of(const std::vector<Image>& frames, const QwenVisionConfig* c = nullptr) {
  QwenImageOptions opt = c ? QwenImageOptions::from(*c) : QwenImageOptions{};
  opt.min_pixels = opt.factor() * opt.factor();
  auto p = qwen_preprocess_frames(frames, opt);
  EXPECT_TRUE(p.ok()) << p.message();
  return *p;
}

// ---- the naive reference (double precision, Hugging Face's formulation) ----

using Mat = std::vector<double>;  // row-major

Mat linear(const Mat& x, int n, const QwenLinear& l) {
  const std::vector<float> w = l.w.to_f32();  // the file's values, widened
  Mat y(size_t(n) * l.out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < l.out; ++o) {
      double s = l.b.empty() ? 0.0 : l.b[size_t(o)];
      for (int k = 0; k < l.in; ++k) s += x[size_t(i) * l.in + k] * w[size_t(o) * l.in + k];
      y[size_t(i) * l.out + o] = s;
    }
  return y;
}

Mat norm(const Mat& x, int n, int d, const std::vector<float>& w, const std::vector<float>& b,
         bool rms, double eps) {
  Mat y(x.size());
  for (int i = 0; i < n; ++i) {
    const double* r = &x[size_t(i) * d];
    double mean = 0, var = 0;
    for (int k = 0; k < d; ++k) mean += r[k];
    mean = rms ? 0.0 : mean / d;
    for (int k = 0; k < d; ++k) var += (r[k] - mean) * (r[k] - mean);
    const double inv = 1.0 / std::sqrt(var / d + eps);
    for (int k = 0; k < d; ++k)
      y[size_t(i) * d + k] = (r[k] - mean) * inv * w[size_t(k)] + (b.empty() ? 0.0 : b[size_t(k)]);
  }
  return y;
}

// rotary_pos_emb = cat(h * inv_freq, w * inv_freq); x * cos(cat(f, f)) + rotate_half(x) * sin(..)
void rope_hf(Mat& x, int n, int H, int hd, const std::vector<int>& hp, const std::vector<int>& wp,
             double theta) {
  const int dim = hd / 2;  // VisionRotaryEmbedding(head_dim / 2)
  for (int i = 0; i < n; ++i) {
    std::vector<double> f(static_cast<size_t>(hd));
    for (int j = 0; j < dim / 2; ++j) {
      const double inv = 1.0 / std::pow(theta, 2.0 * j / dim);
      f[size_t(j)] = hp[size_t(i)] * inv;
      f[size_t(j + dim / 2)] = wp[size_t(i)] * inv;
    }
    for (int j = 0; j < dim; ++j) f[size_t(dim + j)] = f[size_t(j)];
    for (int h = 0; h < H; ++h) {
      double* v = &x[(size_t(i) * H + h) * hd];
      std::vector<double> rot(static_cast<size_t>(hd));
      for (int j = 0; j < hd / 2; ++j) {
        rot[size_t(j)] = -v[j + hd / 2];
        rot[size_t(j + hd / 2)] = v[j];
      }
      for (int j = 0; j < hd; ++j)
        v[j] = v[j] * std::cos(f[size_t(j)]) + rot[size_t(j)] * std::sin(f[size_t(j)]);
    }
  }
}

// Qwen3-VL's position table resampled to a gh x gw patch grid (fast_pos_embed_interpolate in
// double: linspace(0, S - 1, n), the four corners weighted bilinearly), in raster order.
Mat positions_hf(const QwenVisionModel& m, int gh, int gw) {
  const int S = m.cfg.pos_side(), d = m.cfg.dim;
  Mat p(size_t(gh) * gw * d, 0.0);
  auto at = [&](int n, int i) { return n > 1 ? double(i) * (S - 1) / (n - 1) : 0.0; };
  for (int r = 0; r < gh; ++r)
    for (int c = 0; c < gw; ++c) {
      const double y = at(gh, r), x = at(gw, c);
      const int y0 = int(y), x0 = int(x), y1 = std::min(y0 + 1, S - 1),
                x1 = std::min(x0 + 1, S - 1);
      const double dy = y - y0, dx = x - x0;
      const int idx[4] = {y0 * S + x0, y0 * S + x1, y1 * S + x0, y1 * S + x1};
      const double wt[4] = {(1 - dy) * (1 - dx), (1 - dy) * dx, dy * (1 - dx), dy * dx};
      for (int q = 0; q < 4; ++q)
        for (int j = 0; j < d; ++j)
          p[(size_t(r) * gw + c) * d + j] += m.w.pos_embd[size_t(idx[q]) * d + j] * wt[q];
    }
  return p;
}

// A merger's MLP over rows already normed: W_2 gelu_erf(W_1 y + b_1) + b_2.
Mat merger_hf(const Mat& y, int rows, const QwenLinear& fc1, const QwenLinear& fc2) {
  Mat a = linear(y, rows, fc1);
  for (double& e : a) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
  return linear(a, rows, fc2);
}

// One slice of the tower; returns (n / 4) x embed_width (the merger's out_dim, then Qwen3-VL's
// deepstack mergers').
Mat reference_slice(const QwenVisionModel& m, const float* pv, int gh, int gw) {
  const QwenVisionConfig& c = m.cfg;
  const int n = gh * gw, d = c.dim, H = c.n_heads, hd = c.head_dim(), P = c.patch;
  // patch embedding: the Conv3d from the two per-frame kernels of the file
  Mat x(size_t(n) * d, 0.0);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < d; ++o) {
      double s = c.patch_bias ? m.w.patch_b[size_t(o)] : 0.0;
      for (int ch = 0; ch < 3; ++ch)
        for (int fr = 0; fr < 2; ++fr)
          for (int py = 0; py < P; ++py)
            for (int px = 0; px < P; ++px) {
              const auto& ker = fr == 0 ? m.w.patch0 : m.w.patch1;
              s += ker[((size_t(o) * 3 + ch) * P + py) * P + px] *
                   pv[size_t(i) * c.patch_values() + ((ch * 2 + fr) * P + py) * P + px];
            }
      x[size_t(i) * d + o] = s;
    }
  // positions: arange(h) expanded over w, reshaped (h/2, 2, w/2, 2), permuted (0, 2, 1, 3)
  std::vector<int> hp, wp;
  for (int a = 0; a < gh / 2; ++a)
    for (int b = 0; b < gw / 2; ++b)
      for (int e = 0; e < 2; ++e)
        for (int f = 0; f < 2; ++f) {
          hp.push_back(a * 2 + e);
          wp.push_back(b * 2 + f);
        }
  if (c.qwen3()) {  // the learned positions, permuted into the same merge order
    const Mat pos = positions_hf(m, gh, gw);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) x[size_t(i) * d + j] += pos[(size_t(hp[i]) * gw + wp[i]) * d + j];
  }
  std::vector<Mat> deep;
  // windows (Qwen2.5-VL): merged token (y, x) in window (y / s, x / s), s = window / 28
  const int s = c.window / c.merge / c.patch, mw = gw / 2;
  auto window_of = [&](int i) { return ((i / 4) / mw / s) * 1000 + ((i / 4) % mw) / s; };
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& L = m.w.layers[size_t(l)];
    Mat h1 = norm(x, n, d, L.ln1_w, L.ln1_b, c.rms_norm(), c.eps);
    Mat q = linear(h1, n, L.q), k = linear(h1, n, L.k), v = linear(h1, n, L.v);
    rope_hf(q, n, H, hd, hp, wp, c.rope_theta);
    rope_hf(k, n, H, hd, hp, wp, c.rope_theta);
    Mat att(size_t(n) * d, 0.0);
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < n; ++i) {
        std::vector<double> sc(size_t(n), -INFINITY);
        double mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          if (!c.full_attention(l) && window_of(i) != window_of(j)) continue;
          double dotp = 0;
          for (int e = 0; e < hd; ++e)
            dotp += q[(size_t(i) * H + h) * hd + e] * k[(size_t(j) * H + h) * hd + e];
          sc[size_t(j)] = dotp / std::sqrt(double(hd));
          mx = std::max(mx, sc[size_t(j)]);
        }
        double z = 0;
        for (double& e : sc) z += (e = std::exp(e - mx));
        for (int j = 0; j < n; ++j)
          for (int e = 0; e < hd; ++e)
            att[(size_t(i) * H + h) * hd + e] +=
                sc[size_t(j)] / z * v[(size_t(j) * H + h) * hd + e];
      }
    Mat o = linear(att, n, L.o);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    Mat h2 = norm(x, n, d, L.ln2_w, L.ln2_b, c.rms_norm(), c.eps);
    Mat f;
    if (c.act == QwenVisionAct::SiluGated) {
      Mat g = linear(h2, n, L.gate), u = linear(h2, n, L.up);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      f = linear(g, n, L.down);
    } else {
      Mat u = linear(h2, n, L.up);
      for (double& e : u)
        e = c.act == QwenVisionAct::Gelu ? 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)))
            : c.act == QwenVisionAct::GeluTanh
                ? 0.5 * e * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e)))
                : e / (1 + std::exp(-1.702 * e));
      f = linear(u, n, L.down);
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
    for (size_t k = 0; k < c.deepstack_layers.size(); ++k)  // Qwen3-VL: postshuffle norm
      if (c.deepstack_layers[k] == l) {
        const auto& ds = m.w.deepstack[k];
        const Mat y = norm(x, n / 4, 4 * d, ds.norm_w, ds.norm_b, false, c.eps);
        deep.push_back(merger_hf(y, n / 4, ds.fc1, ds.fc2));
      }
  }
  Mat y = norm(x, n, d, m.w.post_ln_w, m.w.post_ln_b, c.rms_norm(), c.eps);  // view (n/4, 4d)
  const Mat main = merger_hf(y, n / 4, m.w.mm0, m.w.mm2);
  const int od = c.out_dim, ew = c.embed_width();
  Mat out(size_t(n / 4) * ew);
  for (int t = 0; t < n / 4; ++t)
    for (size_t k = 0; k <= deep.size(); ++k)
      for (int j = 0; j < od; ++j)
        out[size_t(t) * ew + k * od + j] = (k == 0 ? main : deep[k - 1])[size_t(t) * od + j];
  return out;
}

// max |a - b| / max |b|
double rel_err(const std::vector<float>& a, const Mat& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

TEST(QwenVision, ForwardEqualsNaiveReference) {
  ThreadPool pool(2);
  for (const char* arch : {"qwen2vl", "qwen25vl", "qwen3vl"}) {
    SCOPED_TRACE(arch);
    QwenVisionConfig c = tiny(arch);
    if (c.variant == QwenVisionVariant::Qwen25VL) c.window = 56;  // 2 x 2 merged tokens a window
    const QwenVisionModel m = QwenVisionModel::random(c, 11);
    // 140 x 112: a 10 x 8 patch grid, 5 x 4 merged, windows cut unevenly on both axes
    // (Qwen3-VL: 160 x 128 of 16-pixel patches, its 4 x 4 position table stretched to 8 x 10)
    const QwenPatches p =
        c.qwen3() ? patches_of({picture(160, 128, 1)}, &c) : patches_of({picture(140, 112, 1)});
    ASSERT_EQ(p.grid_h, 8);
    ASSERT_EQ(p.grid_w, 10);
    QwenVisionEncoder enc(m, &pool);
    auto e = enc.encode(p);
    ASSERT_TRUE(e.ok()) << e.message();
    ASSERT_EQ(e->grid_t, 1);
    ASSERT_EQ(e->grid_h, 4);
    ASSERT_EQ(e->grid_w, 5);
    const Mat ref = reference_slice(m, p.values.data(), p.grid_h, p.grid_w);
    ASSERT_EQ(e->rows.size(), ref.size());
    const double err = rel_err(e->rows, ref);
    EXPECT_LT(err, 2e-5);
    std::printf("%s: max |kamera - reference| / max |reference| = %.2e\n", arch, err);
  }
}

TEST(QwenVision, WindowsChangeTheResultAndFullLayersAreListed) {
  QwenVisionConfig c = tiny("qwen25vl");
  c.window = 56;
  const QwenPatches p = patches_of({picture(112, 112, 2)});
  ThreadPool pool(1);
  const QwenVisionModel windowed = QwenVisionModel::random(c, 5);
  c.full_attention_layers = {0, 1, 2, 3};
  const QwenVisionModel full = QwenVisionModel::random(c, 5);
  auto a = QwenVisionEncoder(windowed, &pool).encode(p);
  auto b = QwenVisionEncoder(full, &pool).encode(p);
  ASSERT_TRUE(a.ok() && b.ok());
  double diff = 0;
  for (size_t i = 0; i < a->rows.size(); ++i)
    diff = std::max(diff, double(std::abs(a->rows[i] - b->rows[i])));
  EXPECT_GT(diff, 1e-3) << "window attention had no effect";
  // Windows: 4 x 4 merged grid, windows of 2 x 2 merged tokens = 16 patches each, 4 windows.
  std::vector<int32_t> members, offsets;
  QwenVisionEncoder::window_groups(windowed.cfg, 8, 8, &members, &offsets);
  ASSERT_EQ(offsets, (std::vector<int32_t>{0, 16, 32, 48, 64}));
  EXPECT_EQ(members[0], 0);
  EXPECT_EQ(members[4], 4);   // merged token (0, 1)
  EXPECT_EQ(members[8], 16);  // merged token (1, 0)
  // 3 x 5 merged grid with 2 x 2 windows: 2 x 3 windows, the last row and column cut.
  QwenVisionEncoder::window_groups(windowed.cfg, 6, 10, &members, &offsets);
  ASSERT_EQ(offsets.size(), 7u);
  EXPECT_EQ(offsets[1] - offsets[0], 16);
  EXPECT_EQ(offsets[3] - offsets[2], 8);  // column cut
  EXPECT_EQ(offsets[6] - offsets[5], 4);  // corner
  EXPECT_EQ(offsets.back(), 60);
}

TEST(QwenVision, VideoSlicesAreIndependentImages) {
  const QwenVisionModel m = QwenVisionModel::random(tiny("qwen2vl"), 3);
  std::vector<Image> f = {picture(56, 84, 1), picture(56, 84, 2), picture(56, 84, 3),
                          picture(56, 84, 4)};
  ThreadPool pool(2);
  QwenVisionEncoder enc(m, &pool);
  auto all = enc.encode(patches_of(f));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->grid_t, 2);
  auto first = enc.encode(patches_of({f[0], f[1]}));
  auto second = enc.encode(patches_of({f[2], f[3]}));
  ASSERT_TRUE(first.ok() && second.ok());
  std::vector<float> both = first->rows;
  both.insert(both.end(), second->rows.begin(), second->rows.end());
  EXPECT_EQ(all->rows, both);
  // A pair differs from an image (its own pair).
  auto still = enc.encode(patches_of({f[0]}));
  ASSERT_TRUE(still.ok());
  EXPECT_NE(still->rows, first->rows);
}

TEST(QwenVision, VisionOpsEqualTheirDefinitions) {
  const int n = 5, H = 2, hd = 8;
  std::vector<float> x(size_t(n) * H * hd);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * i + 0.3));
  Mat xd(x.begin(), x.end());
  const std::vector<int32_t> hp = {0, 0, 1, 1, 7}, wp = {0, 1, 0, 1, 3};
  std::vector<float> r = x;
  vision_rope(r.data(), n, H, hd, hp, wp, 10000.0);
  rope_hf(xd, n, H, hd, std::vector<int>(hp.begin(), hp.end()),
          std::vector<int>(wp.begin(), wp.end()), 10000.0);
  for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(r[i], xd[i], 1e-6);
  // layernorm against the double formula
  std::vector<float> w(8), b(8), y(16), in(16);
  for (int i = 0; i < 8; ++i) {
    w[size_t(i)] = 1.0f + 0.1f * i;
    b[size_t(i)] = 0.05f * i - 0.2f;
  }
  for (int i = 0; i < 16; ++i) in[size_t(i)] = float(3.0 + std::cos(1.3 * i));
  layernorm(in.data(), w.data(), b.data(), y.data(), 2, 8, 1e-6f);
  const Mat ref = norm(Mat(in.begin(), in.end()), 2, 8, w, b, false, 1e-6);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(y[size_t(i)], ref[size_t(i)], 2e-6);
  std::vector<float> g = {-6.0f, -1.5f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f}, q = g, t = g;
  gelu_erf_inplace(g.data(), int64_t(g.size()));
  quick_gelu_inplace(q.data(), int64_t(q.size()));
  gelu_tanh_inplace(t.data(), int64_t(t.size()));
  const float src[] = {-6.0f, -1.5f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f};
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = src[i];
    EXPECT_NEAR(g[i], 0.5 * s * (1 + std::erf(s / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(q[i], s / (1 + std::exp(-1.702 * s)), 1e-6);
    EXPECT_NEAR(t[i], 0.5 * s * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s))),
                1e-6);
  }
  // the two GELUs are not the same function: a kernel picking the wrong one is seen above
  EXPECT_GT(std::abs(g[1] - t[1]), 1e-4);
}

TEST(QwenVision, GroupedAttentionEqualsMaskedDenseAttention) {
  const int n = 600, H = 2, hd = 16, width = H * hd;  // over one 512-row query block
  std::vector<float> q(size_t(n) * width), k(q.size()), v(q.size()), out(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = float(std::sin(0.37 * i));
    k[i] = float(std::cos(0.11 * i + 1));
    v[i] = float(std::sin(0.05 * i + 2));
  }
  // two groups: odd tokens, and even tokens
  std::vector<int32_t> members, offsets = {0};
  for (int parity : {1, 0}) {
    for (int i = parity; i < n; i += 2) members.push_back(i);
    offsets.push_back(int32_t(members.size()));
  }
  std::vector<float> scratch;
  ThreadPool pool(2);
  grouped_attention(q.data(), k.data(), v.data(), out.data(), n, H, hd, {members, offsets}, scratch,
                    &pool);
  for (int i : {0, 1, 2, 301, 598, 599})
    for (int h = 0; h < H; ++h) {
      std::vector<double> sc;
      double mx = -INFINITY;
      for (int j = i % 2; j < n; j += 2) {
        double s = 0;
        for (int e = 0; e < hd; ++e)
          s += double(q[size_t(i) * width + h * hd + e]) * k[size_t(j) * width + h * hd + e];
        sc.push_back(s / 4.0);
        mx = std::max(mx, sc.back());
      }
      double z = 0;
      for (double& s : sc) z += (s = std::exp(s - mx));
      for (int e = 0; e < hd; ++e) {
        double o = 0;
        for (size_t t = 0; t < sc.size(); ++t)
          o += sc[t] / z * v[(size_t(i % 2) + 2 * t) * width + h * hd + e];
        EXPECT_NEAR(out[size_t(i) * width + h * hd + e], o, 1e-5) << i << " " << h << " " << e;
      }
    }
}

// Copies a GGUF file with tensors renamed (substring replacements) and integer keys reset.
void rewrite(const std::string& from, const std::string& to,
             const std::map<std::string, std::string>& rename,
             const std::map<std::string, int64_t>& keys = {}) {
  auto f = GgufFile::open(from);
  ASSERT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [key, v] : (*f)->metadata()) {
    if (keys.count(key)) {
      w.set_u32(key, uint32_t(keys.at(key)));
    } else if (const auto* s = std::get_if<std::string>(&v.data)) {
      w.set_string(key, *s);
    } else if (const auto* d = std::get_if<std::vector<double>>(&v.data)) {
      w.set_f32_array(key, std::vector<float>(d->begin(), d->end()));
    } else if (v.type == GgufType::BOOL) {
      w.set_bool(key, std::get<bool>(v.data));
    } else if (v.type == GgufType::F32) {
      w.set_f32(key, float(std::get<double>(v.data)));
    } else if (const auto* i = std::get_if<int64_t>(&v.data)) {
      w.set_u32(key, uint32_t(*i));
    }
  }
  for (const GgufTensor& t : (*f)->tensors()) {
    std::string name = t.name;
    for (const auto& [a, b] : rename)
      if (name.find(a) != std::string::npos) name.replace(name.find(a), a.size(), b);
    auto data = (*f)->read_f32(t);
    ASSERT_TRUE(data.ok());
    auto vals = std::make_shared<std::vector<float>>(std::move(*data));
    const DType type = t.type == GgmlType::F16 ? DType::F16 : DType::F32;  // the tower's types
    w.add_tensor(name, t.ne, type,
                 [vals](float* dst) { std::copy(vals->begin(), vals->end(), dst); });
  }
  ASSERT_TRUE(w.write(to).ok());
}

// Qwen3-VL's file: the fused attn_qkv splits back into the three matrices, the position table,
// the deepstack mergers (found by their tensors), the defaults of its processor; an F16 file's
// matrices are held in f16; and the deepstack slices are each layer's own.
TEST(QwenVision, Qwen3GgufRoundTripAndDeepstackSlices) {
  const std::string dir = unique_temp("");
  const QwenVisionModel m = QwenVisionModel::random(tiny("qwen3vl"), 9);
  const std::string path = dir + "kamera-qwen3-vision.gguf";
  ASSERT_TRUE(m.write_gguf(path, DType::F32).ok());
  auto back = QwenVisionModel::load(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->fingerprint, m.fingerprint);
  EXPECT_EQ(back->cfg.deepstack_layers, (std::vector<int>{0, 1}));
  EXPECT_EQ(back->cfg.n_pos_embd, 16);
  EXPECT_EQ(back->cfg.patch, 16);
  EXPECT_EQ(back->cfg.min_pixels, kQwen3VlMinPixels);
  EXPECT_EQ(back->cfg.image_mean, kHalf);
  EXPECT_EQ(back->cfg.act, QwenVisionAct::GeluTanh);
  EXPECT_TRUE(back->w.layers[2].k.w.same_as(m.w.layers[2].k.w));
  EXPECT_EQ(back->w.layers[2].v.b, m.w.layers[2].v.b);
  EXPECT_EQ(back->cfg.embed_width(), 3 * 64);
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    EXPECT_NE((*f)->find_tensor("v.blk.0.attn_qkv.weight"), nullptr);
    EXPECT_EQ((*f)->find_tensor("v.blk.0.attn_q.weight"), nullptr);
    EXPECT_NE((*f)->find_tensor("v.deepstack.1.fc2.bias"), nullptr);
    EXPECT_EQ((*f)->get_string("clip.projector_type").value_or(""), "qwen3vl_merger");
  }
  ASSERT_TRUE(m.write_gguf(path, DType::F16).ok());
  auto half = QwenVisionModel::load(path);
  ASSERT_TRUE(half.ok()) << half.message();
  EXPECT_EQ(half->w.layers[1].v.w.type(), GgmlType::F16);
  EXPECT_EQ(half->w.layers[1].v.w.to_f32()[5],
            f16_to_f32(f32_to_f16(m.w.layers[1].v.w.to_f32()[5])));
  std::filesystem::remove(path);
  // each slice is its own: a deepstack merger's weights change only its slice of every row
  ThreadPool pool(1);
  const QwenPatches p = patches_of({picture(64, 64, 3)}, &m.cfg);
  auto base = QwenVisionEncoder(m, &pool).encode(p);
  QwenVisionModel m2 = QwenVisionModel::random(tiny("qwen3vl"), 9);
  for (float& b : m2.w.deepstack[1].norm_b) b += 0.5f;
  m2.finish();
  auto other = QwenVisionEncoder(m2, &pool).encode(p);
  ASSERT_TRUE(base.ok() && other.ok());
  const int od = m.cfg.out_dim, ew = m.cfg.embed_width();
  double same = 0, changed = 0;
  for (int64_t r = 0; r < base->n_rows(); ++r)
    for (int j = 0; j < ew; ++j) {
      const double dlt = std::abs(base->rows[size_t(r * ew + j)] - other->rows[size_t(r * ew + j)]);
      (j >= 2 * od ? changed : same) = std::max(j >= 2 * od ? changed : same, dlt);
    }
  EXPECT_EQ(same, 0.0);
  EXPECT_GT(changed, 1e-3);
}

TEST(QwenVision, GgufRoundTripAndBothFfnNamings) {
  const std::string dir = unique_temp("");
  for (const char* arch : {"qwen2vl", "qwen25vl"}) {
    SCOPED_TRACE(arch);
    const QwenVisionModel m = QwenVisionModel::random(tiny(arch), 9);
    const std::string path = dir + "kamera-qwen-vision-" + arch + ".gguf";
    ASSERT_TRUE(m.write_gguf(path, DType::F32).ok());
    auto back = QwenVisionModel::load(path);
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(back->fingerprint, m.fingerprint);
    EXPECT_EQ(back->cfg.full_attention_layers, m.cfg.full_attention_layers);
    EXPECT_EQ(back->cfg.ffn_dim, m.cfg.ffn_dim);
    EXPECT_TRUE(back->w.layers[1].up.w.same_as(m.w.layers[1].up.w));
    // The other naming of the FFN's two sides (later llama.cpp converters for Qwen2-VL; the
    // legacy one for Qwen2.5-VL) is recognised by shape.
    const std::string swapped = dir + "kamera-qwen-vision-swapped.gguf";
    const std::map<std::string, int64_t> ffn = {{"clip.vision.feed_forward_length", m.cfg.ffn_dim}};
    rewrite(path, swapped, {{"ffn_down", "ffn_TMP"}, {"ffn_up", "ffn_down"}}, ffn);
    rewrite(swapped, swapped + "2", {{"ffn_TMP", "ffn_up"}}, ffn);
    auto other = QwenVisionModel::load(swapped + "2");
    ASSERT_TRUE(other.ok()) << other.message();
    EXPECT_EQ(other->fingerprint, m.fingerprint);
    // F16 files load with the weights rounded to f16.
    ASSERT_TRUE(m.write_gguf(path, DType::F16).ok());
    auto half = QwenVisionModel::load(path);
    ASSERT_TRUE(half.ok()) << half.message();
    EXPECT_EQ(half->w.layers[0].q.w.type(), GgmlType::F16);  // held in the file's type
    EXPECT_EQ(half->w.layers[0].q.w.to_f32()[3],
              f16_to_f32(f32_to_f16(m.w.layers[0].q.w.to_f32()[3])));
    EXPECT_EQ(half->w.layers[0].q.b, m.w.layers[0].q.b);  // biases stay f32
    EXPECT_NE(half->fingerprint, m.fingerprint);
    std::filesystem::remove(path);
    std::filesystem::remove(swapped);
    std::filesystem::remove(swapped + "2");
  }
}

TEST(QwenVision, BadFilesAreRefusedNamingTheProblem) {
  const std::string dir = unique_temp("");
  const QwenVisionModel m = QwenVisionModel::random(tiny("qwen2vl"), 9);
  const std::string path = dir + "kamera-qwen-vision-bad.gguf";
  ASSERT_TRUE(m.write_gguf(path, DType::F32).ok());
  // a missing tensor
  rewrite(path, path + ".a", {{"v.blk.1.attn_k.bias", "v.blk.1.attn_k.oops"}});
  auto a = QwenVisionModel::load(path + ".a");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.message().find("v.blk.1.attn_k.bias"), std::string::npos) << a.message();
  EXPECT_NE(a.message().find(path + ".a"), std::string::npos) << a.message();
  // not a Qwen tower
  GgufWriter w;
  w.set_string("general.architecture", "clip");
  w.set_string("clip.projector_type", "mlp");
  ASSERT_TRUE(w.write(path + ".b").ok());
  auto b = QwenVisionModel::load(path + ".b");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.code(), ErrorCode::Unsupported);
  EXPECT_NE(b.message().find("'mlp'"), std::string::npos) << b.message();
  // keys that do not fit the tensors
  rewrite(path, path + ".c", {}, {{"clip.vision.embedding_length", 48}});
  auto c = QwenVisionModel::load(path + ".c");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.code(), ErrorCode::CorruptData);
  EXPECT_NE(c.message().find("48"), std::string::npos) << c.message();
  rewrite(path, path + ".d", {}, {{"clip.vision.projection_dim", 100}});
  auto d = QwenVisionModel::load(path + ".d");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("mm.2"), std::string::npos) << d.message();
  for (const char* s : {"", ".a", ".b", ".c", ".d"}) std::filesystem::remove(path + s);
  // config checks
  QwenVisionConfig bad = tiny("qwen25vl");
  bad.window = 50;
  EXPECT_FALSE(bad.validate().ok());
  bad = tiny("qwen2vl");
  bad.n_heads = 3;
  EXPECT_FALSE(bad.validate().ok());
  // patches that do not fit the tower
  ThreadPool pool(1);
  QwenVisionEncoder enc(m, &pool);
  QwenPatches p = patches_of({picture(56, 56, 1)});
  p.values.pop_back();
  EXPECT_FALSE(enc.encode(p).ok());
}

}  // namespace
