#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "ops/gemm.h"
#include "ops/kernels.h"

namespace kamera {

namespace {

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// y (m x dim) = W_down (silu(W_gate x) * W_up x) for m rows x (m x dim); hidden width ffn.
// gate and up are scratch of at least m x ffn.
void swiglu(const float* x, int m, int dim, int ffn, const float* w_gate, const float* w_up,
            const float* w_down, float* gate, float* up, float* y, ThreadPool& pool) {
  matmul_wt(x, w_gate, nullptr, gate, m, dim, ffn);
  matmul_wt(x, w_up, nullptr, up, m, dim, ffn);
  silu_mul(gate, up, int64_t(m) * ffn, &pool);
  matmul_wt(gate, w_down, nullptr, y, m, ffn, dim);
}

}  // namespace

Status validate_moe(const MoeConfig& c, int n_layers, const std::string& src) {
  if (!c.enabled()) return Status::Ok();
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: invalid mixture-of-experts config: {}", src,
                      what);
  };
  constexpr int kMax = 1 << 20;
  if (c.n_experts > 1 << 16) return bad(fmt::format("{} experts", c.n_experts));
  if (c.n_used <= 0 || c.n_used > c.n_experts)
    return bad(fmt::format("{} experts used per token of {}", c.n_used, c.n_experts));
  if (c.expert_ffn <= 0 || c.expert_ffn > kMax)
    return bad(fmt::format("expert FFN width {}", c.expert_ffn));
  if (c.n_shared < 0 || c.n_shared > 1 << 10)
    return bad(fmt::format("{} shared experts", c.n_shared));
  if (c.n_dense_lead < 0 || c.n_dense_lead >= n_layers)
    return bad(fmt::format("{} leading dense layers of {} (at least one MoE layer)", c.n_dense_lead,
                           n_layers));
  if (!(c.weights_scale > 0) || !std::isfinite(c.weights_scale))
    return bad(fmt::format("expert weights scale {}", c.weights_scale));
  return Status::Ok();
}

void moe_route(const MoeConfig& c, const float* probs, int32_t* ids, float* weights) {
  // top n_used by probability, descending; ties keep the lower expert id first
  std::vector<int32_t> order(size_t(c.n_experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(
      order.begin(), order.begin() + c.n_used, order.end(),
      [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  float sum = 0.0f;
  for (int s = 0; s < c.n_used; ++s) {
    ids[s] = order[size_t(s)];
    weights[s] = probs[ids[s]];
    sum += weights[s];
  }
  for (int s = 0; s < c.n_used; ++s) {
    if (c.norm_weights) weights[s] /= sum;
    weights[s] *= c.weights_scale;
  }
}

void moe_ffn(const MoeConfig& c, const MoeWeights& w, int dim, const float* x, int n, float* out,
             MoeWorkspace& ws, ThreadPool& pool) {
  const int E = c.n_experts, k = c.n_used, F = c.expert_ffn;
  // router: probs (n x E) = softmax(x W_router^T); then each row's experts and weights
  grow(ws.probs, size_t(n) * E);
  ws.chosen.resize(size_t(n) * k);
  grow(ws.weights, size_t(n) * k);
  matmul_wt(x, w.router.data(), nullptr, ws.probs.data(), n, dim, E);
  for (int t = 0; t < n; ++t) {
    float* p = ws.probs.data() + size_t(t) * E;
    softmax(p, E);
    moe_route(c, p, ws.chosen.data() + size_t(t) * k, ws.weights.data() + size_t(t) * k);
  }
  // per expert: gather its rows, SwiGLU, write w * y into the (row, slot) outputs
  grow(ws.slots, size_t(n) * k * dim);
  for (int e = 0; e < E; ++e) {
    ws.rows.clear();
    for (int i = 0; i < n * k; ++i)
      if (ws.chosen[size_t(i)] == e) ws.rows.push_back(i);
    const int m = int(ws.rows.size());
    if (m == 0) continue;
    grow(ws.xe, size_t(m) * dim);
    grow(ws.gate, size_t(m) * F);
    grow(ws.up, size_t(m) * F);
    for (int r = 0; r < m; ++r)
      std::memcpy(ws.xe.data() + size_t(r) * dim, x + size_t(ws.rows[r] / k) * dim,
                  sizeof(float) * dim);
    const size_t wsz = size_t(F) * dim;
    float* y = ws.xe.data();  // the gathered rows are dead once gate/up are computed
    swiglu(ws.xe.data(), m, dim, F, w.gate_exps.data() + e * wsz, w.up_exps.data() + e * wsz,
           w.down_exps.data() + e * wsz, ws.gate.data(), ws.up.data(), y, pool);
    for (int r = 0; r < m; ++r) {
      const int i = ws.rows[r];
      const float wt = ws.weights[size_t(i)];
      float* dst = ws.slots.data() + size_t(i) * dim;
      const float* src = y + size_t(r) * dim;
      for (int j = 0; j < dim; ++j) dst[j] = src[j] * wt;
    }
  }
  // rows sum their slots in slot order (descending probability), then the shared experts
  for (int t = 0; t < n; ++t) {
    float* o = out + size_t(t) * dim;
    std::memcpy(o, ws.slots.data() + size_t(t) * k * dim, sizeof(float) * dim);
    for (int s = 1; s < k; ++s) add_inplace(o, ws.slots.data() + (size_t(t) * k + s) * dim, dim);
  }
  if (c.n_shared == 0) return;
  const int S = c.shared_ffn();
  grow(ws.gate, size_t(n) * S);
  grow(ws.up, size_t(n) * S);
  grow(ws.xe, size_t(n) * dim);
  swiglu(x, n, dim, S, w.gate_shexp.data(), w.up_shexp.data(), w.down_shexp.data(), ws.gate.data(),
         ws.up.data(), ws.xe.data(), pool);
  add_inplace(out, ws.xe.data(), int64_t(n) * dim);
}

}  // namespace kamera
