// Qwen2.5-Omni's audio tower: config checks, the tensor table and the mmproj loader
// (qwen_audio.h lists the keys and tensor names).
#include "audio/qwen_audio.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr const char* kFamily = "Qwen2.5-Omni audio";

std::vector<ClipTensor> tensor_specs(const QwenAudioConfig& c, QwenAudioWeights& w) {
  std::vector<ClipTensor> s;
  const int64_t d = c.dim, f = c.ffn_dim;
  auto linear = [&s](const std::string& name, QwenLinear& l, int in, int out,
                     std::vector<int64_t> ne) { clip_linear(s, name, l, in, out, std::move(ne)); };
  auto vec = [&s](const std::string& name, std::vector<float>& v, std::vector<int64_t> ne) {
    clip_vector(s, name, v, std::move(ne));
  };
  // the convolutions' biases are (dim, 1) in the file
  auto conv = [&](const std::string& name, QwenLinear& l, int in) {
    l.in = 3 * in;
    l.out = c.dim;
    s.push_back({name + ".weight", {3, in, d}, nullptr, &l});
    s.push_back({name + ".bias", {1, d}, &l.b, nullptr});
  };
  conv("a.conv1d.1", w.conv1, c.n_mels);
  conv("a.conv1d.2", w.conv2, c.dim);
  vec("a.position_embd.weight", w.pos, {d, c.n_pos});
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string b = "a.blk." + std::to_string(i) + ".";
    vec(b + "ln1.weight", L.ln1_w, {d});
    vec(b + "ln1.bias", L.ln1_b, {d});
    linear(b + "attn_q", L.q, c.dim, c.dim, {d, d});
    L.k.in = L.k.out = c.dim;  // k_proj: no bias
    s.push_back({b + "attn_k.weight", {d, d}, nullptr, &L.k});
    linear(b + "attn_v", L.v, c.dim, c.dim, {d, d});
    linear(b + "attn_out", L.o, c.dim, c.dim, {d, d});
    vec(b + "ln2.weight", L.ln2_w, {d});
    vec(b + "ln2.bias", L.ln2_b, {d});
    linear(b + "ffn_up", L.fc1, c.dim, c.ffn_dim, {d, f});
    linear(b + "ffn_down", L.fc2, c.ffn_dim, c.dim, {f, d});
  }
  vec("a.post_ln.weight", w.post_ln_w, {d});
  vec("a.post_ln.bias", w.post_ln_b, {d});
  linear("mm.a.fc", w.proj, c.dim, c.out_dim, {d, c.out_dim});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, QwenAudioConfig* c) {
  std::string proj = g.get_string(gk::kClipProjectorType).value_or("");
  if (proj.empty()) proj = g.get_string(gk::kAudioProjectorType).value_or("");
  if (!is_qwen_audio_projector(proj))
    return make_error(ErrorCode::Unsupported,
                      "{}: projector type '{}' has no audio tower kamera loads (it reads "
                      "'qwen2.5o' and 'qwen2a')",
                      path, proj);
  c->projector = proj;
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
  return c->validate();
}

void compute_fingerprint(QwenAudioModel& m) {
  const QwenAudioConfig& c = m.cfg;
  const int ints[] = {c.n_mels, c.dim, c.n_layers, c.n_heads, c.ffn_dim, c.out_dim, c.n_pos};
  const float reals[] = {c.eps};
  m.fingerprint = clip_fingerprint(c.projector.c_str(), ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

bool is_qwen_audio_projector(const std::string& type) {
  return type == "qwen2.5o" || type == "qwen2a";
}

Status QwenAudioConfig::validate() const {
  auto bad = [](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}", kFamily, what);
  };
  if (dim % n_heads != 0) return bad(fmt::format("width {} with {} heads", dim, n_heads));
  if (n_pos < 1) return bad("an empty position table");
  if (!(eps > 0.0f)) return bad("layer norm epsilon must be positive");
  return Status::Ok();
}

Result<QwenAudioModel> QwenAudioModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  if (g.get_string(gk::kArchitecture).value_or("") != "clip")
    return make_error(ErrorCode::CorruptData, "{}: not an mmproj file ({} is not 'clip')", path,
                      gk::kArchitecture);
  if (!g.get_bool(gk::kClipHasAudioEncoder).value_or(false))
    return make_error(ErrorCode::Unsupported, "{}: the file has no audio encoder", path);
  QwenAudioModel m;
  m.source = path;
  KAMERA_TRY(read_config(g, path, &m.cfg));
  const std::string_view own[] = {"a.", "mm.a."};
  KAMERA_TRY(load_clip_tensors(g, path, tensor_specs(m.cfg, m.w), kFamily, own));
  m.mapping = file->mapping();
  compute_fingerprint(m);
  return m;
}

}  // namespace kamera
