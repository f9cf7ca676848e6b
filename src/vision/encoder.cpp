#include "vision/encoder.h"

#include <cmath>
#include <cstring>
#include <random>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "ops/gemm.h"
#include "ops/kernels.h"

namespace kamera {

Status VisionConfig::validate() const {
  if (image_size <= 0 || patch <= 0 || image_size % patch != 0)
    return make_error(ErrorCode::InvalidArgument,
                      "vision: image size {} is not a multiple of the patch size {}", image_size,
                      patch);
  if (merge <= 0 || grid() % merge != 0)
    return make_error(ErrorCode::InvalidArgument,
                      "vision: the patch grid {} is not a multiple of the merge size {}", grid(),
                      merge);
  if (dim <= 0 || n_heads <= 0 || dim % n_heads != 0)
    return make_error(ErrorCode::InvalidArgument,
                      "vision: width {} is not a multiple of the head count {}", dim, n_heads);
  if (n_layers < 0 || n_layers > 64 || ffn_dim <= 0 || merger_dim <= 0 || out_dim <= 0)
    return make_error(ErrorCode::InvalidArgument,
                      "vision: bad shape (layers {}, ffn {}, merger {}, out {})", n_layers, ffn_dim,
                      merger_dim, out_dim);
  if (!(eps > 0.0f))
    return make_error(ErrorCode::InvalidArgument, "vision: rms epsilon must be positive");
  return Status::Ok();
}

namespace {

namespace gk = gguf_key;
using TensorSpec = VisionTensor;

std::vector<TensorSpec> tensor_specs(const VisionConfig& c, VisionWeights& w) {
  const int64_t d = c.dim, f = c.ffn_dim, pv = c.patch_values(), md = c.merger_dim;
  const int64_t mi = int64_t(c.merge) * c.merge * d;
  std::vector<TensorSpec> s = {{"v.patch_embd.weight", {pv, d}, &w.patch_w},
                               {"v.patch_embd.bias", {d}, &w.patch_b},
                               {"v.position_embd.weight", {d, c.n_patches()}, &w.pos}};
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string p = "v.blk." + std::to_string(i) + ".";
    s.push_back({p + "ln1.weight", {d}, &L.ln1});
    s.push_back({p + "attn_q.weight", {d, d}, &L.wq});
    s.push_back({p + "attn_q.bias", {d}, &L.bq});
    s.push_back({p + "attn_k.weight", {d, d}, &L.wk});
    s.push_back({p + "attn_k.bias", {d}, &L.bk});
    s.push_back({p + "attn_v.weight", {d, d}, &L.wv});
    s.push_back({p + "attn_v.bias", {d}, &L.bv});
    s.push_back({p + "attn_out.weight", {d, d}, &L.wo});
    s.push_back({p + "attn_out.bias", {d}, &L.bo});
    s.push_back({p + "ln2.weight", {d}, &L.ln2});
    s.push_back({p + "ffn_gate.weight", {d, f}, &L.w_gate});
    s.push_back({p + "ffn_up.weight", {d, f}, &L.w_up});
    s.push_back({p + "ffn_down.weight", {f, d}, &L.w_down});
  }
  s.push_back({"v.post_ln.weight", {d}, &w.post_ln});
  s.push_back({"mm.0.weight", {mi, md}, &w.mm1_w});
  s.push_back({"mm.0.bias", {md}, &w.mm1_b});
  s.push_back({"mm.2.weight", {md, c.out_dim}, &w.mm2_w});
  s.push_back({"mm.2.bias", {c.out_dim}, &w.mm2_b});
  return s;
}

int64_t elements(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t e : ne) n *= e;
  return n;
}

bool is_norm(const std::string& name) {
  return name.find("ln") != std::string::npos;
}

}  // namespace

std::vector<VisionTensor> VisionModel::tensors() {
  return tensor_specs(cfg, w);
}

Status VisionModel::check_shapes() const {
  KAMERA_TRY(cfg.validate());
  VisionWeights copy = w;
  for (const TensorSpec& t : tensor_specs(cfg, copy))
    if (int64_t(t.data->size()) != elements(t.ne))
      return make_error(ErrorCode::InvalidArgument,
                        "vision: tensor {} has {} values, the config implies {}", t.name,
                        t.data->size(), elements(t.ne));
  return Status::Ok();
}

Result<VisionModel> VisionModel::load(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return f.error();
  const GgufFile& g = **f;
  if (g.get_string(gk::kArchitecture).value_or("") != "clip")
    return make_error(ErrorCode::CorruptData, "{}: not a vision encoder file ({} is not 'clip')",
                      path, gk::kArchitecture);
  if (g.get_string(gk::kClipProjectorType).value_or("") != "kamera-minivl")
    return make_error(ErrorCode::Unsupported,
                      "{}: projector type '{}' is not supported (kamera-minivl)", path,
                      g.get_string(gk::kClipProjectorType).value_or(""));
  VisionModel m;
  VisionConfig& c = m.cfg;
  auto need = [&](const std::string& key, int* out) -> Status {
    auto v = g.get_int(key);
    if (!v || *v <= 0 || *v > (1 << 20))
      return make_error(ErrorCode::CorruptData, "{}: missing or bad {}", path, key);
    *out = int(*v);
    return Status::Ok();
  };
  KAMERA_TRY(need(gk::kVisionImageSize, &c.image_size));
  KAMERA_TRY(need(gk::kVisionPatchSize, &c.patch));
  KAMERA_TRY(need(gk::kVisionEmbeddingLength, &c.dim));
  KAMERA_TRY(need(gk::kVisionBlockCount, &c.n_layers));
  KAMERA_TRY(need(gk::kVisionHeadCount, &c.n_heads));
  KAMERA_TRY(need(gk::kVisionFeedForwardLength, &c.ffn_dim));
  KAMERA_TRY(need(gk::kVisionSpatialMergeSize, &c.merge));
  KAMERA_TRY(need(gk::kVisionMergerLength, &c.merger_dim));
  KAMERA_TRY(need(gk::kVisionProjectionDim, &c.out_dim));
  c.eps = float(g.get_float(gk::kVisionLayerNormEps).value_or(1e-5));
  if (Status s = c.validate(); !s.ok())
    return make_error(ErrorCode::CorruptData, "{}: {}", path, s.message());
  for (const TensorSpec& t : tensor_specs(c, m.w)) {
    const GgufTensor* gt = g.find_tensor(t.name);
    if (!gt) return make_error(ErrorCode::CorruptData, "{}: tensor {} is missing", path, t.name);
    if (gt->ne != t.ne)
      return make_error(ErrorCode::CorruptData, "{}: tensor {} has the wrong shape for this config",
                        path, t.name);
    auto v = g.read_f32(*gt);
    if (!v.ok()) return v.error();
    *t.data = std::move(*v);
  }
  const size_t expected = tensor_specs(c, m.w).size();
  if (g.tensors().size() != expected)
    return make_error(ErrorCode::CorruptData,
                      "{}: {} tensors, a vision encoder of this config has {}", path,
                      g.tensors().size(), expected);
  return m;
}

Status VisionModel::write_gguf(const std::string& path) const {
  KAMERA_TRY(check_shapes());
  GgufWriter w;
  w.set_string(gk::kArchitecture, "clip");
  w.set_string(gk::kName, "kamera-minivl-vision");
  w.set_string(gk::kClipProjectorType, "kamera-minivl");
  w.set_bool(gk::kClipHasVisionEncoder, true);
  w.set_u32(gk::kVisionImageSize, uint32_t(cfg.image_size));
  w.set_u32(gk::kVisionPatchSize, uint32_t(cfg.patch));
  w.set_u32(gk::kVisionEmbeddingLength, uint32_t(cfg.dim));
  w.set_u32(gk::kVisionBlockCount, uint32_t(cfg.n_layers));
  w.set_u32(gk::kVisionHeadCount, uint32_t(cfg.n_heads));
  w.set_u32(gk::kVisionFeedForwardLength, uint32_t(cfg.ffn_dim));
  w.set_u32(gk::kVisionSpatialMergeSize, uint32_t(cfg.merge));
  w.set_u32(gk::kVisionMergerLength, uint32_t(cfg.merger_dim));
  w.set_u32(gk::kVisionProjectionDim, uint32_t(cfg.out_dim));
  w.set_f32(gk::kVisionLayerNormEps, cfg.eps);
  w.set_f32_array(gk::kVisionImageMean, {0.5f, 0.5f, 0.5f});
  w.set_f32_array(gk::kVisionImageStd, {0.5f, 0.5f, 0.5f});
  VisionWeights copy = this->w;
  for (const TensorSpec& t : tensor_specs(cfg, copy)) {
    const std::vector<float> data = *t.data;
    w.add_tensor(t.name, t.ne, DType::F32, [data](float* dst) {
      std::memcpy(dst, data.data(), data.size() * sizeof(float));
    });
  }
  return w.write(path);
}

VisionModel VisionModel::random(const VisionConfig& cfg, uint64_t seed) {
  VisionModel m;
  m.cfg = cfg;
  std::mt19937_64 rng(seed);
  for (const TensorSpec& t : tensor_specs(m.cfg, m.w)) {
    const int64_t n = elements(t.ne);
    t.data->resize(size_t(n));
    const double fan_in = double(t.ne[0]);
    for (float& v : *t.data) {
      const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
      v = is_norm(t.name)    ? float(1.0 + 0.1 * u)
          : t.ne.size() == 1 ? float(0.05 * u)
                             : float(u * std::sqrt(3.0 / fan_in));
    }
  }
  return m;
}

void VisionEncoder::patchify(const VisionConfig& c, const uint8_t* rgb, float* out) {
  const int g = c.grid(), p = c.patch, S = c.image_size;
  for (int gy = 0; gy < g; ++gy)
    for (int gx = 0; gx < g; ++gx) {
      float* o = out + size_t(gy * g + gx) * c.patch_values();
      for (int py = 0; py < p; ++py)
        for (int px = 0; px < p; ++px)
          for (int ch = 0; ch < 3; ++ch) {
            const int y = gy * p + py, x = gx * p + px;
            const float v = float(rgb[(size_t(y) * S + x) * 3 + ch]) / 255.0f;
            *o++ = (v - 0.5f) / 0.5f;
          }
    }
}

Status VisionEncoder::encode(const uint8_t* rgb, std::vector<float>* out) {
  const VisionConfig& c = m_.cfg;
  const VisionWeights& w = m_.w;
  const int n = c.n_patches(), d = c.dim, f = c.ffn_dim, H = c.n_heads, hd = c.head_dim();
  if (w.layers.size() != size_t(c.n_layers) || w.patch_w.size() != size_t(d) * c.patch_values())
    return make_error(ErrorCode::InvalidArgument, "vision: weights do not match the config");
  auto grow = [](std::vector<float>& v, size_t k) {
    if (v.size() < k) v.resize(k);
  };
  grow(x_, size_t(n) * d);
  grow(n_, size_t(n) * std::max(d, c.patch_values()));
  grow(q_, size_t(n) * d);
  grow(k_, size_t(n) * d);
  grow(v_, size_t(n) * d);
  grow(att_, size_t(n) * d);
  grow(tmp_, size_t(n) * d);
  grow(gate_, size_t(n) * f);
  grow(up_, size_t(n) * f);
  grow(scores_, size_t(n));

  patchify(c, rgb, n_.data());
  matmul_wt(n_.data(), w.patch_w.data(), w.patch_b.data(), x_.data(), n, c.patch_values(), d);
  add_inplace(x_.data(), w.pos.data(), int64_t(n) * d);
  const float scale = 1.0f / std::sqrt(float(hd));
  for (const auto& L : w.layers) {
    rmsnorm(x_.data(), L.ln1.data(), n_.data(), n, d, c.eps);
    matmul_wt(n_.data(), L.wq.data(), L.bq.data(), q_.data(), n, d, d);
    matmul_wt(n_.data(), L.wk.data(), L.bk.data(), k_.data(), n, d, d);
    matmul_wt(n_.data(), L.wv.data(), L.bv.data(), v_.data(), n, d, d);
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < n; ++i) {
        const float* qi = q_.data() + size_t(i) * d + h * hd;
        for (int j = 0; j < n; ++j)
          scores_[size_t(j)] = dot(qi, k_.data() + size_t(j) * d + h * hd, hd) * scale;
        softmax(scores_.data(), n);
        float* o = att_.data() + size_t(i) * d + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int j = 0; j < n; ++j)
          axpy(scores_[size_t(j)], v_.data() + size_t(j) * d + h * hd, o, hd);
      }
    matmul_wt(att_.data(), L.wo.data(), L.bo.data(), tmp_.data(), n, d, d);
    add_inplace(x_.data(), tmp_.data(), int64_t(n) * d);
    rmsnorm(x_.data(), L.ln2.data(), n_.data(), n, d, c.eps);
    matmul_wt(n_.data(), L.w_gate.data(), nullptr, gate_.data(), n, d, f);
    matmul_wt(n_.data(), L.w_up.data(), nullptr, up_.data(), n, d, f);
    silu_mul(gate_.data(), up_.data(), int64_t(n) * f);
    matmul_wt(gate_.data(), L.w_down.data(), nullptr, tmp_.data(), n, f, d);
    add_inplace(x_.data(), tmp_.data(), int64_t(n) * d);
  }
  rmsnorm(x_.data(), w.post_ln.data(), n_.data(), n, d, c.eps);

  // 2 x 2 merge: token (ty, tx) concatenates patches (ty*m + dy, tx*m + dx), (dy, dx) row-major.
  const int g = c.grid(), m = c.merge, tg = c.token_grid(), nt = c.n_tokens();
  const int mi = m * m * d;
  grow(merged_, size_t(nt) * mi);
  grow(hid_, size_t(nt) * c.merger_dim);
  for (int ty = 0; ty < tg; ++ty)
    for (int tx = 0; tx < tg; ++tx) {
      float* dst = merged_.data() + size_t(ty * tg + tx) * mi;
      for (int dy = 0; dy < m; ++dy)
        for (int dx = 0; dx < m; ++dx) {
          const int patch = (ty * m + dy) * g + (tx * m + dx);
          std::memcpy(dst, n_.data() + size_t(patch) * d, sizeof(float) * d);
          dst += d;
        }
    }
  matmul_wt(merged_.data(), w.mm1_w.data(), w.mm1_b.data(), hid_.data(), nt, mi, c.merger_dim);
  for (size_t i = 0; i < size_t(nt) * c.merger_dim; ++i) {
    const float v = hid_[i];
    hid_[i] = v / (1.0f + std::exp(-v));
  }
  out->resize(size_t(nt) * c.out_dim);
  matmul_wt(hid_.data(), w.mm2_w.data(), w.mm2_b.data(), out->data(), nt, c.merger_dim, c.out_dim);
  return Status::Ok();
}

}  // namespace kamera
