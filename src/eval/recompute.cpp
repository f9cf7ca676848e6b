#include "eval/recompute.h"

#include <algorithm>
#include <cstring>

namespace kamera {

namespace {

// FLOPs of the recompute's cost model (2 per multiply-add): the Q/K/V projections of one token,
// the query-side work (MLA: absorbing q_nope into the latent and the value projection), attention
// per visible key, and the output projection + FFN of one token.
struct FlopModel {
  double proj = 0, query = 0, key = 0, out_ffn = 0;
  explicit FlopModel(const ModelConfig& c) {
    const MlaConfig& m = c.mla;
    const double d = c.dim, qw = c.q_width(), kvw = c.kv_width();
    if (c.attention == AttentionKind::Mla) {
      proj = 2.0 * ((m.q_lora_rank > 0 ? d * m.q_lora_rank + double(m.q_lora_rank) * qw : d * qw) +
                    d * (m.kv_lora_rank + m.qk_rope_dim));
      key = 2.0 * c.n_heads * (2.0 * m.kv_lora_rank + m.qk_rope_dim);
      query = 2.0 * c.n_heads * double(m.kv_lora_rank) * (m.qk_nope_dim + m.v_head_dim);
    } else {
      proj = 2.0 * (d * qw + 2.0 * d * kvw);
      key = 4.0 * c.n_heads * c.head_dim;
    }
    out_ffn = 2.0 * (double(c.attn_out_width()) * d + 3.0 * d * c.ffn_dim);
  }
};

Status check_plan(const Engine& e, const KvPool& kv, SeqId seq, const RecomputePlan& plan) {
  const ModelConfig& c = e.model().cfg;
  if (!kv.has_sequence(seq))
    return make_error(ErrorCode::NotFound, "recompute: unknown sequence {}", seq);
  const std::vector<int>& set = plan.tokens;
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
  for (int32_t id : plan.ids)
    if (!plan.hidden && (id < 0 || id >= c.n_vocab))
      return make_error(ErrorCode::InvalidArgument,
                        "recompute: token id {} is outside the vocabulary", id);
  return Status::Ok();
}

// The rows (ascending) of `set` whose fresh content rows deviate most (mean squared) from the
// pool's rows of the same tokens; `keep` of them.
std::vector<int> top_deviation(const KvPool& kv, SeqId seq, int layer, int channel,
                               const std::vector<int>& set, const std::vector<float>& fresh,
                               int keep) {
  const int w = kv.layout().channels[channel].width, n = int(set.size());
  std::vector<std::pair<double, int>> dev(n);
  std::vector<float> reused(w);
  for (int t = 0; t < n; ++t) {
    kv.read_row(seq, layer, channel, set[t], reused.data());
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
  std::vector<int> rows;
  for (int i = 0; i < std::min(n, std::max(0, keep)); ++i) rows.push_back(dev[i].second);
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

Status recompute_tokens(Engine& engine, KvPool& kv, SeqId seq, const RecomputePlan& plan,
                        RecomputeStats* stats) {
  KAMERA_TRY(check_plan(engine, kv, seq, plan));
  std::vector<int> set = plan.tokens;
  if (set.empty()) return Status::Ok();
  const ModelConfig& c = engine.model().cfg;
  const int d = c.dim;
  const FlopModel fm(c);
  std::vector<float> x(set.size() * size_t(d));  // hidden rows of the tokens still recomputed
  if (plan.hidden) {
    std::memcpy(x.data(), plan.hidden, sizeof(float) * x.size());
  } else {
    engine.embed(plan.ids, x.data());
  }
  const int content = kv.layout().content_channel();
  std::vector<std::vector<float>> channels;
  for (int li = plan.from_layer; li < c.n_layers; ++li) {
    int n = int(set.size());
    if (li == plan.select_layer && plan.keep < n) {  // CacheBlend: rank, keep the top rows
      engine.layer_channels(li, x.data(), n, channels);
      const std::vector<int> rows =
          top_deviation(kv, seq, li, content, set, channels[content], plan.keep);
      std::vector<int> kept;
      for (int r = 0; r < int(rows.size()); ++r) {  // in place: r <= rows[r]
        std::memmove(&x[size_t(r) * d], &x[size_t(rows[r]) * d], sizeof(float) * d);
        kept.push_back(set[rows[r]]);
      }
      if (stats) stats->flops += double(n - int(kept.size())) * fm.proj;  // spent on ranking
      set = std::move(kept);
      n = int(set.size());
      if (n == 0) return Status::Ok();
    }
    KAMERA_TRY(engine.layer_step(kv, seq, li, set, x.data()));
    if (stats) {
      stats->token_layers += n;
      stats->rows_written += n;
      double keys = 0;
      for (int t : set) keys += t + 1;  // causal: token i attends to i + 1 keys
      stats->flops += n * (fm.proj + fm.query + fm.out_ffn) + keys * fm.key;
    }
  }
  return Status::Ok();
}

void CaptureLayerInput::layer_input(int layer, const float* x, int n, int dim) {
  if (layer == layer_) rows.insert(rows.end(), x, x + size_t(n) * dim);
}

float* KeyMassSum::key_mass(int, int n_keys) {
  if (int(mass.size()) < n_keys) mass.resize(size_t(n_keys), 0.0f);
  return mass.data();
}

}  // namespace kamera
