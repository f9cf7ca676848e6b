#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "ops/gemm.h"
#include "ops/kernels.h"
#include "ops/quant.h"

namespace kamera {

namespace {

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// y (m x w.rows) = x (m x w.cols) W^T in the weight's type: F32 through OpenBLAS, every other
// type through the quantized kernels (the same paths as linear() for a whole Weight).
// (+ bias[w.rows] when given)
void product(const WeightView& w, const float* x, int m, float* y, ThreadPool& pool,
             const float* bias = nullptr) {
  if (w.type == GgmlType::F32) {
    matmul_wt(x, reinterpret_cast<const float*>(w.data), bias, y, m, int(w.cols), int(w.rows));
  } else {
    matmul(w, x, m, bias, y, pool);
  }
}

// One expert's (or the shared experts') matrices, and gpt-oss's biases (null: none).
struct Ffn {
  WeightView gate, up, down;
  const float *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
  bool oai = false;  // gpt-oss's clamped SwiGLU (MoeConfig::oai_experts)
};

// y (m x dim) = W_down (act(W_gate x) * W_up x) for m rows x (m x dim); hidden width ffn.
// gate and up are scratch of at least m x ffn.
void swiglu(const float* x, int m, const Ffn& f, float* gate, float* up, float* y,
            ThreadPool& pool) {
  const int64_t ffn = f.gate.rows;
  product(f.gate, x, m, gate, pool, f.gate_b);
  product(f.up, x, m, up, pool, f.up_b);
  if (f.oai) {
    swiglu_oai_mul(gate, up, m * ffn, kOaiSwigluAlpha, kOaiSwigluLimit);
  } else {
    silu_mul(gate, up, m * ffn, &pool);
  }
  product(f.down, gate, m, y, pool, f.down_b);
}

// Expert e's matrices and biases.
Ffn expert_ffn(const MoeConfig& c, const MoeWeights& w, int dim, int e) {
  const int E = c.n_experts;
  Ffn f{expert_view(w.gate_exps, E, e), expert_view(w.up_exps, E, e),
        expert_view(w.down_exps, E, e)};
  if (!c.oai_experts) return f;
  const size_t F = size_t(c.expert_ffn);
  f.gate_b = w.gate_b.data() + size_t(e) * F;
  f.up_b = w.up_b.data() + size_t(e) * F;
  f.down_b = w.down_b.data() + size_t(e) * size_t(dim);
  f.oai = true;
  return f;
}

}  // namespace

WeightView expert_view(const Weight& w, int n_experts, int e) {
  KAMERA_ASSERT(n_experts > 0 && e >= 0 && e < n_experts && w.rows() % n_experts == 0);
  WeightView v = w.view();
  v.rows = w.rows() / n_experts;
  v.data = w.view().row(int64_t(e) * v.rows);
  return v;
}

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
  if (c.n_groups < 1 || c.n_groups_used < 1)
    return bad(fmt::format("{} expert groups, {} used", c.n_groups, c.n_groups_used));
  if (c.grouped()) {
    const int per = c.n_experts / c.n_groups;
    // a group scores its two best experts; the groups kept must hold n_used experts
    if (c.n_experts % c.n_groups != 0 || per < 2 || c.n_groups_used > c.n_groups ||
        c.n_groups_used * per < c.n_used)
      return bad(fmt::format(
          "{} experts in {} groups, {} groups used, {} experts used (groups must be equal, of 2 "
          "or more experts, and the groups used must hold the experts used)",
          c.n_experts, c.n_groups, c.n_groups_used, c.n_used));
  }
  return Status::Ok();
}

namespace {

// Indices of the k largest of v[0, n) in descending order; ties keep the lower index first.
void top_k(const float* v, int n, int k, std::vector<int32_t>& order) {
  order.resize(size_t(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
}

// Group-limited routing: every expert outside the n_groups_used groups of largest score (the sum
// of a group's two largest s) gets s = -inf.
void mask_groups(const MoeConfig& c, float* s) {
  const int per = c.n_experts / c.n_groups;
  std::vector<float> score(size_t(c.n_groups));
  std::vector<int32_t> order;
  for (int g = 0; g < c.n_groups; ++g) {
    top_k(s + size_t(g) * per, per, 2, order);
    score[size_t(g)] = s[g * per + order[0]] + s[g * per + order[1]];
  }
  top_k(score.data(), c.n_groups, c.n_groups_used, order);
  std::vector<bool> keep(size_t(c.n_groups), false);
  for (int i = 0; i < c.n_groups_used; ++i) keep[size_t(order[size_t(i)])] = true;
  for (int e = 0; e < c.n_experts; ++e)
    if (!keep[size_t(e / per)]) s[e] = -INFINITY;
}

}  // namespace

void moe_route(const MoeConfig& c, const float* probs, int32_t* ids, float* weights,
               const float* bias, float* select) {
  std::vector<float> own;
  if (!select) {
    own.resize(size_t(c.n_experts));
    select = own.data();
  }
  // selection scores: the gated scores plus the bias (which never weighs an expert)
  for (int e = 0; e < c.n_experts; ++e) select[e] = probs[e] + (bias ? bias[e] : 0.0f);
  if (c.grouped()) mask_groups(c, select);
  std::vector<int32_t> order;
  top_k(select, c.n_experts, c.n_used, order);
  float sum = 0.0f;
  for (int s = 0; s < c.n_used; ++s) {
    ids[s] = order[size_t(s)];
    weights[s] = probs[ids[s]];
    sum += weights[s];
  }
  if (c.gating == MoeGating::SoftmaxWeight) softmax(weights, c.n_used);  // over the chosen
  const float denom = std::max(sum, 6.103515625e-5f);  // llama.cpp clamps the sum at 2^-14
  for (int s = 0; s < c.n_used; ++s) {
    if (c.norm_weights) weights[s] /= denom;
    weights[s] *= c.weights_scale;
  }
}

void moe_ffn(const MoeConfig& c, const MoeWeights& w, int dim, const float* x, int n, float* out,
             MoeWorkspace& ws, ThreadPool& pool) {
  const int E = c.n_experts, k = c.n_used, F = c.expert_ffn;
  // router: probs (n x E) = softmax | sigmoid (x W_router^T); then each row's experts and weights
  grow(ws.probs, size_t(n) * E);
  ws.chosen.resize(size_t(n) * k);
  grow(ws.weights, size_t(n) * k);
  linear(w.router, x, n, w.router_b.empty() ? nullptr : w.router_b.data(), ws.probs.data(), pool);
  grow(ws.select, size_t(E));
  const float* bias = w.exp_probs_b.empty() ? nullptr : w.exp_probs_b.data();
  for (int t = 0; t < n; ++t) {
    float* p = ws.probs.data() + size_t(t) * E;
    if (c.gating == MoeGating::Sigmoid) {
      for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    } else if (c.gating == MoeGating::Softmax) {
      softmax(p, E);
    }  // SoftmaxWeight: the raw logits choose; the chosen ones' softmax weighs (moe_route)
    moe_route(c, p, ws.chosen.data() + size_t(t) * k, ws.weights.data() + size_t(t) * k, bias,
              ws.select.data());
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
    // the gathered rows are dead once gate/up are computed; down's (m x dim) output reuses them
    float* y = ws.xe.data();
    swiglu(ws.xe.data(), m, expert_ffn(c, w, dim, e), ws.gate.data(), ws.up.data(), y, pool);
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
  swiglu(x, n, Ffn{w.gate_shexp.view(), w.up_shexp.view(), w.down_shexp.view()}, ws.gate.data(),
         ws.up.data(), ws.xe.data(), pool);
  add_inplace(out, ws.xe.data(), int64_t(n) * dim);
}

}  // namespace kamera
