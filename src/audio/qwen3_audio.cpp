// Qwen3-Omni / Qwen3-ASR's audio tower: the tensor table and the mmproj loader (qwen3_audio.h
// lists the keys and tensor names).
#include "audio/qwen3_audio.h"

#include "gguf/gguf.h"

namespace kamera {

namespace {

constexpr const char* kFamily = "Qwen3-Omni / Qwen3-ASR audio";

std::vector<ClipTensor> tensor_specs(const Qwen3AudioConfig& c, Qwen3AudioWeights& w) {
  std::vector<ClipTensor> s;
  const int64_t d = c.dim, ch = c.conv_ch;
  // 3 x 3 kernels over (mel, time); the biases are (ch, 1, 1) in the file
  auto conv = [&](const std::string& name, QwenLinear& l, int in) {
    l.in = 9 * in;
    l.out = c.conv_ch;
    s.push_back({name + ".weight", {3, 3, in, ch}, nullptr, &l});
    s.push_back({name + ".bias", {1, 1, ch}, &l.b, nullptr});
  };
  conv("a.conv2d.1", w.conv1, 1);
  conv("a.conv2d.2", w.conv2, c.conv_ch);
  conv("a.conv2d.3", w.conv3, c.conv_ch);
  w.conv_out.in = c.conv_out_in();
  w.conv_out.out = c.dim;
  s.push_back({"a.conv_out.weight", {c.conv_out_in(), d}, nullptr, &w.conv_out});
  clip_vector(s, "a.position_embd.weight", w.pos, {d, c.n_pos});
  w.layers.resize(size_t(c.n_layers));
  for (int i = 0; i < c.n_layers; ++i)
    audio_layer_tensors(s, w.layers[size_t(i)], i, c.layer_dims(), c.k_bias);
  clip_vector(s, "a.post_ln.weight", w.post_ln_w, {d});
  clip_vector(s, "a.post_ln.bias", w.post_ln_b, {d});
  clip_linear(s, "mm.a.mlp.1", w.mlp1, c.dim, c.dim, {d, d});
  clip_linear(s, "mm.a.mlp.2", w.mlp2, c.dim, c.out_dim, {d, c.out_dim});
  return s;
}

Status read_config(const GgufFile& g, const std::string& path, Qwen3AudioConfig* c) {
  KAMERA_ASSIGN_OR_RETURN(const std::string proj, audio_projector_type(g, path));
  if (!is_qwen3_audio_projector(proj))
    return make_error(ErrorCode::Unsupported,
                      "{}: audio projector type '{}' is not Qwen3-Omni / Qwen3-ASR's ('qwen3a')",
                      path, proj);
  c->projector = proj;
  KAMERA_TRY(read_audio_tower_dims(g, path, kFamily, c));
  const GgufTensor* conv1 = g.find_tensor("a.conv2d.1.weight");
  if (!conv1 || conv1->ne.size() != 4 || conv1->ne[3] < 1 || conv1->ne[3] > 65536)
    return make_error(ErrorCode::CorruptData, "{}: tensor a.conv2d.1.weight is missing", path);
  c->conv_ch = int(conv1->ne[3]);
  c->k_bias = g.find_tensor("a.blk.0.attn_k.bias") != nullptr;
  return Status::Ok();
}

void compute_fingerprint(Qwen3AudioModel& m) {
  const Qwen3AudioConfig& c = m.cfg;
  const int ints[] = {c.n_mels,  c.dim,   c.n_layers, c.n_heads,    c.ffn_dim,
                      c.out_dim, c.n_pos, c.conv_ch,  int(c.k_bias)};
  const float reals[] = {c.eps};
  m.fingerprint = clip_fingerprint(c.projector.c_str(), ints, reals, tensor_specs(m.cfg, m.w));
}

}  // namespace

bool is_qwen3_audio_projector(const std::string& type) {
  return type == "qwen3a";
}

Result<Qwen3AudioModel> Qwen3AudioModel::load(const std::string& path) {
  return load_audio_tower<Qwen3AudioModel>(path, kFamily, read_config, tensor_specs,
                                           compute_fingerprint);
}

}  // namespace kamera
