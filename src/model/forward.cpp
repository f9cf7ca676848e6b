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

Status Engine::check_layout(const KvPool& kv) const {
  KvLayout want = model_.kv_layout();
  const KvLayout& have = kv.layout();
  bool same = have.n_layers == want.n_layers && have.channels.size() == want.channels.size();
  for (size_t i = 0; same && i < want.channels.size(); ++i)
    same = have.channels[i].width == want.channels[i].width &&
           have.channels[i].rotated == want.channels[i].rotated;
  if (!same)
    return make_error(ErrorCode::InvalidArgument,
                      "forward: the KV pool's layout does not match the model");
  return Status::Ok();
}

Result<std::vector<float>> Engine::forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                           const ForwardOptions& opt) {
  const ModelConfig& c = model_.cfg;
  if (!kv.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "forward: unknown sequence {}", seq);
  if (in.n <= 0) return make_error(ErrorCode::InvalidArgument, "forward: no input tokens");
  if (int(in.positions.size()) != in.n)
    return make_error(ErrorCode::InvalidArgument, "forward: {} positions for {} tokens",
                      in.positions.size(), in.n);
  if (in.embeddings == nullptr) {
    if (int(in.tokens.size()) != in.n)
      return make_error(ErrorCode::InvalidArgument, "forward: {} token ids for n = {}",
                        in.tokens.size(), in.n);
    for (int i = 0; i < in.n; ++i)
      if (in.tokens[i] < 0 || in.tokens[i] >= c.n_vocab)
        return make_error(ErrorCode::InvalidArgument,
                          "forward: token id {} at index {} is outside the vocabulary [0, {})",
                          in.tokens[i], i, c.n_vocab);
  } else if (!in.tokens.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "forward: give token ids or embedding rows, not both");
  }
  if (opt.mask)
    for (const auto& b : opt.mask->blocks)
      if (b.q_begin < 0 || b.q_end > in.n || b.q_begin > b.q_end || b.k_begin < 0 ||
          b.k_begin > b.k_end)
        return make_error(ErrorCode::InvalidArgument,
                          "forward: attention mask block [{}, {}) x [{}, {}) is out of range",
                          b.q_begin, b.q_end, b.k_begin, b.k_end);
  KAMERA_TRY(check_layout(kv));

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
    grow(x_, size_t(n) * c.dim);
    load_rows(in, off, n, x_.data());
    const RowGroup g{seq, *first + off, n, 0, mask};
    KAMERA_TRY(run_batch(kv, {&g, 1}, lm, logits, &opt));
  }
  return logits;
}

Result<std::vector<float>> Engine::decode(KvPool& kv, std::span<const DecodeRow> rows) {
  const ModelConfig& c = model_.cfg;
  if (rows.empty()) return std::vector<float>{};
  KAMERA_TRY(check_layout(kv));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!kv.has_sequence(rows[i].seq))
      return make_error(ErrorCode::NotFound, "decode: unknown sequence {}", rows[i].seq);
    if (rows[i].token < 0 || rows[i].token >= c.n_vocab)
      return make_error(ErrorCode::InvalidArgument,
                        "decode: token id {} is outside the vocabulary [0, {})", rows[i].token,
                        c.n_vocab);
    for (size_t j = 0; j < i; ++j)
      if (rows[j].seq == rows[i].seq)
        return make_error(ErrorCode::InvalidArgument, "decode: sequence {} appears twice",
                          rows[i].seq);
  }
  // Append one token to every sequence; undo all on the first failure (a full pool).
  std::vector<RowGroup> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto at = kv.append(rows[i].seq, {&rows[i].pos, 1});
    if (!at.ok()) {
      for (const RowGroup& g : groups) (void)kv.truncate(g.seq, g.first);
      return at.error();
    }
    groups.push_back({rows[i].seq, *at, 1, int(i), nullptr});
  }
  grow(x_, rows.size() * size_t(c.dim));
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(x_.data() + i * c.dim, model_.tok_embd.data() + size_t(rows[i].token) * c.dim,
                sizeof(float) * c.dim);
  std::vector<float> logits;
  KAMERA_TRY(run_batch(kv, groups, LogitsMode::Last, logits));
  return logits;
}

void Engine::load_rows(const ForwardInput& in, int off, int n, float* x) const {
  const int d = model_.cfg.dim;
  if (in.embeddings) {
    std::memcpy(x, in.embeddings + size_t(off) * d, sizeof(float) * size_t(n) * d);
  } else {
    for (int t = 0; t < n; ++t)
      std::memcpy(x + size_t(t) * d, model_.tok_embd.data() + size_t(in.tokens[off + t]) * d,
                  sizeof(float) * d);
  }
}

// Rows x_ [0, n) belong to the groups (each group: g.n consecutive new tokens of one sequence,
// tokens g.first.., rows g.row0..). Weight products run once over all rows; attention per group.
void Engine::grow_scratch(int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), hid = c.ffn_dim;
  const int ow = c.attn_out_width();
  grow(x_, size_t(n) * d);
  grow(xb_, size_t(n) * std::max(d, qw));
  grow(q_, size_t(n) * qw);
  grow(k_, size_t(n) * kvw);
  grow(v_, size_t(n) * kvw);
  grow(att_, size_t(n) * std::max(qw, ow));
  if (c.attention == AttentionKind::Mla) {
    grow(k_, size_t(n) * (c.mla.kv_lora_rank + c.mla.qk_rope_dim));         // kv_a output
    grow(v_, size_t(n) * std::max(c.mla.kv_lora_rank, c.mla.q_lora_rank));  // latent / q_a
  }
  grow(gate_, size_t(n) * hid);
  grow(up_, size_t(n) * hid);
  grow(tmp_, size_t(n) * d);
}

// q_, k_, v_ = the (biased) projections of the n normed rows in xb_.
void Engine::qkv_projections(const LayerWeights& L, int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width();
  matmul_wt(xb_.data(), L.wq.data(), L.bq.empty() ? nullptr : L.bq.data(), q_.data(), n, d, qw);
  matmul_wt(xb_.data(), L.wk.data(), L.bk.empty() ? nullptr : L.bk.data(), k_.data(), n, d, kvw);
  matmul_wt(xb_.data(), L.wv.data(), L.bv.empty() ? nullptr : L.bv.data(), v_.data(), n, d, kvw);
}

// x += W_o att; x += FFN(RMSNorm(x)) for n rows (att_ holds the attention output).
void Engine::output_and_ffn(const LayerWeights& L, float* x, int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, hid = c.ffn_dim, ow = c.attn_out_width();
  matmul_wt(att_.data(), L.wo.data(), nullptr, tmp_.data(), n, ow, d);
  add_inplace(x, tmp_.data(), int64_t(n) * d);
  rmsnorm(x, L.ffn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
  matmul_wt(xb_.data(), L.w_gate.data(), nullptr, gate_.data(), n, d, hid);
  matmul_wt(xb_.data(), L.w_up.data(), nullptr, up_.data(), n, d, hid);
  silu_mul(gate_.data(), up_.data(), int64_t(n) * hid, &pool_);
  matmul_wt(gate_.data(), L.w_down.data(), nullptr, tmp_.data(), n, hid, d);
  add_inplace(x, tmp_.data(), int64_t(n) * d);
}

Status Engine::run_batch(KvPool& kv, std::span<const RowGroup> groups, LogitsMode logits_mode,
                         std::vector<float>& logits, const ForwardOptions* diag) {
  const ModelConfig& c = model_.cfg;
  int n = 0;
  for (const RowGroup& g : groups) n += g.n;
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width();
  const int ow = c.attn_out_width();
  grow_scratch(n);
  float* x = x_.data();

  const int kch = channel::kGqaKey, vch = channel::kGqaValue;
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
  const int half = c.rope.n_pairs();
  std::vector<float> cs(size_t(n) * half), sn(size_t(n) * half);  // query angles, n x n_pairs
  for (const RowGroup& g : groups) {
    const auto positions = kv.positions(g.seq);
    for (int t = 0; t < g.n; ++t)
      rope_.angles(positions[g.first + t], &cs[size_t(g.row0 + t) * half],
                   &sn[size_t(g.row0 + t) * half]);
  }

  AttentionExtras extras;
  if (diag && diag->key_mass) {
    const int n_seq = kv.n_tokens(groups[0].seq);
    if (int(diag->key_mass->size()) < n_seq) diag->key_mass->resize(n_seq, 0.0f);
    extras.key_mass = diag->key_mass->data();
  }
  for (int li = 0; li < c.n_layers; ++li) {
    const LayerWeights& L = model_.layers[li];
    if (diag && diag->captured_hidden && diag->capture_layer == li)
      diag->captured_hidden->insert(diag->captured_hidden->end(), x, x + size_t(n) * d);
    rmsnorm(x, L.attn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
    if (c.attention == AttentionKind::Mla) {
      mla_attention_block(kv, li, n, groups, cs.data(), sn.data(), extras.key_mass);
    } else {
      qkv_projections(L, n);
      float* k_arena = kv.arena(li, kch);
      float* v_arena = kv.arena(li, vch);
      for (const RowGroup& g : groups) {  // KV rows into the pool; keys pre-rotation
        const auto slots = kv.slots(g.seq);
        for (int t = 0; t < g.n; ++t) {
          const size_t slot = size_t(slots[g.first + t]), row = size_t(g.row0 + t);
          std::memcpy(k_arena + slot * kvw, k_.data() + row * kvw, sizeof(float) * kvw);
          std::memcpy(v_arena + slot * kvw, v_.data() + row * kvw, sizeof(float) * kvw);
        }
      }
      pool_.parallel_for(n, [&](int64_t a, int64_t b) {
        for (int64_t t = a; t < b; ++t)
          rope_apply(c.rope, &cs[size_t(t) * half], &sn[size_t(t) * half],
                     q_.data() + size_t(t) * qw, c.n_heads);
      });
      for (const RowGroup& g : groups)
        attention_paged(shape, q_.data() + size_t(g.row0) * qw, g.n, g.first, k_arena, v_arena,
                        kv.slots(g.seq), kv.positions(g.seq), rope_, g.mask,
                        att_.data() + size_t(g.row0) * ow, pool_, attn_ws_, extras);
    }
    output_and_ffn(L, x, n);
  }

  if (logits_mode == LogitsMode::None) return Status::Ok();
  // Rows whose logits are wanted: every row, or the last row of every group.
  std::vector<int> pick;
  for (const RowGroup& g : groups)
    for (int t = logits_mode == LogitsMode::All ? 0 : g.n - 1; t < g.n; ++t)
      pick.push_back(g.row0 + t);
  const int rows = int(pick.size());
  for (int r = 0; r < rows; ++r)  // gather (pick is increasing, so in place is safe)
    if (pick[r] != r) std::memcpy(x + size_t(r) * d, x + size_t(pick[r]) * d, sizeof(float) * d);
  rmsnorm(x, model_.out_norm.data(), xb_.data(), rows, d, c.rms_eps, &pool_);
  const size_t at = logits.size();
  logits.resize(at + size_t(rows) * c.n_vocab);
  matmul_wt(xb_.data(), model_.output_weight(), nullptr, logits.data() + at, rows, d, c.n_vocab);
  return Status::Ok();
}

Status Engine::recompute(KvPool& kv, SeqId seq, const RecomputePlan& plan, RecomputeStats* stats) {
  const ModelConfig& c = model_.cfg;
  const bool mla = c.attention == AttentionKind::Mla;
  if (!kv.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "recompute: unknown sequence {}", seq);
  KAMERA_TRY(check_layout(kv));
  std::vector<int> set = plan.tokens;
  if (set.empty()) return Status::Ok();
  const int n_seq = kv.n_tokens(seq);
  for (size_t i = 0; i < set.size(); ++i)
    if (set[i] < 0 || set[i] >= n_seq || (i > 0 && set[i] <= set[i - 1]))
      return make_error(ErrorCode::InvalidArgument,
                        "recompute: token indices must be ascending and inside the sequence");
  if (plan.from_layer < 0 || plan.from_layer >= c.n_layers)
    return make_error(ErrorCode::InvalidArgument, "recompute: from_layer {} is outside [0, {})",
                      plan.from_layer, c.n_layers);
  if (!plan.hidden && (plan.from_layer != 0 || plan.ids.size() != set.size()))
    return make_error(ErrorCode::InvalidArgument,
                      "recompute: give hidden rows, or token ids when starting at layer 0");
  KAMERA_TRY(kv.make_writable(seq, set.front(), set.back() + 1));
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width(), hid = c.ffn_dim,
            half = c.rope.n_pairs();
  const int ow = c.attn_out_width();
  int n = int(set.size());
  grow_scratch(n);
  float* x = x_.data();
  if (plan.hidden) {
    std::memcpy(x, plan.hidden, sizeof(float) * size_t(n) * d);
  } else {
    for (int t = 0; t < n; ++t) {
      if (plan.ids[t] < 0 || plan.ids[t] >= c.n_vocab)
        return make_error(ErrorCode::InvalidArgument,
                          "recompute: token id {} is outside the vocabulary", plan.ids[t]);
      std::memcpy(x + size_t(t) * d, model_.tok_embd.data() + size_t(plan.ids[t]) * d,
                  sizeof(float) * d);
    }
  }
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
  // The content channel CacheBlend ranks by (v; MLA: the latent c_kv) and every channel's width.
  const KvLayout& layout = kv.layout();
  const int content_ch = layout.content_channel();
  // FLOPs (2 per multiply-add): the Q/K/V projections of one token, and attention per key.
  const MlaConfig& m = c.mla;
  const double proj_flops =
      mla ? 2.0 * ((m.q_lora_rank > 0 ? double(d) * m.q_lora_rank + double(m.q_lora_rank) * qw
                                      : double(d) * qw) +
                   double(d) * (m.kv_lora_rank + m.qk_rope_dim))
          : 2.0 * (double(d) * qw + 2.0 * d * kvw);
  const double key_flops =
      mla ? 2.0 * c.n_heads * (2.0 * m.kv_lora_rank + m.qk_rope_dim) : 4.0 * c.n_heads * c.head_dim;
  const double query_flops =  // MLA: absorbing q_nope into the latent, and the value projection
      mla ? 2.0 * c.n_heads * double(m.kv_lora_rank) * (m.qk_nope_dim + m.v_head_dim) : 0.0;
  std::vector<float> cs, sn;
  auto angles = [&] {
    const auto positions = kv.positions(seq);
    cs.resize(size_t(n) * half);
    sn.resize(size_t(n) * half);
    for (int t = 0; t < n; ++t)
      rope_.angles(positions[set[t]], &cs[size_t(t) * half], &sn[size_t(t) * half]);
  };
  // Keeps rows `keep_rows` (ascending) of the per-row buffers; set and n follow.
  auto compact = [&](const std::vector<int>& keep_rows,
                     std::initializer_list<std::pair<float*, int>> bufs) {
    std::vector<int> kept;
    for (int r = 0; r < int(keep_rows.size()); ++r) {  // in place: r <= keep_rows[r]
      for (auto [buf, w] : bufs)
        std::memmove(buf + size_t(r) * w, buf + size_t(keep_rows[r]) * w, sizeof(float) * w);
      kept.push_back(set[keep_rows[r]]);
    }
    if (stats)  // the dropped tokens' projections were spent on the ranking
      stats->flops += double(n - int(kept.size())) * proj_flops;
    set = std::move(kept);
    n = int(set.size());
  };
  // Ranks rows by mean squared deviation of `fresh` (row t at fresh + t * w) from the pool's rows.
  auto top_deviation = [&](const float* fresh, const float* arena, int w) {
    const auto slots = kv.slots(seq);
    std::vector<std::pair<double, int>> dev(n);
    for (int t = 0; t < n; ++t) {
      const float* reused = arena + size_t(slots[set[t]]) * w;
      double s = 0;
      for (int j = 0; j < w; ++j) {
        const double e = double(fresh[size_t(t) * w + j]) - reused[j];
        s += e * e;
      }
      dev[t] = {s / w, t};
    }
    std::sort(dev.begin(), dev.end(), [](auto& a, auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    std::vector<int> keep_rows;
    for (int i = 0; i < std::min(n, std::max(0, plan.keep)); ++i)
      keep_rows.push_back(dev[i].second);
    std::sort(keep_rows.begin(), keep_rows.end());
    return keep_rows;
  };
  for (int li = plan.from_layer; li < c.n_layers; ++li) {
    const LayerWeights& L = model_.layers[li];
    const bool filter = li == plan.select_layer && plan.keep < n;
    rmsnorm(x, L.attn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
    if (mla) {
      if (filter) {
        // Project every token once to rank them (the block writes their rows; the reused rows
        // of the tokens that are dropped are put back), then run the kept ones for real.
        const auto slots = kv.slots(seq);
        std::vector<std::vector<float>> saved(layout.channels.size());
        for (size_t ch = 0; ch < saved.size(); ++ch) {
          const int w = layout.channels[ch].width;
          saved[ch].resize(size_t(n) * w);
          for (int t = 0; t < n; ++t)
            std::memcpy(&saved[ch][size_t(t) * w],
                        kv.arena(li, int(ch)) + size_t(slots[set[t]]) * w, sizeof(float) * w);
        }
        angles();
        const RowGroup g{seq, 0, n, 0, nullptr, set};
        mla_attention_block(kv, li, n, {&g, 1}, cs.data(), sn.data());
        const int w = layout.channels[content_ch].width;
        std::vector<float> fresh(size_t(n) * w);
        for (int t = 0; t < n; ++t)
          std::memcpy(&fresh[size_t(t) * w], kv.arena(li, content_ch) + size_t(slots[set[t]]) * w,
                      sizeof(float) * w);
        // Restore every row, then rank against the reused rows.
        for (size_t ch = 0; ch < saved.size(); ++ch) {
          const int cw = layout.channels[ch].width;
          for (int t = 0; t < n; ++t)
            std::memcpy(kv.arena(li, int(ch)) + size_t(slots[set[t]]) * cw,
                        &saved[ch][size_t(t) * cw], sizeof(float) * cw);
        }
        const std::vector<int> keep_rows = top_deviation(fresh.data(), kv.arena(li, content_ch), w);
        compact(keep_rows, {{x, d}});
        if (n == 0) return Status::Ok();
        rmsnorm(x, L.attn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
      }
      angles();
      const RowGroup g{seq, 0, n, 0, nullptr, set};
      mla_attention_block(kv, li, n, {&g, 1}, cs.data(), sn.data());
    } else {
      qkv_projections(L, n);
      float* k_arena = kv.arena(li, channel::kGqaKey);
      float* v_arena = kv.arena(li, channel::kGqaValue);
      if (filter) {  // rank by deviation of the recomputed V from the reused V
        const std::vector<int> keep_rows = top_deviation(v_.data(), v_arena, kvw);
        compact(keep_rows, {{x, d}, {q_.data(), qw}, {k_.data(), kvw}, {v_.data(), kvw}});
        if (n == 0) return Status::Ok();
      }
      const auto slots = kv.slots(seq);
      for (int t = 0; t < n; ++t) {
        const size_t slot = size_t(slots[set[t]]);
        std::memcpy(k_arena + slot * kvw, k_.data() + size_t(t) * kvw, sizeof(float) * kvw);
        std::memcpy(v_arena + slot * kvw, v_.data() + size_t(t) * kvw, sizeof(float) * kvw);
      }
      angles();
      for (int t = 0; t < n; ++t)
        rope_apply(c.rope, &cs[size_t(t) * half], &sn[size_t(t) * half], q_.data() + size_t(t) * qw,
                   c.n_heads);
      AttentionExtras ex;
      ex.query_index = set;
      attention_paged(shape, q_.data(), n, 0, k_arena, v_arena, slots, kv.positions(seq), rope_,
                      nullptr, att_.data(), pool_, attn_ws_, ex);
    }
    output_and_ffn(L, x, n);
    if (stats) {
      stats->token_layers += n;
      stats->rows_written += n;
      double keys = 0;
      for (int t = 0; t < n; ++t) keys += set[t] + 1;  // causal: token i attends to i + 1 keys
      stats->flops += n * (proj_flops + query_flops + 2.0 * (double(ow) * d + 3.0 * d * hid)) +
                      keys * key_flops;
    }
  }
  return Status::Ok();
}

// MLA: project, cache the normalized latent (content) and the pre-rotation k_pe (rope), rotate the
// queries' rope part, attend in the latent space per group. Leaves the head outputs in att_.
void Engine::mla_attention_block(KvPool& kv, int li, int n, std::span<const RowGroup> groups,
                                 const float* cs, const float* sn, float* key_mass) {
  const ModelConfig& c = model_.cfg;
  const LayerWeights& L = model_.layers[li];
  const MlaConfig& m = c.mla;
  const int d = c.dim, qw = c.q_width(), half = c.rope.n_pairs();
  const int lat = m.kv_lora_rank, R = m.qk_rope_dim, dq = m.qk_nope_dim + m.qk_rope_dim;
  const int ow = c.attn_out_width();
  if (m.q_lora_rank > 0) {
    matmul_wt(xb_.data(), L.wq_a.data(), nullptr, v_.data(), n, d, m.q_lora_rank);
    rmsnorm(v_.data(), L.q_a_norm.data(), v_.data(), n, m.q_lora_rank, c.rms_eps, &pool_);
    matmul_wt(v_.data(), L.wq_b.data(), nullptr, q_.data(), n, m.q_lora_rank, qw);
  } else {
    matmul_wt(xb_.data(), L.wq.data(), nullptr, q_.data(), n, d, qw);
  }
  matmul_wt(xb_.data(), L.wkv_a.data(), nullptr, k_.data(), n, d, lat + R);
  for (int t = 0; t < n; ++t)
    std::memcpy(v_.data() + size_t(t) * lat, k_.data() + size_t(t) * (lat + R),
                sizeof(float) * lat);
  rmsnorm(v_.data(), L.kv_a_norm.data(), v_.data(), n, lat, c.rms_eps, &pool_);
  float* c_arena = kv.arena(li, channel::kMlaLatent);
  float* kpe_arena = kv.arena(li, channel::kMlaRope);
  for (const RowGroup& g : groups) {
    const auto slots = kv.slots(g.seq);
    for (int t = 0; t < g.n; ++t) {
      const size_t slot = size_t(slots[g.token(t)]), row = size_t(g.row0 + t);
      std::memcpy(c_arena + slot * lat, v_.data() + row * lat, sizeof(float) * lat);
      std::memcpy(kpe_arena + slot * R, k_.data() + row * (lat + R) + lat,
                  sizeof(float) * R);  // pre-rotation
    }
  }
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < c.n_heads; ++h)
      rope_apply(c.rope, cs + size_t(t) * half, sn + size_t(t) * half,
                 q_.data() + size_t(t) * qw + size_t(h) * dq + m.qk_nope_dim, 1);
  const MlaShape shape{c.n_heads, lat, m.qk_nope_dim, R, m.v_head_dim};
  for (const RowGroup& g : groups) {
    AttentionExtras ex;
    ex.query_index = g.tokens;
    ex.key_mass = key_mass;
    attention_mla(shape, q_.data() + size_t(g.row0) * qw, g.n, g.first, L.wkv_b.data(), c_arena,
                  kpe_arena, kv.slots(g.seq), kv.positions(g.seq), rope_, g.mask,
                  1.0f / std::sqrt(float(dq)), att_.data() + size_t(g.row0) * ow, pool_, mla_ws_,
                  ex);
  }
}

}  // namespace kamera
