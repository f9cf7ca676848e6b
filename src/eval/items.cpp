#include "eval/items.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kamera {

std::vector<ReuseItem> random_token_items(const Model& model, const TokenItemSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  const int lo = std::min(3, model.cfg.n_vocab - 1);
  std::uniform_int_distribution<int32_t> tok(lo, model.cfg.n_vocab - 1);
  auto draw = [&](int n) {
    std::vector<int32_t> ids(std::max(1, n));
    for (auto& t : ids) t = tok(rng);
    return ChunkContent::from_tokens(std::move(ids));
  };
  std::vector<ReuseItem> items;
  for (int i = 0; i < spec.n_items; ++i) {
    ReuseItem it;
    it.name = fmt::format("random-{:02d}", i);
    it.antecedent = draw(spec.antecedent_tokens);
    it.chunk = draw(spec.chunk_tokens);
    it.query = draw(spec.query_tokens);
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<Pos> frame_layout(int t, int grid_h, int grid_w) {
  std::vector<Pos> pos;
  for (int h = 0; h < grid_h; ++h)
    for (int w = 0; w < grid_w; ++w) pos.push_back({t, h, w});
  return pos;
}

std::vector<ReuseItem> frame_items(const Model& model, const FrameItemSpec& spec) {
  const int dim = model.cfg.dim, n = spec.grid_h * spec.grid_w;
  // RMS of the token embeddings: the scale the rows enter the first layer at.
  double ss = 0;
  const int64_t rows = std::min<int64_t>(model.tok_embd.rows(), 256);
  std::vector<float> embd(size_t(rows) * dim);
  model.tok_embd.rows_f32(0, rows, embd.data());
  const size_t count = embd.size();
  for (size_t i = 0; i < count; ++i) ss += double(embd[i]) * embd[i];
  const float rms = count ? float(std::sqrt(ss / double(count))) : 1.0f;
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  constexpr int kWaves = 4;
  std::vector<ReuseItem> items;
  for (int i = 0; i < spec.n_items; ++i) {
    // One clip: base vector, waves (direction in feature space, spatial frequency, phase, drift).
    std::vector<float> base(dim);
    for (auto& x : base) x = nd(rng);
    std::vector<std::vector<float>> dir(kWaves, std::vector<float>(dim));
    std::vector<float> fh(kWaves), fw(kWaves), ph(kWaves), drift(kWaves);
    for (int k = 0; k < kWaves; ++k) {
      for (auto& x : dir[k]) x = nd(rng);
      fh[k] = 0.3f + 0.9f * ud(rng);
      fw[k] = 0.3f + 0.9f * ud(rng);
      ph[k] = 6.2831853f * ud(rng);
      drift[k] = 0.2f + 0.6f * ud(rng);
    }
    auto frame = [&](int t) {
      ChunkContent c;
      c.dim = dim;
      c.layout = frame_layout(0, spec.grid_h, spec.grid_w);
      c.embeddings.resize(size_t(n) * dim);
      for (int r = 0; r < n; ++r) {
        const int h = r / spec.grid_w, w = r % spec.grid_w;
        float* row = &c.embeddings[size_t(r) * dim];
        double sq = 0;
        for (int j = 0; j < dim; ++j) {
          float x = 0.5f * base[j];
          for (int k = 0; k < kWaves; ++k)
            x += dir[k][j] * std::sin(fh[k] * h + fw[k] * w + ph[k] + drift[k] * t);
          x += spec.noise * 2.0f * nd(rng);
          row[j] = x;
          sq += double(x) * x;
        }
        const float s = rms / float(std::sqrt(sq / dim) + 1e-12);
        for (int j = 0; j < dim; ++j) row[j] *= s;
      }
      return c;
    };
    ReuseItem it;
    it.name = fmt::format("frames-{:02d}", i);
    it.antecedent = frame(0);
    it.chunk = frame(1);
    std::uniform_int_distribution<int32_t> tok(std::min(3, model.cfg.n_vocab - 1),
                                               model.cfg.n_vocab - 1);
    std::vector<int32_t> q(std::max(1, spec.query_tokens));
    for (auto& x : q) x = tok(rng);
    it.query = ChunkContent::from_tokens(std::move(q));
    items.push_back(std::move(it));
  }
  return items;
}

}  // namespace kamera
