#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/attention_mla.h"
#include "ops/gemm.h"
#include "ops/kernels.h"

namespace kamera {

namespace {
constexpr int kMaxRopeTable = 1 << 16;

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}
}  // namespace

Engine::Engine(const Model& model, int n_threads)
    : model_(model),
      pool_(n_threads),
      rope_(model.cfg.rope, std::min(std::max(model.cfg.ctx_len, 4096), kMaxRopeTable)) {
  set_blas_threads(std::max(1, n_threads));
}

Result<std::vector<float>> Engine::forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                           const ForwardOptions& opt) {
  const ModelConfig& c = model_.cfg;
  if (!kv.has_sequence(seq)) return make_error("forward: unknown sequence {}", seq);
  if (in.n <= 0) return make_error("forward: no input tokens");
  if (int(in.positions.size()) != in.n)
    return make_error("forward: {} positions for {} tokens", in.positions.size(), in.n);
  if (in.embeddings == nullptr) {
    if (int(in.tokens.size()) != in.n)
      return make_error("forward: {} token ids for n = {}", in.tokens.size(), in.n);
    for (int i = 0; i < in.n; ++i)
      if (in.tokens[i] < 0 || in.tokens[i] >= c.n_vocab)
        return make_error("forward: token id {} at index {} is outside the vocabulary [0, {})",
                          in.tokens[i], i, c.n_vocab);
  } else if (!in.tokens.empty()) {
    return make_error("forward: give token ids or embedding rows, not both");
  }
  if (opt.mask)
    for (const auto& b : opt.mask->blocks)
      if (b.q_begin < 0 || b.q_end > in.n || b.q_begin > b.q_end || b.k_begin < 0 ||
          b.k_begin > b.k_end)
        return make_error("forward: attention mask block [{}, {}) x [{}, {}) is out of range",
                          b.q_begin, b.q_end, b.k_begin, b.k_end);
  KvLayout want = model_.kv_layout();
  const KvLayout& have = kv.layout();
  bool same = have.n_layers == want.n_layers && have.channels.size() == want.channels.size();
  for (size_t i = 0; same && i < want.channels.size(); ++i)
    same = have.channels[i].width == want.channels[i].width &&
           have.channels[i].rotated == want.channels[i].rotated;
  if (!same) return make_error("forward: the KV pool's layout does not match the model");

  auto first = kv.append(seq, in.positions);
  if (!first.ok()) return first.error();

  std::vector<float> logits;
  const int step = std::max(1, opt.max_batch);
  for (int off = 0; off < in.n; off += step) {
    const int n = std::min(step, in.n - off);
    AttentionMask sub;
    const AttentionMask* mask = nullptr;
    if (opt.mask && !opt.mask->blocks.empty()) {
      for (auto b : opt.mask->blocks) {
        b.q_begin = std::max(0, b.q_begin - off);
        b.q_end = std::min(n, b.q_end - off);
        if (b.q_begin < b.q_end) sub.blocks.push_back(b);
      }
      mask = &sub;
    }
    LogitsMode lm = opt.logits;
    if (lm == LogitsMode::Last && off + n < in.n) lm = LogitsMode::None;
    KAMERA_TRY(run_batch(kv, seq, in, off, n, *first + off, mask, lm, logits));
  }
  return logits;
}

Status Engine::run_batch(KvPool& kv, SeqId seq, const ForwardInput& in, int off, int n, int first,
                         const AttentionMask* mask, LogitsMode logits_mode,
                         std::vector<float>& logits) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), hid = c.ffn_dim;
  grow(x_, size_t(n) * d);
  grow(xb_, size_t(n) * std::max(d, qw));
  grow(q_, size_t(n) * qw);
  grow(k_, size_t(n) * kvw);
  grow(v_, size_t(n) * kvw);
  grow(att_, size_t(n) * std::max(qw, c.attn_out_width()));
  if (c.attention == AttentionKind::Mla) {
    grow(k_, size_t(n) * (c.mla.kv_lora_rank + c.mla.qk_rope_dim));         // kv_a output
    grow(v_, size_t(n) * std::max(c.mla.kv_lora_rank, c.mla.q_lora_rank));  // latent / q_a
  }
  grow(gate_, size_t(n) * hid);
  grow(up_, size_t(n) * hid);
  grow(tmp_, size_t(n) * d);
  float* x = x_.data();

  // x: n x dim input rows.
  if (in.embeddings) {
    std::memcpy(x, in.embeddings + size_t(off) * d, sizeof(float) * size_t(n) * d);
  } else {
    for (int t = 0; t < n; ++t)
      std::memcpy(x + size_t(t) * d, model_.tok_embd.data() + size_t(in.tokens[off + t]) * d,
                  sizeof(float) * d);
  }

  const int kch = 0, vch = 1;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
  const auto slots = kv.slots(seq);
  const auto positions = kv.positions(seq);
  const int half = c.rope.n_pairs();
  std::vector<float> cs(size_t(n) * half), sn(size_t(n) * half);  // query angles, n x n_pairs
  for (int t = 0; t < n; ++t)
    rope_.angles(positions[first + t], &cs[size_t(t) * half], &sn[size_t(t) * half]);

  for (int li = 0; li < c.n_layers; ++li) {
    const LayerWeights& L = model_.layers[li];
    rmsnorm(x, L.attn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
    if (c.attention == AttentionKind::Mla) {
      mla_attention_block(kv, li, n, first, slots, positions, cs.data(), sn.data(), mask);
    } else {
      matmul_wt(xb_.data(), L.wq.data(), L.bq.empty() ? nullptr : L.bq.data(), q_.data(), n, d, qw);
      matmul_wt(xb_.data(), L.wk.data(), L.bk.empty() ? nullptr : L.bk.data(), k_.data(), n, d,
                kvw);
      matmul_wt(xb_.data(), L.wv.data(), L.bv.empty() ? nullptr : L.bv.data(), v_.data(), n, d,
                kvw);
      // KV rows into the pool; keys pre-rotation (position-free).
      float* k_arena = kv.arena(li, kch);
      float* v_arena = kv.arena(li, vch);
      for (int t = 0; t < n; ++t) {
        const size_t slot = size_t(slots[first + t]);
        std::memcpy(k_arena + slot * kvw, k_.data() + size_t(t) * kvw, sizeof(float) * kvw);
        std::memcpy(v_arena + slot * kvw, v_.data() + size_t(t) * kvw, sizeof(float) * kvw);
      }
      pool_.parallel_for(n, [&](int64_t a, int64_t b) {
        for (int64_t t = a; t < b; ++t)
          rope_apply(c.rope, &cs[size_t(t) * half], &sn[size_t(t) * half],
                     q_.data() + size_t(t) * qw, c.n_heads);
      });
      attention_paged(shape, q_.data(), n, first, k_arena, v_arena, slots, positions, rope_, mask,
                      att_.data(), pool_, attn_ws_);
    }
    matmul_wt(att_.data(), L.wo.data(), nullptr, tmp_.data(), n, c.attn_out_width(), d);
    add_inplace(x, tmp_.data(), int64_t(n) * d);

    rmsnorm(x, L.ffn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
    matmul_wt(xb_.data(), L.w_gate.data(), nullptr, gate_.data(), n, d, hid);
    matmul_wt(xb_.data(), L.w_up.data(), nullptr, up_.data(), n, d, hid);
    silu_mul(gate_.data(), up_.data(), int64_t(n) * hid, &pool_);
    matmul_wt(gate_.data(), L.w_down.data(), nullptr, tmp_.data(), n, hid, d);
    add_inplace(x, tmp_.data(), int64_t(n) * d);
  }

  if (logits_mode == LogitsMode::None) return Status::Ok();
  const int rows = logits_mode == LogitsMode::All ? n : 1;
  const float* src = x + size_t(n - rows) * d;
  rmsnorm(src, model_.out_norm.data(), xb_.data(), rows, d, c.rms_eps, &pool_);
  const size_t at = logits.size();
  logits.resize(at + size_t(rows) * c.n_vocab);
  matmul_wt(xb_.data(), model_.output_weight(), nullptr, logits.data() + at, rows, d, c.n_vocab);
  return Status::Ok();
}

}  // namespace kamera

namespace kamera {

// MLA: project, cache the normalized latent (content) and the pre-rotation k_pe (rope), rotate the
// queries' rope part, attend in the latent space. Leaves the head outputs in att_.
void Engine::mla_attention_block(KvPool& kv, int li, int n, int first,
                                 std::span<const int32_t> slots, std::span<const Pos> positions,
                                 const float* cs, const float* sn, const AttentionMask* mask) {
  const ModelConfig& c = model_.cfg;
  const LayerWeights& L = model_.layers[li];
  const MlaConfig& m = c.mla;
  const int d = c.dim, qw = c.q_width(), half = c.rope.n_pairs();
  const int lat = m.kv_lora_rank, R = m.qk_rope_dim, dq = m.qk_nope_dim + m.qk_rope_dim;
  if (m.q_lora_rank > 0) {
    matmul_wt(xb_.data(), L.wq_a.data(), nullptr, v_.data(), n, d, m.q_lora_rank);
    rmsnorm(v_.data(), L.q_a_norm.data(), v_.data(), n, m.q_lora_rank, c.rms_eps, &pool_);
    matmul_wt(v_.data(), L.wq_b.data(), nullptr, q_.data(), n, m.q_lora_rank, qw);
  } else {
    matmul_wt(xb_.data(), L.wq.data(), nullptr, q_.data(), n, d, qw);
  }
  matmul_wt(xb_.data(), L.wkv_a.data(), nullptr, k_.data(), n, d, lat + R);
  float* c_arena = kv.arena(li, 0);
  float* kpe_arena = kv.arena(li, 1);
  for (int t = 0; t < n; ++t) {
    const float* row = k_.data() + size_t(t) * (lat + R);
    float* latent = v_.data() + size_t(t) * lat;
    std::memcpy(latent, row, sizeof(float) * lat);
    const size_t slot = size_t(slots[first + t]);
    std::memcpy(kpe_arena + slot * R, row + lat, sizeof(float) * R);  // pre-rotation
  }
  rmsnorm(v_.data(), L.kv_a_norm.data(), v_.data(), n, lat, c.rms_eps, &pool_);
  for (int t = 0; t < n; ++t)
    std::memcpy(c_arena + size_t(slots[first + t]) * lat, v_.data() + size_t(t) * lat,
                sizeof(float) * lat);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < c.n_heads; ++h)
      rope_apply(c.rope, cs + size_t(t) * half, sn + size_t(t) * half,
                 q_.data() + size_t(t) * qw + size_t(h) * dq + m.qk_nope_dim, 1);
  const MlaShape shape{c.n_heads, lat, m.qk_nope_dim, R, m.v_head_dim};
  attention_mla(shape, q_.data(), n, first, L.wkv_b.data(), c_arena, kpe_arena, slots, positions,
                rope_, mask, 1.0f / std::sqrt(float(dq)), att_.data(), pool_, mla_ws_);
}

}  // namespace kamera
