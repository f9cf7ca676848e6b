// A naive full-recompute forward over a loaded kamera::Model (scalar loops, double
// accumulation, no KV cache: every call recomputes the whole prefix). Independent of the
// engine's kernels, pool and attention. Covers bias, NeoX/normal rope, partial rotary, GQA/MHA,
// qwen3's per-head q/k norms, M-RoPE (blocked and interleaved sections, 3-D positions) and MLA in
// its expanded form (per-head keys and values rebuilt from the latent: the engine uses the absorbed
// form), with DeepSeek-V2's MoE FFN and YaRN (naive_moe.h), and qwen3vl's deepstack (embedding
// rows of 1 + n_deepstack slices, slice l + 1 added after layer l).
#pragma once

#include <cmath>
#include <vector>

#include "model/model.h"
#include "support/naive_moe.h"

namespace naive {

// Which position component a rotary pair reads, written from the definitions (not the engine's).
inline int mrope_component(const kamera::RopeDesc& r, int pair) {
  if (r.mrope == kamera::MropeMode::Blocked) {
    const int s0 = r.sections[0], s1 = r.sections[1], s2 = r.sections[2];
    const int sector = pair % (s0 + s1 + s2 + r.sections[3]);
    return sector < s0 ? 0 : sector < s0 + s1 ? 1 : sector < s0 + s1 + s2 ? 2 : 0;
  }
  if (r.mrope == kamera::MropeMode::Interleaved) {
    if (pair % 3 == 1 && pair < 3 * r.sections[1]) return 1;
    if (pair % 3 == 2 && pair < 3 * r.sections[2]) return 2;
  }
  return 0;
}

// Logits (n_vocab) after the last token. embeddings (optional): n x input_width input rows
// instead of token embeddings. hidden[q][k]: query q may not attend to key k.
inline std::vector<float> forward_3d(const kamera::Model& m, const std::vector<int>& tokens,
                                     const std::vector<kamera::Pos>& positions,
                                     std::vector<std::vector<float>>* all_logits = nullptr,
                                     const std::vector<std::vector<bool>>* hidden = nullptr,
                                     const std::vector<float>* embeddings = nullptr) {
  const auto& c = m.cfg;
  const bool mla = c.attention == kamera::AttentionKind::Mla;
  const int iw = c.dim * (1 + c.n_deepstack);
  const int n = embeddings ? int(embeddings->size() / iw) : int(tokens.size());
  const int d = c.dim;
  auto rms = [&](const std::vector<double>& x, const std::vector<float>& w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / double(x.size()) + c.rms_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  };
  auto mat = [&](const std::vector<double>& x, const kamera::Weight& weight, int in, int out,
                 const std::vector<float>& b) {
    const std::vector<float> w = weight.to_f32();  // the file's values, dequantized
    std::vector<double> y(out);
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int i = 0; i < in; ++i) s += x[i] * w[size_t(o) * in + i];
      y[o] = s;
    }
    return y;
  };
  // Rotates `heads` heads of `stride` values starting at offset `off` within each head.
  auto rope = [&](std::vector<double>& v, int heads, int stride, int off, kamera::Pos pos) {
    const int nr = c.rope.n_rot, half = nr / 2;
    const int comp[3] = {pos.t, pos.h, pos.w};
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double p = comp[mrope_component(c.rope, i)];
        const double a = p * rope_freq(c.rope, i);
        const bool normal = c.rope.layout == kamera::RopeLayout::Normal;
        const int i0 = h * stride + off + (normal ? 2 * i : i);
        const int i1 = h * stride + off + (normal ? 2 * i + 1 : i + half);
        const double x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * std::cos(a) - x1 * std::sin(a);
        v[i1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
  };
  auto head_norm = [&](std::vector<double>& v, int heads, const std::vector<float>& w) {
    const int hd = int(w.size());
    for (int h = 0; h < heads; ++h) {
      std::vector<double> part(v.begin() + h * hd, v.begin() + (h + 1) * hd);
      part = rms(part, w);
      std::copy(part.begin(), part.end(), v.begin() + h * hd);
    }
  };
  std::vector<std::vector<double>> x(n, std::vector<double>(d));
  const std::vector<float> embd = embeddings ? std::vector<float>() : m.tok_embd.to_f32();
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i)
      x[t][i] = embeddings ? (*embeddings)[size_t(t) * iw + i] : embd[size_t(tokens[t]) * d + i];
  const int group = c.n_heads / c.n_kv_heads;
  const int dq = c.head_dim;                           // query/key head width
  const int dv = mla ? c.mla.v_head_dim : c.head_dim;  // value head width
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& L = m.layers[l];
    // per token: q (n_heads x dq), per-head k (n_heads or n_kv x dq) and v (x dv)
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      auto xb = rms(x[t], L.attn_norm);
      if (!mla) {
        q[t] = mat(xb, L.wq, d, c.q_width(), L.bq);
        k[t] = mat(xb, L.wk, d, c.kv_width(), L.bk);
        v[t] = mat(xb, L.wv, d, c.kv_width(), L.bv);
        if (c.qk_norm) {  // qwen3: each head of q and k RMS-normed before the rotation
          head_norm(q[t], c.n_heads, L.q_norm);
          head_norm(k[t], c.n_kv_heads, L.k_norm);
        }
        rope(q[t], c.n_heads, dq, 0, positions[t]);
        rope(k[t], c.n_kv_heads, dq, 0, positions[t]);
        continue;
      }
      const auto& a = c.mla;
      if (a.q_lora_rank > 0) {
        auto qa = rms(mat(xb, L.wq_a, d, a.q_lora_rank, {}), L.q_a_norm);
        q[t] = mat(qa, L.wq_b, a.q_lora_rank, c.q_width(), {});
      } else {
        q[t] = mat(xb, L.wq, d, c.q_width(), {});
      }
      auto kva = mat(xb, L.wkv_a, d, a.kv_lora_rank + a.qk_rope_dim, {});
      std::vector<double> lat(kva.begin(), kva.begin() + a.kv_lora_rank);
      lat = rms(lat, L.kv_a_norm);
      std::vector<double> kpe(kva.begin() + a.kv_lora_rank, kva.end());
      rope(kpe, 1, a.qk_rope_dim, 0, positions[t]);
      rope(q[t], c.n_heads, dq, a.qk_nope_dim, positions[t]);
      auto kvb = mat(lat, L.wkv_b, a.kv_lora_rank, c.n_heads * (a.qk_nope_dim + a.v_head_dim), {});
      k[t].assign(size_t(c.n_heads) * dq, 0.0);
      v[t].assign(size_t(c.n_heads) * dv, 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const size_t base = size_t(h) * (a.qk_nope_dim + a.v_head_dim);
        for (int i = 0; i < a.qk_nope_dim; ++i) k[t][size_t(h) * dq + i] = kvb[base + i];
        for (int i = 0; i < a.qk_rope_dim; ++i) k[t][size_t(h) * dq + a.qk_nope_dim + i] = kpe[i];
        for (int i = 0; i < a.v_head_dim; ++i)
          v[t][size_t(h) * dv + i] = kvb[base + a.qk_nope_dim + i];
      }
    }
    for (int t = 0; t < n; ++t) {
      std::vector<double> att(size_t(c.n_heads) * dv, 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int g = mla ? h : h / group;
        std::vector<double> s(t + 1, -INFINITY);
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          if (hidden && (*hidden)[t][j]) continue;
          double dd = 0;
          for (int i = 0; i < dq; ++i) dd += q[t][size_t(h) * dq + i] * k[j][size_t(g) * dq + i];
          s[j] = dd * softmax_scale(c);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < dv; ++i)
            att[size_t(h) * dv + i] += s[j] / sum * v[j][size_t(g) * dv + i];
      }
      auto o = mat(att, L.wo, c.n_heads * dv, d, {});
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
      auto xb = rms(x[t], L.ffn_norm);
      if (L.moe.routed()) {
        auto y = moe(c, L.moe, xb);
        for (int i = 0; i < d; ++i) x[t][i] += y[i];
        continue;
      }
      auto gate = mat(xb, L.w_gate, d, c.ffn_dim, {});
      auto up = mat(xb, L.w_up, d, c.ffn_dim, {});
      for (int i = 0; i < c.ffn_dim; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      auto down = mat(gate, L.w_down, c.ffn_dim, d, {});
      for (int i = 0; i < d; ++i) x[t][i] += down[i];
    }
    if (embeddings && l < c.n_deepstack)  // deepstack: the row's slice l + 1
      for (int t = 0; t < n; ++t)
        for (int i = 0; i < d; ++i)
          x[t][i] += (*embeddings)[size_t(t) * iw + size_t(l + 1) * d + i];
  }
  std::vector<float> last;
  const std::vector<float> W = m.output_weight().to_f32();
  for (int t = 0; t < n; ++t) {
    if (!all_logits && t != n - 1) continue;
    auto xn = rms(x[t], m.out_norm);
    std::vector<float> logits(c.n_vocab);
    for (int o = 0; o < c.n_vocab; ++o) {
      double s = 0;
      for (int i = 0; i < d; ++i) s += xn[i] * W[size_t(o) * d + i];
      logits[o] = float(s);
    }
    if (all_logits) all_logits->push_back(logits);
    if (t == n - 1) last = logits;
  }
  return last;
}

// 1-D positions (t = h = w), the common case.
inline std::vector<float> forward_all(const kamera::Model& m, const std::vector<int>& tokens,
                                      const std::vector<int>& positions,
                                      std::vector<std::vector<float>>* all_logits = nullptr,
                                      const std::vector<std::vector<bool>>* hidden = nullptr) {
  std::vector<kamera::Pos> p;
  for (int x : positions) p.push_back(kamera::Pos::linear(x));
  return forward_3d(m, tokens, p, all_logits, hidden);
}

// Every position's logits of `tokens` at positions 0..n-1, row after row (prefill_all's layout).
template <class Ids>
inline std::vector<float> logits_from_zero(const kamera::Model& m, const Ids& ids) {
  std::vector<int> tokens(ids.begin(), ids.end()), positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = int(i);
  std::vector<std::vector<float>> rows;
  forward_all(m, tokens, positions, &rows);
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

}  // namespace naive
