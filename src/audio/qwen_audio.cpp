// Qwen2.5-Omni's audio tower: config checks, the tensor table and the mmproj loader
// (qwen_audio.h lists the keys and tensor names).
#include "audio/qwen_audio.h"

#include "gguf/gguf.h"

namespace kamera {

namespace {

constexpr const char* kFamily = "Qwen2.5-Omni audio";

std::vector<ClipTensor> tensor_specs(const QwenAudioConfig& c, QwenAudioWeights& w) {
  std::vector<ClipTensor> s;
  const int64_t d = c.dim;
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
  for (int i = 0; i < c.n_layers; ++i)
    audio_layer_tensors(s, w.layers[size_t(i)], i, c.layer_dims(), /*k_bias=*/false);
  vec("a.post_ln.weight", w.post_ln_w, {d});
  vec("a.post_ln.bias", w.post_ln_b, {d});
  linear("mm.a.fc", w.proj, c.dim, c.out_dim, {d, c.out_dim});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, QwenAudioConfig* c) {
  KAMERA_ASSIGN_OR_RETURN(const std::string proj, audio_projector_type(g, path));
  if (!is_qwen_audio_projector(proj))
    return make_error(ErrorCode::Unsupported,
                      "{}: projector type '{}' has no audio tower kamera loads (it reads "
                      "'qwen2.5o' and 'qwen2a')",
                      path, proj);
  c->projector = proj;
  return read_audio_tower_dims(g, path, kFamily, c);
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

Result<QwenAudioModel> QwenAudioModel::load(const std::string& path) {
  return load_audio_tower<QwenAudioModel>(path, kFamily, read_config, tensor_specs,
                                          compute_fingerprint);
}

}  // namespace kamera
