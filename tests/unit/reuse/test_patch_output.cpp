// Output-aware patches (reuse/patch_output.h, reuse/output_stats.h): the weighted rank-m patch is
// optimal for its weighted norm (against SVD and random rank-m alternatives), exact at full rank,
// and the K / V weights equal the score / output error they stand for.
#include <gtest/gtest.h>

#include <cblas.h>

#include <random>

#include "eval/items.h"
#include "eval/reuse_bench.h"
#include "ops/rope.h"
#include "reuse/output_stats.h"
#include "reuse/patch_output.h"
#include "support/tiny_models.h"

using namespace kamera;

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// An anisotropic PSD Gram B^T B (cols x cols) with a spread spectrum.
std::vector<double> random_gram(int cols, std::mt19937& rng) {
  std::vector<float> b = randn(size_t(cols) * cols, rng);
  for (int r = 0; r < cols; ++r)
    for (int c = 0; c < cols; ++c) b[size_t(r) * cols + c] *= float(std::exp(-0.3 * c));
  std::vector<double> g(size_t(cols) * cols, 0.0);
  for (int a = 0; a < cols; ++a)
    for (int c = 0; c < cols; ++c)
      for (int r = 0; r < cols; ++r)
        g[size_t(a) * cols + c] += double(b[size_t(r) * cols + a]) * b[size_t(r) * cols + c];
  return g;
}

// A - us vt
std::vector<float> residual(const std::vector<float>& a, const std::vector<float>& us,
                            const std::vector<float>& vt, int rows, int cols, int m) {
  std::vector<float> e = a;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, m, -1.0f, us.data(), m,
              vt.data(), cols, 1.0f, e.data(), cols);
  return e;
}

struct WeightedCase {
  int rows = 24, cols = 16;
  std::vector<float> a;
  std::vector<double> row_w, gram;
  explicit WeightedCase(uint32_t seed) {
    std::mt19937 rng(seed);
    a = randn(size_t(rows) * cols, rng);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int i = 0; i < rows; ++i) row_w.push_back(std::pow(u(rng), 3.0));  // uneven mass
    gram = random_gram(cols, rng);
  }
  double err(const std::vector<float>& e) const {
    return weighted_error(e.data(), rows, cols, row_w, gram, 1e-3);
  }
};

}  // namespace

TEST(PatchOutput, WeightedRankMBeatsSvdAndRandomAlternatives) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const WeightedCase c(seed);
    std::mt19937 rng(100 + seed);
    for (int m : {1, 2, 4, 8}) {
      std::vector<float> us, vt;
      ASSERT_TRUE(
          weighted_truncated_svd(c.a.data(), c.rows, c.cols, m, c.row_w, c.gram, 1e-3, us, vt)
              .ok());
      const double best = c.err(residual(c.a, us, vt, c.rows, c.cols, m));
      std::vector<float> sus, svt;
      ASSERT_TRUE(truncated_svd(c.a.data(), c.rows, c.cols, m, SvdMethod::Gesdd, sus, svt).ok());
      const double svd = c.err(residual(c.a, sus, svt, c.rows, c.cols, m));
      // optimal for the weighted norm, and by a clear margin with these uneven weights
      EXPECT_LT(best, 0.95 * svd) << "seed " << seed << " rank " << m;
      // SVD stays optimal for the plain Frobenius norm
      const std::vector<double> none;
      EXPECT_LE(weighted_error(residual(c.a, sus, svt, c.rows, c.cols, m).data(), c.rows, c.cols,
                               none, none, 0),
                weighted_error(residual(c.a, us, vt, c.rows, c.cols, m).data(), c.rows, c.cols,
                               none, none, 0) *
                    (1 + 1e-5));
      for (int t = 0; t < 20; ++t) {  // perturbed optima and random rank-m matrices
        std::vector<float> pu = us, pv = vt;
        const float eps = t < 10 ? 0.05f : 1.0f;
        for (auto& x : pu) x += eps * std::normal_distribution<float>()(rng);
        for (auto& x : pv) x += eps * std::normal_distribution<float>()(rng);
        EXPECT_GE(c.err(residual(c.a, pu, pv, c.rows, c.cols, m)), best * (1 - 1e-5));
      }
    }
  }
}

TEST(PatchOutput, FullRankReconstructsExactly) {
  const WeightedCase c(7);
  std::vector<float> us, vt;
  ASSERT_TRUE(
      weighted_truncated_svd(c.a.data(), c.rows, c.cols, kFullRank, c.row_w, c.gram, 1e-3, us, vt)
          .ok());
  const std::vector<float> e = residual(c.a, us, vt, c.rows, c.cols, c.cols);
  double emax = 0, amax = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    emax = std::max(emax, double(std::fabs(e[i])));
    amax = std::max(amax, double(std::fabs(c.a[i])));
  }
  EXPECT_LT(emax / amax, 1e-5);
  std::vector<float> sus, svt;  // and the SVD patch too
  ASSERT_TRUE(
      truncated_svd(c.a.data(), c.rows, c.cols, kFullRank, SvdMethod::Gesdd, sus, svt).ok());
  const std::vector<float> es = residual(c.a, sus, svt, c.rows, c.cols, c.cols);
  double esmax = 0;
  for (float x : es) esmax = std::max(esmax, double(std::fabs(x)));
  EXPECT_LT(esmax / amax, 1e-5);
}

TEST(PatchOutput, BadInputFails) {
  const WeightedCase c(3);
  std::vector<float> us, vt;
  EXPECT_FALSE(
      weighted_truncated_svd(c.a.data(), c.rows, c.cols, 17, c.row_w, c.gram, 1e-3, us, vt).ok());
  const std::vector<double> short_rows(3, 1.0);
  EXPECT_FALSE(
      weighted_truncated_svd(c.a.data(), c.rows, c.cols, 2, short_rows, c.gram, 1e-3, us, vt).ok());
}

// The K weight is the score error in the stored (de-rotated) frame: for a deficit row repeated on
// every chunk row j, sum over later queries i, query heads h and rows j of
// (q_i,h . R(p_j) dk)^2 equals n dk^T M dk. The V weight is the output error of W_o.
TEST(PatchOutput, StatsWeightsMatchScoreAndOutputError) {
  for (const char* arch : {"qwen2", "llama"}) {
    auto m = tiny::load(tiny::model_path(arch));
    const ModelConfig& c = m->cfg;
    const int qw = c.q_width(), kvw = c.kv_width(), hd = c.head_dim;
    const int group = c.n_heads / c.n_kv_heads, half = c.rope.n_pairs();
    RopeCache rope(c.rope, 512);
    std::mt19937 rng(5);
    const int n_rows = 9, first = 3, n = 4;  // the chunk: sequence tokens [3, 7)
    OutputStats st(c, 0);
    std::vector<std::vector<float>> qrot(size_t(c.n_layers));
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    for (int l = 0; l < c.n_layers; ++l) {
      qrot[size_t(l)] = randn(size_t(n_rows) * qw, rng);
      for (int i = 0; i < n_rows; ++i) {
        rope.angles(Pos::linear(40 + 3 * i), cs.data(), sn.data());
        rope_apply(c.rope, cs.data(), sn.data(), &qrot[size_t(l)][size_t(i) * qw], c.n_heads);
      }
      st.layer_queries(l, qrot[size_t(l)].data(), n_rows, qw);
      float* mass = st.key_mass(l, n_rows);
      for (int j = 0; j < n_rows; ++j) mass[j] += 0.1f * float(j + 1);
    }
    std::vector<Pos> pos;
    for (int j = 0; j < n; ++j) pos.push_back(Pos::linear(45 + 2 * j));
    auto w = st.weights(*m, rope, first, n, pos);
    ASSERT_TRUE(w.ok()) << w.message();
    for (int l = 0; l < c.n_layers; ++l) {
      const std::vector<float> dk = randn(size_t(kvw), rng);
      double direct = 0;
      std::vector<float> rk(static_cast<size_t>(kvw));
      for (int j = 0; j < n; ++j) {
        rk = dk;
        rope.angles(pos[size_t(j)], cs.data(), sn.data());
        rope_apply(c.rope, cs.data(), sn.data(), rk.data(), c.n_kv_heads);
        for (int i = first; i < n_rows; ++i)
          for (int h = 0; h < c.n_heads; ++h) {
            double s = 0;
            for (int e = 0; e < hd; ++e)
              s += double(qrot[size_t(l)][size_t(i) * qw + h * hd + e]) *
                   rk[size_t((h / group) * hd + e)];
            direct += s * s;
          }
      }
      const auto& g = w->at(l, channel::kGqaKey).gram;
      double quad = 0;
      for (int a = 0; a < kvw; ++a)
        for (int b = 0; b < kvw; ++b)
          quad += double(dk[size_t(a)]) * g[size_t(a) * kvw + b] * dk[size_t(b)];
      EXPECT_NEAR(n * quad, direct, 1e-4 * direct) << arch << " layer " << l;
      // V: ||W_o concat_h(dv_g(h))||^2 = dv^T G dv; rows weighted by the chunk's mass
      const std::vector<float> dv = randn(size_t(kvw), rng);
      std::vector<float> wo(size_t(c.dim) * qw), cat(static_cast<size_t>(qw)), out(size_t(c.dim));
      m->layers[size_t(l)].wo.rows_f32(0, c.dim, wo.data());
      for (int h = 0; h < c.n_heads; ++h)
        for (int e = 0; e < hd; ++e) cat[size_t(h * hd + e)] = dv[size_t((h / group) * hd + e)];
      cblas_sgemv(CblasRowMajor, CblasNoTrans, c.dim, qw, 1.0f, wo.data(), qw, cat.data(), 1, 0.0f,
                  out.data(), 1);
      double o2 = 0;
      for (float x : out) o2 += double(x) * x;
      const auto& vw = w->at(l, channel::kGqaValue);
      double vq = 0;
      for (int a = 0; a < kvw; ++a)
        for (int b = 0; b < kvw; ++b)
          vq += double(dv[size_t(a)]) * vw.gram[size_t(a) * kvw + b] * dv[size_t(b)];
      EXPECT_NEAR(vq, o2, 1e-4 * o2) << arch << " layer " << l;
      ASSERT_EQ(vw.rows.size(), size_t(n));
      EXPECT_FLOAT_EQ(float(vw.rows[0]), 0.1f * (first + 1));
    }
  }
}

// form_output_patch on a chunk's KV: full rank restores the target (1e-5), and a rank-1 patch has
// a lower weighted error than the rank-1 SVD patch on every block.
TEST(PatchOutput, FormOutputPatchOnChunkKv) {
  auto m = tiny::load(tiny::model_path("qwen2"));
  const KvLayout layout = m->kv_layout();
  const int n = 10, n_ch = int(layout.channels.size());
  std::mt19937 rng(11);
  ChunkKV target(layout, n, DType::F32), base(layout, n, DType::F32);
  OutputWeights w;
  w.n_layers = layout.n_layers;
  w.n_channels = n_ch;
  for (int l = 0; l < layout.n_layers; ++l)
    for (int ch = 0; ch < n_ch; ++ch) {
      const int width = layout.channels[size_t(ch)].width;
      for (ChunkKV* kv : {&target, &base})
        for (int i = 0; i < n; ++i) kv->at(l, ch).set_row(i, randn(size_t(width), rng).data());
      ChannelWeights cw;
      cw.gram = random_gram(width, rng);
      for (int i = 0; i < n; ++i) cw.rows.push_back(0.1 + i);
      w.blocks.push_back(std::move(cw));
    }
  PatchOptions po;
  po.rank = kFullRank;
  auto full = form_output_patch(target, base, po, w);
  ASSERT_TRUE(full.ok()) << full.message();
  ChunkKV patched = base;
  apply_patch(*full, patched);
  for (int l = 0; l < layout.n_layers; ++l)
    for (int ch = 0; ch < n_ch; ++ch) {
      const int width = layout.channels[size_t(ch)].width;
      std::vector<float> a(static_cast<size_t>(width)), b(static_cast<size_t>(width));
      double emax = 0, amax = 0;
      for (int i = 0; i < n; ++i) {
        patched.at(l, ch).get_row(i, a.data());
        target.at(l, ch).get_row(i, b.data());
        for (int j = 0; j < width; ++j) {
          emax = std::max(emax, double(std::fabs(a[size_t(j)] - b[size_t(j)])));
          amax = std::max(amax, double(std::fabs(b[size_t(j)])));
        }
      }
      EXPECT_LT(emax / amax, 1e-5) << "layer " << l << " channel " << ch;
    }
  po.rank = 1;
  auto out1 = form_output_patch(target, base, po, w);
  auto svd1 = form_patch(target, base, po);
  ASSERT_TRUE(out1.ok() && svd1.ok());
  EXPECT_EQ(out1->bytes(), svd1->bytes());
  ChunkKV po1 = base, ps1 = base;
  apply_patch(*out1, po1);
  apply_patch(*svd1, ps1);
  for (int l = 0; l < layout.n_layers; ++l)
    for (int ch = 0; ch < n_ch; ++ch) {
      const int width = layout.channels[size_t(ch)].width;
      std::vector<float> eo(size_t(n) * width), es(size_t(n) * width),
          t(static_cast<size_t>(width));
      for (int i = 0; i < n; ++i) {
        target.at(l, ch).get_row(i, t.data());
        po1.at(l, ch).get_row(i, &eo[size_t(i) * width]);
        ps1.at(l, ch).get_row(i, &es[size_t(i) * width]);
        for (int j = 0; j < width; ++j) {
          eo[size_t(i) * width + j] -= t[size_t(j)];
          es[size_t(i) * width + j] -= t[size_t(j)];
        }
      }
      const auto& cw = w.at(l, ch);
      EXPECT_LT(weighted_error(eo.data(), n, width, cw.rows, cw.gram, w.lambda),
                weighted_error(es.data(), n, width, cw.rows, cw.gram, w.lambda));
    }
}

// The eval arms on tiny models (GQA, GQA + biases, M-RoPE): the full-rank output-aware patch is
// re-prefill (KL ~ 0), and at rank m its bytes equal the SVD patch's.
TEST(PatchOutput, EvalArmsFullRankIsReprefillAndBytesMatch) {
  for (const char* arch : {"llama", "qwen2", "qwen2vl"}) {
    auto ctx = tiny::context(tiny::model_path(arch), 8000);
    ASSERT_TRUE(ctx);
    const Model& m = ctx->model();
    std::vector<ReuseItem> items;
    if (m.cfg.rope.mrope != MropeMode::None) {
      FrameItemSpec fs;
      fs.n_items = 2;
      fs.grid_h = 3;
      fs.grid_w = 5;
      fs.seed = 3;
      items = frame_items(m, fs);
    } else {
      TokenItemSpec ts;
      ts.n_items = 2;
      ts.antecedent_tokens = 12;
      ts.chunk_tokens = 14;
      ts.query_tokens = 4;
      ts.seed = 3;
      items = random_token_items(m, ts);
    }
    ReuseBenchOptions o;
    o.ranks = {2, kFullRank};
    o.deep_half = false;
    o.output_patches = true;
    auto r = run_reuse_bench(*ctx, items, o);
    ASSERT_TRUE(r.ok()) << r.message();
    const ArmSummary *blind = nullptr, *svd2 = nullptr, *out2 = nullptr, *outf = nullptr;
    for (const auto& a : r->arms) {
      if (a.name == "blind") blind = &a;
      if (a.name == "patch" && a.rank == 2) svd2 = &a;
      if (a.name == "patch_output" && a.rank == 2) out2 = &a;
      if (a.name == "patch_output" && a.rank == kFullRank) outf = &a;
    }
    ASSERT_TRUE(blind && svd2 && out2 && outf) << arch;
    ASSERT_GT(blind->kl, 1e-6) << arch;
    EXPECT_LT(outf->kl, 1e-6 * blind->kl) << arch;
    EXPECT_DOUBLE_EQ(out2->extra_kv_bytes, svd2->extra_kv_bytes) << arch;
    EXPECT_LT(out2->kl, blind->kl) << arch;
  }
}
