// The parts of the forward that depend on a layer's kind or on gemma3 (model/layer_kinds.h).
#include <algorithm>
#include <cmath>

#include "model/forward.h"
#include "model/layer_kinds.h"
#include "ops/ggml_gelu.h"
#include "ops/kernels.h"

namespace kamera {

// gemma3 scales a token's embedding row by sqrt(dim) (in f32, as llama.cpp's ggml_scale does);
// embedding rows given to the forward (ForwardInput::embeddings) enter as they are.
void Engine::token_row(int32_t id, float* dst) const {
  const ModelConfig& c = model_.cfg;
  model_.tok_embd.rows_f32(id, 1, dst);
  if (!is_gemma3(c.arch)) return;
  const float s = std::sqrt(float(c.dim));
  for (int i = 0; i < c.dim; ++i) dst[i] *= s;
}

// The angles row_angles computed for this layer's rope: the global ones, the local ones, or none.
void Engine::layer_angles(int li, const float** cs, const float** sn) const {
  switch (model_.cfg.layer_kinds.at(li)) {
    case LayerKind::Global:
      *cs = cs_.data(), *sn = sn_.data();
      return;
    case LayerKind::Local:
      *cs = cs_local_.data(), *sn = sn_local_.data();
      return;
    case LayerKind::NoRope:
      *cs = *sn = nullptr;
      return;
  }
}

// A bounded pool (KvPool, "Window layers") holds a Local layer's rows only while a query can read
// them. Before a batch runs: each group's sequence gives back the window rows of earlier tokens
// that no query at or after the group's lowest position reaches (position < p0 - W + 1; the
// engine assumes later tokens do not take lower positions), gives its new tokens rows (allocate:
// a forward's tokens, which begin_forward appended without them), and must hold a row for every
// token a query of the group may read; a sequence that lost one (truncated or relocated below
// where its rows were dropped) is refused before anything runs.
Status Engine::window_rows(KvPool& kv, std::span<const RowGroup> groups, bool allocate) {
  if (!kv.bounded_window()) return Status::Ok();
  const int W = model_.cfg.layer_kinds.window;
  for (const RowGroup& g : groups) {
    if (g.n <= 0) continue;
    const auto pos = kv.positions(g.seq);
    const int lo = g.token(0), hi = g.token(g.n - 1);
    int32_t p0 = pos[size_t(lo)].t;
    for (int t = 1; t < g.n; ++t) p0 = std::min(p0, pos[size_t(g.token(t))].t);
    const int32_t from = p0 - W + 1;  // the lowest position a query of the group reads
    if (allocate) {
      kv.drop_window_rows(g.seq, from, lo);
      KAMERA_TRY(kv.add_window_rows(g.seq, lo, hi + 1));
    }
    const int miss = kv.missing_window_row(g.seq, from, hi + 1);
    if (miss >= 0)
      return make_error(ErrorCode::InvalidArgument,
                        "forward: token {} of sequence {} (position {}) is within the sliding "
                        "window ({}) of a query but its rows were dropped when the window passed "
                        "it (a pool bounded by the window; --swa-full keeps every row)",
                        miss, g.seq, pos[size_t(miss)].t, W);
  }
  return Status::Ok();
}

void Engine::layer_attention_extras(int li, AttentionExtras& ex) const {
  const ModelConfig& c = model_.cfg;
  const LayerKind k = c.layer_kinds.at(li);
  ex.rotate_keys = k != LayerKind::NoRope;
  ex.window = k == LayerKind::Local ? c.layer_kinds.window : 0;
  ex.scale = c.attn_scale;
}

// gemma3's post-attention / post-FFN norm of n rows (dim) in place; nothing without weights.
void Engine::post_norm(const std::vector<float>& w, float* y, int n) {
  if (w.empty()) return;
  const ModelConfig& c = model_.cfg;
  rmsnorm(y, w.data(), y, n, c.dim, c.rms_eps, &pool_);
}

// gate_ = act(gate_) * up_ over n rows: SwiGLU, or gemma3's GELU (tanh) gate (through ggml's f16
// table under Numerics::Ggml).
void Engine::ffn_activation(int n) {
  const int64_t m = int64_t(n) * model_.cfg.ffn_dim;
  if (is_gemma3(model_.cfg.arch) && model_.numerics == Numerics::Ggml) {
    gelu_tanh_mul_ggml(gate_.data(), up_.data(), m, &pool_);  // ggml's f16 table
  } else if (is_gemma3(model_.cfg.arch)) {
    gelu_tanh_mul(gate_.data(), up_.data(), m, &pool_);
  } else {
    silu_mul(gate_.data(), up_.data(), m, &pool_);
  }
}

void Engine::soft_cap(float* logits, int64_t n) const {
  const float cap = model_.cfg.final_softcap;
  if (!(cap > 0)) return;
  for (int64_t i = 0; i < n; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

}  // namespace kamera
