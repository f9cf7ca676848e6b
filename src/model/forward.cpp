#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/kv_row.h"
#include "model/deepseek2.h"
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
  if (model.cfg.layer_kinds.any(LayerKind::Local)) {  // no scaling on gemma3's local layers
    RopeDesc local = model.cfg.rope;
    local.theta = model.cfg.layer_kinds.local_theta;
    if (!model.cfg.layer_kinds.local_scaled) {  // gpt-oss keeps it (model/gpt_oss.h)
      local.freq_scale = 1.0;
      local.yarn = {};
    }
    rope_local_ = RopeCache(local, std::min(std::max(model.cfg.ctx_len, 4096), kMaxRopeTable));
  }
}

Status Engine::check_layout(const KvPool& kv) const {
  KvLayout want = model_.kv_layout();
  const KvLayout& have = kv.layout();
  bool same = have.n_layers == want.n_layers && have.channels.size() == want.channels.size();
  for (size_t i = 0; same && i < want.channels.size(); ++i)
    same = have.channels[i].width == want.channels[i].width &&
           have.channels[i].rotated == want.channels[i].rotated;
  for (int l = 0; same && l < want.n_layers; ++l)
    same = !kv.bounded_window() ||
           kv.is_window_layer(l) == (model_.cfg.layer_kinds.at(l) == LayerKind::Local);
  if (!same)
    return make_error(ErrorCode::InvalidArgument,
                      "forward: the KV pool's layout does not match the model");
  return Status::Ok();
}

Result<std::vector<float>> Engine::forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                           const ForwardOptions& opt) {
  KAMERA_ASSIGN_OR_RETURN(ForwardCursor cur, begin_forward(kv, seq, in, opt));
  while (!cur.finished()) {
    if (Status st = forward_step(kv, cur, opt.max_batch); !st.ok()) {
      (void)kv.rollback(seq,
                        cur.first);  // the input's tokens and slots go again (a refused window)
      return st.error();
    }
  }
  return std::move(cur.logits);
}

Result<ForwardCursor> Engine::begin_forward(KvPool& kv, SeqId seq, const ForwardInput& in,
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
  const NonCausalSpan& nc = in.non_causal;
  if (!nc.empty() && (nc.begin < 0 || nc.end > in.n))
    return make_error(ErrorCode::InvalidArgument,
                      "forward: non-causal span [{}, {}) is outside the input's {} rows", nc.begin,
                      nc.end, in.n);
  if (!nc.empty() && c.attention == AttentionKind::Mla)
    return make_error(ErrorCode::InvalidArgument,
                      "forward: a non-causal span on an MLA decoder (not supported)");
  KAMERA_TRY(check_layout(kv));
  auto first = kv.append(seq, in.positions, false, /*window_rows=*/false);  // given per step
  if (!first.ok()) return first.error();
  ForwardCursor cur;
  cur.seq = seq;
  cur.in = in;
  cur.opt = opt;
  cur.first = *first;
  return cur;
}

int ForwardCursor::piece(int want) const {
  const int n = std::clamp(want, 1, std::max(1, left()));
  const NonCausalSpan& s = in.non_causal;
  const int end = done + n;
  if (s.empty() || end <= s.begin || end >= s.end) return n;  // ends outside the span
  return done < s.begin ? s.begin - done : s.end - done;
}

NonCausalSpan Engine::piece_span(const ForwardCursor& cur, int n) {
  const NonCausalSpan& s = cur.in.non_causal;
  if (s.empty() || s.end <= cur.done || s.begin >= cur.done + n) return {};
  return {cur.first + s.begin, cur.first + s.end};
}

AttentionMask Engine::piece_mask(const ForwardCursor& cur, int n) {
  AttentionMask sub;
  if (!cur.opt.mask) return sub;
  for (auto b : cur.opt.mask->blocks) {
    b.q_begin = std::max(0, b.q_begin - cur.done);
    b.q_end = std::min(n, b.q_end - cur.done);
    if (b.q_begin < b.q_end) sub.blocks.push_back(b);
  }
  return sub;
}

Status Engine::forward_step(KvPool& kv, ForwardCursor& cur, int max_tokens) {
  const ModelConfig& c = model_.cfg;
  const int off = cur.done;
  if (cur.finished()) return Status::Ok();
  const int n = cur.piece(std::min(std::max(1, max_tokens), std::max(1, cur.opt.max_batch)));
  const AttentionMask sub = piece_mask(cur, n);
  const AttentionMask* mask = sub.blocks.empty() ? nullptr : &sub;
  LogitsMode lm = cur.opt.logits;
  if (lm == LogitsMode::Last && off + n < cur.in.n) lm = LogitsMode::None;
  grow(x_, size_t(n) * c.dim);
  ds_.assign(size_t(n), nullptr);
  load_rows(cur.in, off, n, 0);
  RowGroup g{cur.seq, cur.first + off, n, 0, mask};
  g.non_causal = piece_span(cur, n);
  KAMERA_TRY(window_rows(kv, {&g, 1}, /*allocate=*/true));
  KAMERA_TRY(run_batch(kv, {&g, 1}, lm, cur.logits, cur.opt.observer, cur.opt.hidden));
  cur.done += n;
  return Status::Ok();
}

Result<std::vector<float>> Engine::decode(KvPool& kv, std::span<const DecodeRow> rows) {
  return decode(kv, rows, {});
}

Status Engine::check_step(const KvPool& kv, std::span<const DecodeRow> rows,
                          std::span<const Piece> pieces) const {
  const ModelConfig& c = model_.cfg;
  for (const Piece& p : pieces)
    if (!p.cur || p.n < 1 || p.n > p.cur->left() || p.cur->opt.observer ||
        p.cur->opt.logits == LogitsMode::All || p.cur->opt.hidden)
      return make_error(ErrorCode::InvalidArgument, "decode: a piece the step cannot run");
  for (const Piece& p : pieces)
    if (p.cur->piece(p.n) != p.n)
      return make_error(ErrorCode::InvalidArgument,
                        "decode: a piece of {} rows splits its input's non-causal span", p.n);
  for (const Piece& p : pieces)
    for (const DecodeRow& r : rows)
      if (r.seq == p.cur->seq)
        return make_error(ErrorCode::InvalidArgument, "decode: sequence {} is a row and a piece",
                          r.seq);
  KAMERA_TRY(check_layout(kv));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!kv.has_sequence(rows[i].seq))
      return make_error(ErrorCode::NotFound, "decode: unknown sequence {}", rows[i].seq);
    for (size_t t = 0; t <= rows[i].draft.size(); ++t) {
      const int32_t id = t == 0 ? rows[i].token : rows[i].draft[t - 1];
      if (id < 0 || id >= c.n_vocab)
        return make_error(ErrorCode::InvalidArgument,
                          "decode: token id {} is outside the vocabulary [0, {})", id, c.n_vocab);
    }
    for (size_t j = 0; j < i; ++j)
      if (rows[j].seq == rows[i].seq)
        return make_error(ErrorCode::InvalidArgument, "decode: sequence {} appears twice",
                          rows[i].seq);
  }
  return Status::Ok();
}

Result<std::vector<float>> Engine::decode(KvPool& kv, std::span<const DecodeRow> rows,
                                          std::span<const Piece> pieces) {
  const ModelConfig& c = model_.cfg;
  if (rows.empty() && pieces.empty()) return std::vector<float>{};
  KAMERA_TRY(check_step(kv, rows, pieces));
  // Append each row's token (and draft) to its sequence; undo all on the first failure (a full
  // pool).
  std::vector<RowGroup> groups;
  int n = 0;  // batch rows so far
  std::vector<Pos> pos;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int k = 1 + int(rows[i].draft.size());
    pos.clear();
    for (int t = 0; t < k; ++t) pos.push_back(rows[i].pos.shifted(t));
    auto at = kv.append(rows[i].seq, pos, false, /*window_rows=*/false);
    if (!at.ok()) {
      for (const RowGroup& g : groups) (void)kv.rollback(g.seq, g.first);  // slots back too
      return at.error();
    }
    RowGroup g{rows[i].seq, *at, k, n, nullptr};
    g.every_row = k > 1;
    groups.push_back(g);
    n += k;
  }
  const int decode_rows = n;  // logits rows of the decode rows (one per token)
  // The pieces' rows follow the decode rows; their slots were appended by begin_forward.
  std::vector<AttentionMask> masks(pieces.size());
  std::vector<bool> wants(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ForwardCursor& cur = *pieces[i].cur;
    masks[i] = piece_mask(cur, pieces[i].n);
    wants[i] = pieces[i].n == cur.left() && cur.opt.logits == LogitsMode::Last;
    RowGroup g{cur.seq, cur.first + cur.done, pieces[i].n, n,
               masks[i].blocks.empty() ? nullptr : &masks[i]};
    g.logits = wants[i];
    g.non_causal = piece_span(cur, pieces[i].n);
    groups.push_back(g);
    n += pieces[i].n;
  }
  if (Status w = window_rows(kv, groups, /*allocate=*/true); !w.ok()) {
    for (size_t i = 0; i < rows.size(); ++i) (void)kv.rollback(groups[i].seq, groups[i].first);
    return w.error();
  }
  grow(x_, size_t(n) * c.dim);
  ds_.assign(size_t(n), nullptr);
  for (size_t i = 0; i < rows.size(); ++i) {
    float* x = x_.data() + size_t(groups[i].row0) * c.dim;
    token_row(rows[i].token, x);
    for (size_t t = 0; t < rows[i].draft.size(); ++t)
      token_row(rows[i].draft[t], x + (t + 1) * c.dim);
  }
  for (size_t i = 0; i < pieces.size(); ++i)
    load_rows(pieces[i].cur->in, pieces[i].cur->done, pieces[i].n, groups[rows.size() + i].row0);
  std::vector<float> logits;
  KAMERA_TRY(run_batch(kv, groups, LogitsMode::Last, logits));
  // Logits rows: the decode rows', then the last row of each piece that ends its cursor.
  const size_t V = size_t(c.n_vocab);
  size_t at = size_t(decode_rows);
  for (size_t i = 0; i < pieces.size(); ++i) {
    ForwardCursor& cur = *pieces[i].cur;
    cur.done += pieces[i].n;
    if (!wants[i]) continue;
    const auto row = logits.begin() + std::ptrdiff_t(at++ * V);
    cur.logits.assign(row, row + std::ptrdiff_t(V));
  }
  logits.resize(size_t(decode_rows) * V);
  return logits;
}

void Engine::load_rows(const ForwardInput& in, int off, int n, int row0) {
  const int d = model_.cfg.dim, w = model_.cfg.input_width();
  float* x = x_.data() + size_t(row0) * d;
  if (!in.embeddings) {
    for (int t = 0; t < n; ++t) token_row(in.tokens[off + t], x + size_t(t) * d);
    return;
  }
  for (int t = 0; t < n; ++t) {  // slice 0 enters; the deepstack slices wait (model/qwen3vl.h)
    const float* row = in.embeddings + size_t(off + t) * w;
    std::memcpy(x + size_t(t) * d, row, sizeof(float) * d);
    if (w > d) ds_[size_t(row0 + t)] = row + d;
  }
}

// qwen3vl: rows that came with deepstack slices get slice li + 1 after layer li.
void Engine::add_deepstack(int li, int n, float* x) const {
  if (li >= model_.cfg.n_deepstack) return;
  const int d = model_.cfg.dim;
  for (int t = 0; t < n && size_t(t) < ds_.size(); ++t)
    if (ds_[size_t(t)]) add_inplace(x + size_t(t) * d, ds_[size_t(t)] + size_t(li) * d, d);
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

// q_, k_, v_ = the (biased) projections of the n normed rows in xb_; qwen3's q/k head norms.
void Engine::qkv_projections(const LayerWeights& L, int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, qw = c.q_width(), kvw = c.kv_width();
  KAMERA_ASSERT(L.wq.cols() == d && L.wq.rows() == qw && L.wk.rows() == kvw && L.wv.rows() == kvw);
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  linear_many({{&L.wq, bias(L.bq), q_.data()},
               {&L.wk, bias(L.bk), k_.data()},
               {&L.wv, bias(L.bv), v_.data()}},
              xb_.data(), n, pool_);
  if (c.qk_norm) {  // qwen3: every head of q and k RMS-normed before the rope (model/qwen3.h)
    rmsnorm(q_.data(), L.q_norm.data(), q_.data(), n * c.n_heads, c.head_dim, c.rms_eps, &pool_);
    rmsnorm(k_.data(), L.k_norm.data(), k_.data(), n * c.n_kv_heads, c.head_dim, c.rms_eps, &pool_);
  }
  if (c.rope.attn_factor != 1.0) {  // phi3: the rotated dims' magnitude (ops/rope.h)
    rope_scale_rotary(c.rope, q_.data(), n * c.n_heads);
    rope_scale_rotary(c.rope, k_.data(), n * c.n_kv_heads);
  }
}

// x += W_o att; x += FFN(RMSNorm(x)) for n rows (att_ holds the attention output).
void Engine::output_and_ffn(const LayerWeights& L, float* x, int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, hid = c.ffn_dim, ow = c.attn_out_width();
  KAMERA_ASSERT(L.wo.cols() == ow &&
                (L.moe.routed() || (L.w_up.rows() == hid && L.w_down.cols() == hid)));
  linear(L.wo, att_.data(), n, L.bo.empty() ? nullptr : L.bo.data(), tmp_.data(), pool_);
  post_norm(L.attn_post_norm, tmp_.data(), n);
  add_inplace(x, tmp_.data(), int64_t(n) * d);
  rmsnorm(x, L.ffn_norm.data(), xb_.data(), n, d, c.rms_eps, &pool_);
  if (L.moe.routed()) {  // a mixture-of-experts layer (model/moe.h)
    moe_ffn(c.moe, L.moe, d, xb_.data(), n, tmp_.data(), moe_ws_, pool_);
    add_inplace(x, tmp_.data(), int64_t(n) * d);
    return;
  }
  linear_many({{&L.w_gate, nullptr, gate_.data()}, {&L.w_up, nullptr, up_.data()}}, xb_.data(), n,
              pool_);
  ffn_activation(n);
  linear(L.w_down, gate_.data(), n, nullptr, tmp_.data(), pool_);
  post_norm(L.ffn_post_norm, tmp_.data(), n);
  add_inplace(x, tmp_.data(), int64_t(n) * d);
}

// Rope angles of every row at its token's current position.
void Engine::row_angles(const KvPool& kv, std::span<const RowGroup> groups, int n) {
  const int half = model_.cfg.rope.n_pairs();
  auto fill = [&](const RopeCache& rope, std::vector<float>& cs, std::vector<float>& sn) {
    grow(cs, size_t(n) * half);
    grow(sn, size_t(n) * half);
    for (const RowGroup& g : groups) {
      const auto positions = kv.positions(g.seq);
      for (int t = 0; t < g.n; ++t)
        rope.angles(positions[g.token(t)], &cs[size_t(g.row0 + t) * half],
                    &sn[size_t(g.row0 + t) * half]);
    }
  };
  fill(rope_, cs_, sn_);
  // Local layers' angles too (model/layer_kinds.h)
  if (model_.cfg.layer_kinds.any(LayerKind::Local)) fill(rope_local_, cs_local_, sn_local_);
}

Status Engine::run_batch(KvPool& kv, std::span<const RowGroup> groups, LogitsMode logits_mode,
                         std::vector<float>& logits, ForwardObserver* observer,
                         std::vector<float>* hidden) {
  const ModelConfig& c = model_.cfg;
  int n = 0;
  for (const RowGroup& g : groups) n += g.n;
  const int d = c.dim;
  grow_scratch(n);
  float* x = x_.data();
  row_angles(kv, groups, n);
  for (int li = 0; li < c.n_layers; ++li) run_layer(kv, li, n, groups, x, observer);
  if (hidden) {
    const size_t at = hidden->size();
    hidden->resize(at + size_t(n) * d);
    rmsnorm(x, model_.out_norm.data(), hidden->data() + at, n, d, c.rms_eps, &pool_);
  }

  if (logits_mode == LogitsMode::None) return Status::Ok();
  // Rows whose logits are wanted: every row, or the last row of every group.
  std::vector<int> pick;
  for (const RowGroup& g : groups)
    if (logits_mode == LogitsMode::All || g.logits || g.every_row)
      for (int t = logits_mode == LogitsMode::All || g.every_row ? 0 : g.n - 1; t < g.n; ++t)
        pick.push_back(g.row0 + t);
  if (pick.empty()) return Status::Ok();
  const int rows = int(pick.size());
  for (int r = 0; r < rows; ++r)  // gather (pick is increasing, so in place is safe)
    if (pick[r] != r) std::memcpy(x + size_t(r) * d, x + size_t(pick[r]) * d, sizeof(float) * d);
  rmsnorm(x, model_.out_norm.data(), xb_.data(), rows, d, c.rms_eps, &pool_);
  const size_t at = logits.size();
  logits.resize(at + size_t(rows) * c.n_vocab);
  linear(model_.output_weight(), xb_.data(), rows, nullptr, logits.data() + at, pool_);
  soft_cap(logits.data() + at, int64_t(rows) * c.n_vocab);
  return Status::Ok();
}

// One transformer layer over rows x (n x dim) of the groups, rope angles in cs_/sn_: attention
// (K/V rows written into the pool, pre-rotation), then the output projection and FFN, in place.
void Engine::run_layer(KvPool& kv, int li, int n, std::span<const RowGroup> groups, float* x,
                       ForwardObserver* observer) {
  const ModelConfig& c = model_.cfg;
  const LayerWeights& L = model_.layers[li];
  if (observer) observer->layer_input(li, x, n, c.dim);
  float* key_mass = observer ? observer->key_mass(li, kv.n_tokens(groups[0].seq)) : nullptr;
  rmsnorm(x, L.attn_norm.data(), xb_.data(), n, c.dim, c.rms_eps, &pool_);
  if (c.attention == AttentionKind::Mla) {
    mla_attention_block(kv, li, n, groups, key_mass);
  } else {
    gqa_attention_block(kv, li, n, groups, key_mass);
    if (observer) observer->layer_queries(li, q_.data(), n, c.q_width());
  }
  output_and_ffn(L, x, n);
  add_deepstack(li, n, x);
}

// MHA/GQA: project, cache K (pre-rotation) and V, rotate the queries, attend per group. Leaves
// the head outputs in att_.
void Engine::gqa_attention_block(KvPool& kv, int li, int n, std::span<const RowGroup> groups,
                                 float* key_mass) {
  const ModelConfig& c = model_.cfg;
  const int qw = c.q_width(), kvw = c.kv_width(), ow = c.attn_out_width();
  const int half = c.rope.n_pairs();
  qkv_projections(model_.layers[li], n);
  const DType dt = kv.dtype();
  const size_t row_bytes = size_t(kvw) * kv_elem_bytes(dt);
  auto* k_arena = static_cast<uint8_t*>(kv.arena_data(li, channel::kGqaKey));
  auto* v_arena = static_cast<uint8_t*>(kv.arena_data(li, channel::kGqaValue));
  for (const RowGroup& g : groups) {  // KV rows into the pool (rounded once); keys pre-rotation
    const auto slots = kv.slots(g.seq, li);
    for (int t = 0; t < g.n; ++t) {
      const size_t slot = size_t(slots[g.token(t)]), row = size_t(g.row0 + t);
      kv_store_row(dt, k_.data() + row * kvw, k_arena + slot * row_bytes, kvw);
      kv_store_row(dt, v_.data() + row * kvw, v_arena + slot * row_bytes, kvw);
    }
  }
  const float *cs = nullptr, *sn = nullptr;
  layer_angles(li, &cs, &sn);
  if (cs)
    pool_.parallel_for(n, [&](int64_t a, int64_t b) {
      for (int64_t t = a; t < b; ++t)
        rope_apply(c.rope, &cs[size_t(t) * half], &sn[size_t(t) * half], q_.data() + size_t(t) * qw,
                   c.n_heads);
    });
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim};
  const RopeCache& rope = c.layer_kinds.at(li) == LayerKind::Local ? rope_local_ : rope_;
  std::vector<int> reach;
  for (const RowGroup& g : groups) {
    AttentionExtras ex;
    ex.query_index = g.tokens;
    ex.key_mass = key_mass;
    ex.kv_dtype = dt;
    ex.per_row = g.every_row;     // a draft's rows: each as its plain decode step computes it
    if (!g.non_causal.empty()) {  // the span's rows read up to its last row (model/forward.h)
      reach.resize(size_t(g.n));
      for (int t = 0; t < g.n; ++t) {
        const int tok = g.token(t);
        const bool in = tok >= g.non_causal.begin && tok < g.non_causal.end;
        reach[size_t(t)] = in ? g.non_causal.end - 1 : tok;
      }
      ex.query_reach = reach;
    }
    layer_attention_extras(li, ex);
    if (!model_.layers[li].attn_sinks.empty()) ex.sinks = model_.layers[li].attn_sinks.data();
    attention_paged(shape, q_.data() + size_t(g.row0) * qw, g.n, g.first, k_arena, v_arena,
                    kv.slots(g.seq, li), kv.positions(g.seq), rope, g.mask,
                    att_.data() + size_t(g.row0) * ow, pool_, attn_ws_, ex);
  }
}

void Engine::embed(std::span<const int32_t> ids, float* x) const {
  const int d = model_.cfg.dim;
  for (size_t t = 0; t < ids.size(); ++t) token_row(ids[t], x + t * d);
}

void Engine::layer_channels(int li, const float* x, int n, std::vector<std::vector<float>>& out) {
  const ModelConfig& c = model_.cfg;
  const LayerWeights& L = model_.layers[li];
  grow_scratch(n);
  rmsnorm(x, L.attn_norm.data(), xb_.data(), n, c.dim, c.rms_eps, &pool_);
  out.resize(2);
  if (c.attention == AttentionKind::Mla) {
    const int lat = c.mla.kv_lora_rank, R = c.mla.qk_rope_dim;
    mla_latent_rows(L, n);
    out[channel::kMlaLatent].assign(v_.begin(), v_.begin() + size_t(n) * lat);
    out[channel::kMlaRope].resize(size_t(n) * R);
    for (int t = 0; t < n; ++t)
      std::memcpy(&out[channel::kMlaRope][size_t(t) * R], k_.data() + size_t(t) * (lat + R) + lat,
                  sizeof(float) * R);
  } else {
    const size_t w = size_t(n) * c.kv_width();
    qkv_projections(L, n);
    out[channel::kGqaKey].assign(k_.begin(), k_.begin() + w);
    out[channel::kGqaValue].assign(v_.begin(), v_.begin() + w);
  }
}

Status Engine::layer_step(KvPool& kv, SeqId seq, int li, std::span<const int> tokens, float* x,
                          ForwardObserver* observer) {
  const int n = int(tokens.size());
  if (!kv.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "layer step: unknown sequence {}", seq);
  if (li < 0 || li >= model_.cfg.n_layers)
    return make_error(ErrorCode::InvalidArgument, "layer step: layer {} is outside [0, {})", li,
                      model_.cfg.n_layers);
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= kv.n_tokens(seq) || (i > 0 && tokens[i] <= tokens[i - 1]))
      return make_error(ErrorCode::InvalidArgument,
                        "layer step: token indices must be ascending and inside the sequence");
  if (n == 0) return Status::Ok();
  KAMERA_TRY(check_layout(kv));
  const RowGroup g{seq, 0, n, 0, nullptr, tokens};
  for (int t : tokens)
    if (!kv.has_window_row(seq, t))
      return make_error(ErrorCode::InvalidArgument,
                        "layer step: token {} has no sliding-window rows (dropped)", t);
  KAMERA_TRY(window_rows(kv, {&g, 1}, /*allocate=*/false));
  KAMERA_TRY(kv.make_writable(seq, tokens.front(), tokens.back() + 1));
  grow_scratch(n);
  ds_.assign(size_t(n), nullptr);  // the caller's hidden rows: no deepstack slices known
  row_angles(kv, {&g, 1}, n);
  run_layer(kv, li, n, {&g, 1}, x, observer);
  return Status::Ok();
}

// MLA latent rows of the n normed rows in xb_: k_ = [latent | k_pe] (n x (lat + R)), v_ = the
// normalized latent (n x lat). The query projections stay for the attention block.
void Engine::mla_latent_rows(const LayerWeights& L, int n) {
  const ModelConfig& c = model_.cfg;
  const int d = c.dim, lat = c.mla.kv_lora_rank, R = c.mla.qk_rope_dim;
  KAMERA_ASSERT(L.wkv_a.cols() == d && L.wkv_a.rows() == lat + R);
  linear(L.wkv_a, xb_.data(), n, nullptr, k_.data(), pool_);
  for (int t = 0; t < n; ++t)
    std::memcpy(v_.data() + size_t(t) * lat, k_.data() + size_t(t) * (lat + R),
                sizeof(float) * lat);
  rmsnorm(v_.data(), L.kv_a_norm.data(), v_.data(), n, lat, c.rms_eps, &pool_);
}

// MLA: project, cache the normalized latent (content) and the pre-rotation k_pe (rope), rotate the
// queries' rope part, attend in the latent space per group. Leaves the head outputs in att_.
void Engine::mla_attention_block(KvPool& kv, int li, int n, std::span<const RowGroup> groups,
                                 float* key_mass) {
  const ModelConfig& c = model_.cfg;
  const LayerWeights& L = model_.layers[li];
  const MlaConfig& m = c.mla;
  const int qw = c.q_width(), half = c.rope.n_pairs();
  const int lat = m.kv_lora_rank, R = m.qk_rope_dim, dq = m.qk_nope_dim + m.qk_rope_dim;
  const int ow = c.attn_out_width();
  const float* cs = cs_.data();
  const float* sn = sn_.data();
  if (m.q_lora_rank > 0) {
    linear(L.wq_a, xb_.data(), n, nullptr, v_.data(), pool_);
    rmsnorm(v_.data(), L.q_a_norm.data(), v_.data(), n, m.q_lora_rank, c.rms_eps, &pool_);
    linear(L.wq_b, v_.data(), n, nullptr, q_.data(), pool_);
  } else {
    linear(L.wq, xb_.data(), n, nullptr, q_.data(), pool_);
  }
  mla_latent_rows(L, n);
  const DType dt = kv.dtype();
  const size_t eb = kv_elem_bytes(dt);
  auto* c_arena = static_cast<uint8_t*>(kv.arena_data(li, channel::kMlaLatent));
  auto* kpe_arena = static_cast<uint8_t*>(kv.arena_data(li, channel::kMlaRope));
  for (const RowGroup& g : groups) {
    const auto slots = kv.slots(g.seq, li);
    for (int t = 0; t < g.n; ++t) {
      const size_t slot = size_t(slots[g.token(t)]), row = size_t(g.row0 + t);
      kv_store_row(dt, v_.data() + row * lat, c_arena + slot * lat * eb, lat);
      kv_store_row(dt, k_.data() + row * (lat + R) + lat, kpe_arena + slot * R * eb,
                   R);  // pre-rotation
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
    ex.kv_dtype = dt;
    attention_mla(shape, q_.data() + size_t(g.row0) * qw, g.n, g.first, L.wkv_b.f32(), c_arena,
                  kpe_arena, kv.slots(g.seq, li), kv.positions(g.seq), rope_, g.mask,
                  mla_kq_scale(c), att_.data() + size_t(g.row0) * ow, pool_, mla_ws_, ex);
  }
}

}  // namespace kamera
