#include "reuse/patch.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include "kv/kv_row.h"

namespace kamera {

PatchFactor PatchFactor::from_f32(int layer, int channel, int col_begin, int rows, int cols,
                                  int rank, const float* us, const float* vt, DType dtype) {
  PatchFactor f;
  f.layer = layer;
  f.channel = channel;
  f.col_begin = col_begin;
  f.cols = cols;
  f.rows = rows;
  f.rank = rank;
  f.us = ChannelMatrix(rows, rank, dtype);
  f.vt = ChannelMatrix(rank, cols, dtype);
  for (int i = 0; i < rows; ++i) f.us.set_row(i, us + size_t(i) * rank);
  for (int j = 0; j < rank; ++j) f.vt.set_row(j, vt + size_t(j) * cols);
  return f;
}

std::vector<int> LayerSet::resolve(int n_layers) const {
  std::vector<int> out;
  switch (kind) {
    case Kind::All:
      for (int i = 0; i < n_layers; ++i) out.push_back(i);
      break;
    case Kind::DeepHalf:
      for (int i = n_layers / 2; i < n_layers; ++i) out.push_back(i);
      break;
    case Kind::List: {
      std::set<int> s;
      for (int i : list)
        if (i >= 0 && i < n_layers) s.insert(i);
      out.assign(s.begin(), s.end());
      break;
    }
  }
  return out;
}

std::string LayerSet::describe() const {
  if (kind == Kind::All) return "all";
  if (kind == Kind::DeepHalf) return "deep-half";
  return fmt::format("{}", fmt::join(list, ","));
}

Result<LayerSet> LayerSet::parse(const std::string& s) {
  LayerSet l;
  if (s == "all") return l;
  if (s == "deep-half" || s == "deep_half") {
    l.kind = Kind::DeepHalf;
    return l;
  }
  l.kind = Kind::List;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > 100000)
      return make_error(ErrorCode::InvalidArgument,
                        "layer set '{}': '{}' is not a layer index (use all, deep-half or 0,1,5)",
                        s, item);
    l.list.push_back(int(v));
  }
  if (l.list.empty()) return make_error(ErrorCode::InvalidArgument, "layer set '{}' is empty", s);
  return l;
}

size_t Patch::bytes() const {
  size_t b = 0;
  for (const auto& f : factors) b += f.us.bytes() + f.vt.bytes();
  return b;
}

namespace {

// Full thin SVD with LAPACK sgesdd: a (rows x cols) is overwritten.
Status svd_gesdd(std::vector<float>& a, int rows, int cols, std::vector<float>& u,
                 std::vector<float>& s, std::vector<float>& vt) {
  const int k = std::min(rows, cols);
  u.resize(size_t(rows) * k);
  s.resize(k);
  vt.resize(size_t(k) * cols);
  const lapack_int info = LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', rows, cols, a.data(), cols,
                                         s.data(), u.data(), k, vt.data(), cols);
  if (info != 0)
    return make_error(ErrorCode::Internal, "SVD (sgesdd) failed to converge (info {})", int(info));
  return Status::Ok();
}

// Randomized range finder (Halko, Martinsson, Tropp 2011): Q spans the top m + p directions of
// A after q power iterations; then the small SVD of Q^T A.
Status svd_randomized(const float* a, int rows, int cols, int m, std::vector<float>& u,
                      std::vector<float>& s, std::vector<float>& vt) {
  const int l = std::min(std::min(rows, cols), m + 10);
  std::mt19937 rng(12345);
  std::normal_distribution<float> nd;
  std::vector<float> omega(size_t(cols) * l), y(size_t(rows) * l), z(size_t(cols) * l);
  for (auto& x : omega) x = nd(rng);
  std::vector<float> tau(l);
  auto orthonormalize = [&](std::vector<float>& mat, int r) -> Status {
    if (LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, r, l, mat.data(), l, tau.data()) != 0 ||
        LAPACKE_sorgqr(LAPACK_ROW_MAJOR, r, l, l, mat.data(), l, tau.data()) != 0)
      return make_error(ErrorCode::Internal, "QR in randomized SVD failed");
    return Status::Ok();
  };
  // Y = A Omega
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, l, cols, 1.0f, a, cols, omega.data(),
              l, 0.0f, y.data(), l);
  KAMERA_TRY(orthonormalize(y, rows));
  for (int it = 0; it < 2; ++it) {  // power iterations sharpen the spectrum
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, l, rows, 1.0f, a, cols, y.data(), l,
                0.0f, z.data(), l);
    KAMERA_TRY(orthonormalize(z, cols));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, l, cols, 1.0f, a, cols, z.data(),
                l, 0.0f, y.data(), l);
    KAMERA_TRY(orthonormalize(y, rows));
  }
  // B = Q^T A  (l x cols), SVD of B = Ub S Vt, U = Q Ub
  std::vector<float> b(size_t(l) * cols);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l, cols, rows, 1.0f, y.data(), l, a, cols,
              0.0f, b.data(), cols);
  std::vector<float> ub;
  KAMERA_TRY(svd_gesdd(b, l, cols, ub, s, vt));
  u.resize(size_t(rows) * l);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, l, l, 1.0f, y.data(), l, ub.data(),
              l, 0.0f, u.data(), l);
  return Status::Ok();
}

}  // namespace

Status truncated_svd(const float* a, int rows, int cols, int m, SvdMethod method,
                     std::vector<float>& us, std::vector<float>& vt_out,
                     std::vector<float>* sigma) {
  const int k = std::min(rows, cols);
  if (m == kFullRank) m = k;
  if (m < 1 || m > k)
    return make_error(ErrorCode::InvalidArgument,
                      "rank {} is outside [1, {}] for a {} x {} deficit", m, k, rows, cols);
  // Randomized pays off only when m is much smaller than the matrix; the full spectrum (sigma)
  // needs the exact SVD.
  const bool randomized = method == SvdMethod::Randomized ||
                          (method == SvdMethod::Auto && !sigma && 4 * (m + 10) <= k && k >= 256);
  std::vector<float> u, s, vt;
  int ucols = k;
  if (randomized) {
    KAMERA_TRY(svd_randomized(a, rows, cols, m, u, s, vt));
    ucols = int(s.size());
  } else {
    std::vector<float> work(a, a + size_t(rows) * cols);
    KAMERA_TRY(svd_gesdd(work, rows, cols, u, s, vt));
  }
  us.resize(size_t(rows) * m);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < m; ++j) us[size_t(r) * m + j] = u[size_t(r) * ucols + j] * s[j];
  vt_out.assign(vt.begin(), vt.begin() + size_t(m) * cols);
  if (sigma) *sigma = s;
  return Status::Ok();
}

Result<Patch> form_patch(const ChunkKV& target, const ChunkKV& base, const PatchOptions& opts,
                         std::vector<DeltaStats>* stats) {
  const ChunkKV* one[] = {&target};
  return form_patch_mean(one, base, opts, stats);
}

Result<Patch> form_patch_mean(std::span<const ChunkKV* const> targets, const ChunkKV& canon,
                              const PatchOptions& opts, std::vector<DeltaStats>* stats) {
  if (targets.empty())
    return make_error(ErrorCode::InvalidArgument, "form_patch: no conditioned KV to factor");
  for (const ChunkKV* t : targets)
    if (t->n_tokens != canon.n_tokens || t->layout.n_layers != canon.layout.n_layers ||
        t->layout.channels.size() != canon.layout.channels.size())
      return make_error(
          ErrorCode::InvalidArgument,
          "form_patch: conditioned KV ({} tokens) and canonical ({} tokens) differ in shape",
          t->n_tokens, canon.n_tokens);
  const ChunkKV& cond = *targets[0];
  const float inv_k = 1.0f / float(targets.size());
  if (opts.rank != kFullRank && opts.rank < 1)
    return make_error(ErrorCode::InvalidArgument, "patch rank {} must be >= 1 or full", opts.rank);
  if (!is_kv_dtype(opts.dtype))
    return make_error(ErrorCode::InvalidArgument, "patch factors are stored in f32, f16 or bf16");
  if (opts.per_head && opts.head_dim <= 0)
    return make_error(ErrorCode::InvalidArgument, "per-head patches need the head dim");
  Patch p;
  p.n_tokens = cond.n_tokens;
  p.options = opts;
  const int n = cond.n_tokens;
  const int n_ch = int(cond.layout.channels.size());
  for (int layer : opts.layers.resolve(cond.layout.n_layers)) {
    for (int ch = 0; ch < n_ch; ++ch) {
      const int width = cond.layout.channels[ch].width;
      std::vector<float> delta(size_t(n) * width), row_c(width), row_k(width);
      double dn = 0, cn = 0;
      std::vector<float> acc(width);
      for (int i = 0; i < n; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (const ChunkKV* t : targets) {
          t->at(layer, ch).get_row(i, row_c.data());
          for (int j = 0; j < width; ++j) acc[j] += row_c[j];
        }
        if (targets.size() > 1)
          for (int j = 0; j < width; ++j) row_c[j] = acc[j] * inv_k;
        canon.at(layer, ch).get_row(i, row_k.data());
        for (int j = 0; j < width; ++j) {
          const float d = row_c[j] - row_k[j];
          delta[size_t(i) * width + j] = d;
          dn += double(d) * d;
          cn += double(row_c[j]) * row_c[j];
        }
      }
      if (stats) {
        DeltaStats st;
        st.layer = layer;
        st.channel = ch;
        st.delta_norm = std::sqrt(dn);
        st.conditioned_norm = std::sqrt(cn);
        std::vector<float> us, vt;
        KAMERA_TRY(truncated_svd(delta.data(), n, width, kFullRank, SvdMethod::Gesdd, us, vt,
                                 &st.singular_values));
        double total = 0, acc = 0;
        for (float s : st.singular_values) total += double(s) * s;
        st.rank90 = 0;  // 0 when the deficit is exactly zero (e.g. the first layer)
        for (float s : st.singular_values) {
          if (!(total > 0) || acc >= 0.9 * total) break;
          acc += double(s) * s;
          ++st.rank90;
        }
        stats->push_back(std::move(st));
      }
      const int slices = opts.per_head ? width / opts.head_dim : 1;
      const int cols = width / slices;
      for (int h = 0; h < slices; ++h) {
        std::vector<float> block(size_t(n) * cols);
        for (int i = 0; i < n; ++i)
          std::copy_n(&delta[size_t(i) * width + h * cols], cols, &block[size_t(i) * cols]);
        const int k = std::min(n, cols);
        const int m = opts.rank == kFullRank ? k
                      : opts.cap_rank        ? std::min(opts.rank, k)
                                             : opts.rank;
        if (m > k)
          return make_error(
              ErrorCode::InvalidArgument,
              "patch rank {} exceeds min(tokens {}, width {}) of layer {} channel '{}'", m, n, cols,
              layer, cond.layout.channels[ch].name);
        std::vector<float> us, vt;
        KAMERA_TRY(truncated_svd(block.data(), n, cols, m, opts.method, us, vt));
        p.factors.push_back(PatchFactor::from_f32(layer, ch, h * cols, n, cols, m, us.data(),
                                                  vt.data(), opts.dtype));
      }
    }
  }
  return p;
}

namespace {

// f32 copies of a factor (bf16 storage is expanded once per apply).
void factor_f32(const PatchFactor& f, std::vector<float>& us, std::vector<float>& vt) {
  us.resize(size_t(f.rows) * f.rank);
  vt.resize(size_t(f.rank) * f.cols);
  for (int i = 0; i < f.rows; ++i) f.us.get_row(i, &us[size_t(i) * f.rank]);
  for (int j = 0; j < f.rank; ++j) f.vt.get_row(j, &vt[size_t(j) * f.cols]);
}

}  // namespace

// Per (layer, channel): the canonical rows widened to f32, + U S V^T of every factor in f32, then
// each row rounded once into the pool's dtype (f32: copied; the same arithmetic as before).
void write_patched_rows(const ChunkKV& canon, const Patch* patch, KvPool& pool, SeqId seq,
                        int begin, std::vector<float>& scratch) {
  const KvLayout& l = pool.layout();
  const int n = canon.n_tokens;
  KAMERA_ASSERT(begin >= 0 && begin + n <= pool.n_tokens(seq));
  const DType dt = pool.dtype();
  const size_t eb = kv_elem_bytes(dt);
  std::vector<float> us, vt, rows;
  static const std::vector<PatchFactor> kNone;
  const std::vector<PatchFactor>& factors = patch ? patch->factors : kNone;
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (int ch = 0; ch < int(l.channels.size()); ++ch) {
      const int width = l.channels[ch].width;
      auto* arena = static_cast<uint8_t*>(pool.arena_data(layer, ch));
      const auto slots = pool.slots(seq, layer);  // window layers: rows given (insert) asserted
      const ChannelMatrix& cm = canon.at(layer, ch);
      rows.resize(size_t(n) * width);  // n x width, f32
      for (int i = 0; i < n; ++i) cm.get_row(i, rows.data() + size_t(i) * width);
      // + U S V^T of every factor on this (layer, channel)
      for (const PatchFactor& f : factors) {
        if (f.layer != layer || f.channel != ch) continue;
        factor_f32(f, us, vt);
        if (scratch.size() < size_t(n) * f.cols) scratch.resize(size_t(n) * f.cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, f.cols, f.rank, 1.0f, us.data(),
                    f.rank, vt.data(), f.cols, 0.0f, scratch.data(), f.cols);
        for (int i = 0; i < n; ++i) {
          float* dst = rows.data() + size_t(i) * width + f.col_begin;
          const float* d = scratch.data() + size_t(i) * f.cols;
          for (int j = 0; j < f.cols; ++j) dst[j] += d[j];
        }
      }
      for (int i = 0; i < n; ++i) {
        KAMERA_ASSERT(slots[begin + i] >= 0);
        kv_store_row(dt, rows.data() + size_t(i) * width,
                     arena + size_t(slots[begin + i]) * width * eb, width);
      }
    }
}

void apply_patch(const Patch& patch, ChunkKV& kv) {
  std::vector<float> us, vt, d, row;
  for (const PatchFactor& f : patch.factors) {
    ChannelMatrix& m = kv.at(f.layer, f.channel);
    factor_f32(f, us, vt);
    d.resize(size_t(f.rows) * f.cols);
    // same arithmetic as write_patched_rows: the product first, then one add per element (and,
    // for f16/bf16 storage, one rounding of the sum)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, f.rows, f.cols, f.rank, 1.0f, us.data(),
                f.rank, vt.data(), f.cols, 0.0f, d.data(), f.cols);
    row.resize(size_t(m.cols()));
    for (int i = 0; i < f.rows; ++i) {
      float* dst = m.dtype() == DType::F32 ? m.f32_data() + size_t(i) * m.cols() : row.data();
      if (m.dtype() != DType::F32) m.get_row(i, dst);
      for (int j = 0; j < f.cols; ++j) dst[f.col_begin + j] += d[size_t(i) * f.cols + j];
      if (m.dtype() != DType::F32) m.set_row(i, dst);
    }
  }
}

}  // namespace kamera
