// An independent, deliberately naive llama2.c-style transformer for golden tests: its own
// checkpoint parser (legacy v0 only), its own RoPE (llama2.c's float formula), scalar loops, a
// flat per-position KV cache. Shares no code with the engine.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace naive {

struct Llama {
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, seq_len = 0;
  bool shared = true;
  std::vector<float> emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
  std::vector<float> key_cache, value_cache;  // (layer, seq_len, kv_dim)

  bool load_v0(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    int32_t h[7];
    if (std::fread(h, 4, 7, f) != 7) return std::fclose(f), false;
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
    shared = h[5] > 0;
    vocab = std::abs(h[5]);
    seq_len = h[6];
    const int hs = dim / heads, kvd = kv_heads * hs;
    auto rd = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      return std::fread(v.data(), 4, n, f) == n;
    };
    std::vector<float> skip;
    bool ok = rd(emb, size_t(vocab) * dim) && rd(rms_att, size_t(layers) * dim) &&
              rd(wq, size_t(layers) * dim * dim) && rd(wk, size_t(layers) * dim * kvd) &&
              rd(wv, size_t(layers) * dim * kvd) && rd(wo, size_t(layers) * dim * dim) &&
              rd(rms_ffn, size_t(layers) * dim) && rd(w1, size_t(layers) * dim * hidden) &&
              rd(w2, size_t(layers) * dim * hidden) && rd(w3, size_t(layers) * dim * hidden) &&
              rd(rms_final, dim) && rd(skip, size_t(seq_len) * hs);  // freq_cis real + imag
    if (ok && !shared) ok = rd(wcls, size_t(vocab) * dim);
    std::fclose(f);
    key_cache.assign(size_t(layers) * seq_len * kvd, 0.f);
    value_cache.assign(size_t(layers) * seq_len * kvd, 0.f);
    return ok;
  }

  static void rmsnorm(float* o, const float* x, const float* w, int n) {
    float ss = 0;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= n;
    ss += 1e-5f;
    ss = 1.0f / std::sqrt(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
  }
  static void matmul(float* xout, const float* x, const float* w, int n, int d) {
    for (int i = 0; i < d; i++) {
      float val = 0;
      for (int j = 0; j < n; j++) val += w[size_t(i) * n + j] * x[j];
      xout[i] = val;
    }
  }

  // One token at position pos; returns the logits.
  std::vector<float> forward(int token, int pos) {
    const int hs = dim / heads, kvd = kv_heads * hs, kv_mul = heads / kv_heads;
    std::vector<float> x(emb.begin() + size_t(token) * dim, emb.begin() + size_t(token + 1) * dim);
    std::vector<float> xb(dim), xb2(dim), hb(hidden), hb2(hidden), q(dim), att(seq_len);
    for (int l = 0; l < layers; l++) {
      rmsnorm(xb.data(), x.data(), &rms_att[size_t(l) * dim], dim);
      float* k = &key_cache[(size_t(l) * seq_len + pos) * kvd];
      float* v = &value_cache[(size_t(l) * seq_len + pos) * kvd];
      matmul(q.data(), xb.data(), &wq[size_t(l) * dim * dim], dim, dim);
      matmul(k, xb.data(), &wk[size_t(l) * dim * kvd], dim, kvd);
      matmul(v, xb.data(), &wv[size_t(l) * dim * kvd], dim, kvd);
      for (int i = 0; i < dim; i += 2) {
        const int head_dim = i % hs;
        const float freq = 1.0f / std::pow(10000.0f, head_dim / float(hs));
        const float val = pos * freq, fcr = std::cos(val), fci = std::sin(val);
        for (int which = 0; which < (i < kvd ? 2 : 1); which++) {
          float* vec = which == 0 ? q.data() : k;
          const float v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      for (int h = 0; h < heads; h++) {
        const float* qh = &q[size_t(h) * hs];
        for (int t = 0; t <= pos; t++) {
          const float* kt = &key_cache[(size_t(l) * seq_len + t) * kvd + (h / kv_mul) * hs];
          float score = 0;
          for (int i = 0; i < hs; i++) score += qh[i] * kt[i];
          att[t] = score / std::sqrt(float(hs));
        }
        float mx = att[0];
        for (int t = 1; t <= pos; t++) mx = std::max(mx, att[t]);
        float sum = 0;
        for (int t = 0; t <= pos; t++) sum += att[t] = std::exp(att[t] - mx);
        for (int t = 0; t <= pos; t++) att[t] /= sum;
        float* o = &xb[size_t(h) * hs];
        std::fill(o, o + hs, 0.f);
        for (int t = 0; t <= pos; t++) {
          const float* vt = &value_cache[(size_t(l) * seq_len + t) * kvd + (h / kv_mul) * hs];
          for (int i = 0; i < hs; i++) o[i] += att[t] * vt[i];
        }
      }
      matmul(xb2.data(), xb.data(), &wo[size_t(l) * dim * dim], dim, dim);
      for (int i = 0; i < dim; i++) x[i] += xb2[i];
      rmsnorm(xb.data(), x.data(), &rms_ffn[size_t(l) * dim], dim);
      matmul(hb.data(), xb.data(), &w1[size_t(l) * dim * hidden], dim, hidden);
      matmul(hb2.data(), xb.data(), &w3[size_t(l) * dim * hidden], dim, hidden);
      for (int i = 0; i < hidden; i++) {
        float val = hb[i];
        val *= 1.0f / (1.0f + std::exp(-val));
        hb[i] = val * hb2[i];
      }
      matmul(xb.data(), hb.data(), &w2[size_t(l) * dim * hidden], hidden, dim);
      for (int i = 0; i < dim; i++) x[i] += xb[i];
    }
    rmsnorm(x.data(), x.data(), rms_final.data(), dim);
    std::vector<float> logits(vocab);
    matmul(logits.data(), x.data(), shared ? emb.data() : wcls.data(), dim, vocab);
    return logits;
  }
};

}  // namespace naive
