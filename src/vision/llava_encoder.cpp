#include "vision/llava_encoder.h"

#include "ops/kernels.h"
#include "ops/vision_ops.h"
#include "vision/llava_ldp.h"

namespace kamera {

// x_ = the patches' embeddings and the class token (last in llama.cpp's order, first in Hugging
// Face's), each plus its position, then the pre-layernorm.
void LlavaVisionEncoder::embed(const std::vector<float>& patches) {
  const LlavaVisionConfig& c = m_.cfg;
  const int n = c.n_patches(), d = c.dim;
  const bool cls_first = order_ == LlavaClassOrder::kHuggingFace;
  float* patch_rows = x_.data() + (cls_first ? d : 0);
  m_.w.patch.apply(patches.data(), n, patch_rows, pool_);  // the Conv2d (no bias)
  float* cls_row = x_.data() + (cls_first ? 0 : size_t(n) * d);
  std::copy(m_.w.cls.begin(), m_.w.cls.end(), cls_row);
  add_inplace(x_.data(), m_.w.pos.data(), int64_t(n + 1) * d);
  layernorm(x_.data(), m_.w.pre_ln_w.data(), m_.w.pre_ln_b.data(), x_.data(), n + 1, d, c.eps,
            pool_);
}

// One pre-LN CLIP block over the n + 1 rows; x_ is updated in place.
void LlavaVisionEncoder::block(const LlavaVisionWeights::Layer& L) {
  const LlavaVisionConfig& c = m_.cfg;
  const int n = c.n_patches() + 1;
  const int64_t nd = int64_t(n) * c.dim;
  layernorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.q.apply(nrm_.data(), n, q_.data(), pool_);
  L.k.apply(nrm_.data(), n, k_.data(), pool_);
  L.v.apply(nrm_.data(), n, v_.data(), pool_);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, c.n_heads, c.dim / c.n_heads,
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool_);
  L.o.apply(att_.data(), n, nrm_.data(), pool_);
  add_inplace(x_.data(), nrm_.data(), nd);
  layernorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, c.dim, c.eps, pool_);
  L.fc1.apply(nrm_.data(), n, h1_.data(), pool_);
  if (c.gelu_tanh)
    gelu_tanh_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  else
    quick_gelu_inplace(h1_.data(), int64_t(n) * c.ffn_dim, pool_);
  L.fc2.apply(h1_.data(), n, att_.data(), pool_);
  add_inplace(x_.data(), att_.data(), nd);
}

// Rows 1 .. n of x_ through the MLP projector (MobileVLM's: then its blocks, vision/llava_ldp.h).
std::vector<float> LlavaVisionEncoder::project() const {
  const LlavaVisionConfig& c = m_.cfg;
  const int r = c.n_patches(), o = c.out_dim;
  std::vector<float> h(size_t(r) * o), out(size_t(r) * o);
  m_.w.mm0.apply(x_.data() + c.dim, r, h.data(), pool_);
  gelu_tanh_inplace(h.data(), int64_t(r) * o, pool_);
  m_.w.mm2.apply(h.data(), r, out.data(), pool_);
  if (c.projector == LlavaProjector::kLdpV2) return ldpv2_project(m_, out);
  if (c.projector == LlavaProjector::kLdp) return ldp_project(m_, out, pool_);
  return out;
}

Result<std::vector<float>> LlavaVisionEncoder::encode(const Image& picture) {
  const LlavaVisionConfig& c = m_.cfg;
  KAMERA_ASSIGN_OR_RETURN(const std::vector<float> patches,
                          siglip_patches(picture, c.vit(), "llava"));
  const int n = c.n_patches() + 1, d = c.dim;
  for (auto* v : {&x_, &nrm_, &q_, &k_, &v_, &att_}) v->resize(size_t(n) * d);
  h1_.resize(size_t(n) * c.ffn_dim);
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) members_[size_t(i)] = i;
  offsets_ = {0, n};
  embed(patches);
  for (int l = 0; l < c.layers; ++l) {
    if (stop_ && stop_())
      return make_error(ErrorCode::InvalidArgument, "llava vision encode: stopped before its end");
    block(m_.w.layers[size_t(l)]);
  }
  return project();
}

}  // namespace kamera
