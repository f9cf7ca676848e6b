// The Qwen audio towers' encoder layers (audio/audio_layers.h).
#include "audio/audio_layers.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "ops/kernels.h"
#include "ops/vision_ops.h"
#include "vision/clip_keys.h"

namespace kamera {

Result<std::string> audio_projector_type(const GgufFile& g, const std::string& path) {
  namespace gk = gguf_key;
  if (g.get_string(gk::kArchitecture).value_or("") != "clip")
    return make_error(ErrorCode::CorruptData, "{}: not an mmproj file ({} is not 'clip')", path,
                      gk::kArchitecture);
  if (!g.get_bool(gk::kClipHasAudioEncoder).value_or(false))
    return make_error(ErrorCode::Unsupported, "{}: the file has no audio encoder", path);
  std::string type = g.get_string(gk::kAudioProjectorType).value_or("");
  return type.empty() ? g.get_string(gk::kClipProjectorType).value_or("") : type;
}

Result<std::string> mmproj_audio_projector_type(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  auto type = audio_projector_type(*file, path);
  if (!type.ok() && type.code() == ErrorCode::Unsupported) return std::string();
  return type;
}

Status read_audio_tower_dims(const GgufFile& g, const std::string& path, const char* family,
                             AudioTowerDims* c) {
  namespace gk = gguf_key;
  KAMERA_TRY(clip_count(g, path, gk::kAudioNumMelBins, &c->n_mels, 1, 1024));
  KAMERA_TRY(clip_count(g, path, gk::kAudioEmbeddingLength, &c->dim, 4, 16384));
  KAMERA_TRY(clip_count(g, path, gk::kAudioBlockCount, &c->n_layers, 0, 256));
  KAMERA_TRY(clip_count(g, path, gk::kAudioHeadCount, &c->n_heads, 1, 1024));
  KAMERA_TRY(clip_count(g, path, gk::kAudioFeedForwardLength, &c->ffn_dim, 1, 65536));
  KAMERA_TRY(clip_count(g, path, gk::kAudioProjectionDim, &c->out_dim, 1, 65536));
  c->eps = float(g.get_float(gk::kAudioLayerNormEps).value_or(c->eps));
  const GgufTensor* pos = g.find_tensor("a.position_embd.weight");
  if (!pos || pos->ne.size() != 2)
    return make_error(ErrorCode::CorruptData, "{}: tensor a.position_embd.weight is missing", path);
  c->n_pos = int(std::min<int64_t>(pos->ne[1], 1 << 20));
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}: {}", path, family, what);
  };
  if (c->dim % c->n_heads != 0)
    return bad(fmt::format("width {} with {} heads", c->dim, c->n_heads));
  if (c->n_pos < 1) return bad("an empty position table");
  if (!(c->eps > 0.0f)) return bad("layer norm epsilon must be positive");
  return Status::Ok();
}

void audio_layer_tensors(std::vector<ClipTensor>& s, AudioLayer& L, int i, const AudioLayerDims& d,
                         bool k_bias) {
  const int64_t w = d.dim, f = d.ffn_dim;
  const std::string b = "a.blk." + std::to_string(i) + ".";
  auto vec = [&s](const std::string& name, std::vector<float>& v, int64_t n) {
    clip_vector(s, name, v, {n});
  };
  vec(b + "ln1.weight", L.ln1_w, w);
  vec(b + "ln1.bias", L.ln1_b, w);
  clip_linear(s, b + "attn_q", L.q, d.dim, d.dim, {w, w});
  if (k_bias) {
    clip_linear(s, b + "attn_k", L.k, d.dim, d.dim, {w, w});
  } else {  // Whisper's k_proj: no bias
    L.k.in = L.k.out = d.dim;
    s.push_back({b + "attn_k.weight", {w, w}, nullptr, &L.k});
  }
  clip_linear(s, b + "attn_v", L.v, d.dim, d.dim, {w, w});
  clip_linear(s, b + "attn_out", L.o, d.dim, d.dim, {w, w});
  vec(b + "ln2.weight", L.ln2_w, w);
  vec(b + "ln2.bias", L.ln2_b, w);
  clip_linear(s, b + "ffn_up", L.fc1, d.dim, d.ffn_dim, {w, f});
  clip_linear(s, b + "ffn_down", L.fc2, d.ffn_dim, d.dim, {f, w});
}

// One pre-LN block over the n positions of x (n x dim), updated in place.
void AudioLayers::block(const AudioLayer& L, const AudioLayerDims& d, float* x, int n,
                        ThreadPool* pool) {
  const int64_t nd = int64_t(n) * d.dim;
  layernorm(x, L.ln1_w.data(), L.ln1_b.data(), nrm_.data(), n, d.dim, d.eps, pool);
  L.q.apply(nrm_.data(), n, q_.data(), pool);
  L.k.apply(nrm_.data(), n, k_.data(), pool);
  L.v.apply(nrm_.data(), n, v_.data(), pool);
  grouped_attention(q_.data(), k_.data(), v_.data(), att_.data(), n, d.n_heads, d.dim / d.n_heads,
                    AttentionGroups{members_, offsets_}, attn_scratch_, pool);
  L.o.apply(att_.data(), n, nrm_.data(), pool);
  add_inplace(x, nrm_.data(), nd);
  layernorm(x, L.ln2_w.data(), L.ln2_b.data(), nrm_.data(), n, d.dim, d.eps, pool);
  L.fc1.apply(nrm_.data(), n, h1_.data(), pool);
  gelu_erf_inplace(h1_.data(), int64_t(n) * d.ffn_dim, pool);
  L.fc2.apply(h1_.data(), n, att_.data(), pool);
  add_inplace(x, att_.data(), nd);
}

Status AudioLayers::run(std::span<const AudioLayer> layers, const AudioLayerDims& d,
                        std::vector<float>& x, int n, const std::string& who,
                        const std::function<bool()>& stop, ThreadPool* pool) {
  for (auto* v : {&nrm_, &q_, &k_, &v_, &att_}) v->resize(size_t(n) * d.dim);
  h1_.resize(size_t(n) * d.ffn_dim);
  members_.resize(size_t(n));
  for (int i = 0; i < n; ++i) members_[size_t(i)] = i;
  offsets_ = {0, n};
  for (const AudioLayer& L : layers) {
    if (stop && stop())
      return make_error(ErrorCode::InvalidArgument, "{} audio encode: stopped before its end", who);
    block(L, d, x.data(), n, pool);
  }
  return Status::Ok();
}

}  // namespace kamera
