// The SigLIP encoder's tensor table, loader loop and forward (vision/siglip.h).
#include "vision/siglip.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "gguf/gguf.h"
#include "ops/kernels.h"
#include "ops/vision_ops.h"

namespace kamera {

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

}  // namespace

void clip_linear(std::vector<ClipTensor>& s, const std::string& name, QwenLinear& l, int in,
                 int out, std::vector<int64_t> ne) {
  l.in = in;
  l.out = out;
  s.push_back({name + ".weight", std::move(ne), nullptr, &l});
  s.push_back({name + ".bias", {out}, &l.b, nullptr});
}

void clip_vector(std::vector<ClipTensor>& s, const std::string& name, std::vector<float>& v,
                 std::vector<int64_t> ne) {
  s.push_back({name, std::move(ne), &v, nullptr});
}

void siglip_tensors(const SiglipDims& c, SiglipWeights& w, std::vector<ClipTensor>& s) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch;
  auto linear = [&s](const std::string& name, QwenLinear& l, int in, int out,
                     std::vector<int64_t> ne) { clip_linear(s, name, l, in, out, std::move(ne)); };
  auto vec = [&s](const std::string& name, std::vector<float>& v, std::vector<int64_t> ne) {
    clip_vector(s, name, v, std::move(ne));
  };
  linear("v.patch_embd", w.patch, c.patch_values(), c.dim, {p, p, 3, d});
  vec("v.position_embd.weight", w.pos, {d, int64_t(c.n_patches())});
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string b = "v.blk." + std::to_string(i) + ".";
    vec(b + "ln1.weight", L.ln1_w, {d});
    vec(b + "ln1.bias", L.ln1_b, {d});
    linear(b + "attn_q", L.q, c.dim, c.dim, {d, d});
    linear(b + "attn_k", L.k, c.dim, c.dim, {d, d});
    linear(b + "attn_v", L.v, c.dim, c.dim, {d, d});
    linear(b + "attn_out", L.o, c.dim, c.dim, {d, d});
    vec(b + "ln2.weight", L.ln2_w, {d});
    vec(b + "ln2.bias", L.ln2_b, {d});
    linear(b + "ffn_up", L.fc1, c.dim, c.ffn_dim, {d, f});
    linear(b + "ffn_down", L.fc2, c.ffn_dim, c.dim, {f, d});
  }
  vec("v.post_ln.weight", w.post_ln_w, {d});
  vec("v.post_ln.bias", w.post_ln_b, {d});
}

Status load_clip_tensors(const GgufFile& g, const std::string& path,
                         const std::vector<ClipTensor>& specs, const char* family,
                         std::span<const std::string_view> own_prefixes) {
  for (const ClipTensor& t : specs) {
    const GgufTensor* gt = g.find_tensor(t.name);
    if (!gt) return make_error(ErrorCode::CorruptData, "{}: tensor {} is missing", path, t.name);
    if (gt->ne != t.ne)
      return make_error(ErrorCode::CorruptData, "{}: tensor {} has shape {}, this config needs {}",
                        path, t.name, shape_str(gt->ne), shape_str(t.ne));
    if (t.lin) {  // the file's bytes in its type, in the mapping the model keeps
      auto b = Weight::borrow(gt->type, gt->data, t.lin->out, t.lin->in);
      if (!b.ok()) return make_error(b.code(), "{}: tensor {}: {}", path, t.name, b.message());
      t.lin->w = std::move(b.value());
      continue;
    }
    KAMERA_ASSIGN_OR_RETURN(*t.vec, g.read_f32(*gt));
  }
  size_t own = g.tensors().size();
  if (!own_prefixes.empty())
    own = size_t(std::count_if(g.tensors().begin(), g.tensors().end(), [&](const GgufTensor& t) {
      return std::any_of(own_prefixes.begin(), own_prefixes.end(),
                         [&](std::string_view p) { return t.name.starts_with(p); });
    }));
  if (own != specs.size())
    return make_error(ErrorCode::Unsupported,
                      "{}: {} tensors, a {} tower of this config has {} (kamera would ignore "
                      "the others)",
                      path, own, family, specs.size());
  return Status::Ok();
}

std::array<uint64_t, 2> clip_fingerprint(const char* projector, std::span<const int> ints,
                                         std::span<const float> reals,
                                         const std::vector<ClipTensor>& specs) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, projector, std::strlen(projector));
  XXH3_128bits_update(st, ints.data(), ints.size_bytes());
  XXH3_128bits_update(st, reals.data(), reals.size_bytes());
  for (const ClipTensor& t : specs) {
    if (t.lin) {
      const uint32_t type = uint32_t(t.lin->w.type());
      XXH3_128bits_update(st, &type, sizeof(type));
      if (t.lin->w.bytes() > 0) XXH3_128bits_update(st, t.lin->w.raw(), t.lin->w.bytes());
      continue;
    }
    const uint64_t n = t.vec->size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, t.vec->data(), n * sizeof(float));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

Status validate_siglip(const SiglipDims& d, const char* family) {
  auto bad = [family](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{} vision: {}", family, what);
  };
  if (d.dim < 4 || d.n_heads < 1 || d.dim % d.n_heads != 0)
    return bad(fmt::format("width {} with {} heads", d.dim, d.n_heads));
  if (d.n_layers < 0 || d.ffn_dim < 1)
    return bad(fmt::format("layers {}, ffn {}", d.n_layers, d.ffn_dim));
  if (!(d.eps > 0.0f)) return bad("layer norm epsilon must be positive");
  for (int c = 0; c < 3; ++c)
    if (!(d.image_std[size_t(c)] > 0.0f)) return bad("image std must be positive");
  return Status::Ok();
}

Result<std::vector<float>> siglip_patches(const Image& img, const SiglipDims& c,
                                          const char* family) {
  if (img.width != c.image_size || img.height != c.image_size ||
      img.rgb.size() != size_t(img.pixels()) * 3)
    return make_error(ErrorCode::InvalidArgument,
                      "{} vision: the tower reads {} x {} pixels, this picture is {} x {}", family,
                      c.image_size, c.image_size, img.width, img.height);
  const int p = c.patch, side = c.side();
  std::vector<float> out(size_t(c.n_patches()) * c.patch_values());
  for (int gy = 0; gy < side; ++gy)
    for (int gx = 0; gx < side; ++gx) {
      float* dst = out.data() + (size_t(gy) * side + gx) * c.patch_values();
      for (int ch = 0; ch < 3; ++ch)
        for (int py = 0; py < p; ++py)
          for (int px = 0; px < p; ++px) {
            const float t = float(img.at(gx * p + px, gy * p + py)[ch]) / 255.0f;
            dst[(size_t(ch) * p + py) * p + px] =
                (t - c.image_mean[size_t(ch)]) / c.image_std[size_t(ch)];
          }
    }
  return out;
}

// One pre-LN block over the n patches; x_ [n x dim] is updated in place.
void SiglipEncoder::block(const SiglipWeights::Layer& L, int n) {
  const SiglipDims& c = d_;
  const int64_t nd = int64_t(n) * c.dim;
  layernorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, c.n_heads, c.head_dim(),
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  add_inplace(x_.data(), nrm_.data(), nd);
  layernorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.fc1.apply(nrm_.data(), n, h1_.data(), pool_);
  gelu_tanh_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  L.fc2.apply(h1_.data(), n, att_.data(), pool_);
  add_inplace(x_.data(), att_.data(), nd);
}

Result<std::vector<float>> SiglipEncoder::encode(const Image& img,
                                                 const std::function<bool()>& stop,
                                                 const char* family) {
  const SiglipDims& c = d_;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> patches, siglip_patches(img, c, family));
  const int n = c.n_patches(), d = c.dim;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_}) v->resize(size_t(n) * d);
  h1_.resize(size_t(n) * c.ffn_dim);
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) members_[size_t(i)] = i;
  offsets_ = {0, n};
  w_.patch.apply(patches.data(), n, x_.data(), pool_);  // the Conv2d, bias included
  add_inplace(x_.data(), w_.pos.data(), int64_t(n) * d);
  for (const auto& L : w_.layers) {
    if (stop && stop())
      return make_error(ErrorCode::InvalidArgument, "{} vision encode: stopped before its end",
                        family);
    block(L, n);
  }
  layernorm(x_.data(), w_.post_ln_w.data(), w_.post_ln_b.data(), x_.data(), n, d, c.eps, pool_);
  return std::vector<float>(x_.begin(), x_.begin() + std::ptrdiff_t(size_t(n) * d));
}

}  // namespace kamera
