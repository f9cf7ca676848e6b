#include "train/torch_minivl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kamera::train {

namespace {

// Pairs [0, s_t) read t, the next s_h read h, the next s_w read w (blocked M-RoPE, as the engine).
int component(const RopeDesc& d, int pair) {
  return d.component(pair);
}

}  // namespace

torch::Tensor TorchMiniVl::P(const std::string& name, std::vector<int64_t> shape, double scale,
                             double init) {
  torch::Tensor t = scale > 0 ? torch::randn(shape) * scale : torch::full(shape, init);
  t = register_parameter(std::to_string(named_.size()), t);
  named_.emplace_back(name, t);
  by_name_[name] = t;
  return t;
}

TorchMiniVl::TorchMiniVl(const ModelConfig& dc, const VisionConfig& vc) : dc_(dc), vc_(vc) {
  const int64_t D = dc.dim, Q = dc.q_width(), KV = dc.kv_width(), F = dc.ffn_dim, V = dc.n_vocab;
  auto lin = [&](const std::string& n, int64_t out, int64_t in) {
    P(n, {out, in}, 1.0 / std::sqrt(double(in)), 0);
  };
  auto res_out = [&](const std::string& n, int64_t out, int64_t in, int layers) {
    P(n, {out, in}, 1.0 / std::sqrt(double(in) * 2.0 * layers), 0);
  };
  // One pre-norm transformer block: q/k/v with bias, output projection, SwiGLU. Names differ
  // between the encoder (llama.cpp's clip names) and the decoder (its llama names).
  struct BlockNames {
    const char *norm1, *out, *norm2;
    bool out_bias;
  };
  auto block = [&](const std::string& p, const BlockNames& n, int64_t width, int64_t q, int64_t kv,
                   int64_t ffn, int layers) {
    P(p + n.norm1, {width}, 0, 1);
    lin(p + "attn_q.weight", q, width);
    P(p + "attn_q.bias", {q}, 0, 0);
    lin(p + "attn_k.weight", kv, width);
    P(p + "attn_k.bias", {kv}, 0, 0);
    lin(p + "attn_v.weight", kv, width);
    P(p + "attn_v.bias", {kv}, 0, 0);
    res_out(p + n.out + ".weight", width, q, layers);
    if (n.out_bias) P(p + n.out + ".bias", {width}, 0, 0);
    P(p + n.norm2, {width}, 0, 1);
    lin(p + "ffn_gate.weight", ffn, width);
    lin(p + "ffn_up.weight", ffn, width);
    res_out(p + "ffn_down.weight", width, ffn, layers);
  };
  // vision
  const int64_t d = vc.dim, f = vc.ffn_dim, pv = vc.patch_values(), md = vc.merger_dim;
  lin("v.patch_embd.weight", d, pv);
  P("v.patch_embd.bias", {d}, 0, 0);
  P("v.position_embd.weight", {vc.n_patches(), d}, 0.02, 0);
  for (int i = 0; i < vc.n_layers; ++i)
    block("v.blk." + std::to_string(i) + ".", {"ln1.weight", "attn_out", "ln2.weight", true}, d, d,
          d, f, vc.n_layers);
  P("v.post_ln.weight", {d}, 0, 1);
  lin("mm.0.weight", md, int64_t(vc.merge) * vc.merge * d);
  P("mm.0.bias", {md}, 0, 0);
  lin("mm.2.weight", vc.out_dim, md);
  P("mm.2.bias", {vc.out_dim}, 0, 0);
  // decoder
  P("token_embd.weight", {V, D}, 1.0, 0);
  for (int i = 0; i < dc.n_layers; ++i)
    block("blk." + std::to_string(i) + ".",
          {"attn_norm.weight", "attn_output", "ffn_norm.weight", false}, D, Q, KV, F, dc.n_layers);
  P("output_norm.weight", {D}, 0, 1);
  lin("output.weight", V, D);
}

torch::Tensor TorchMiniVl::rms(const torch::Tensor& x, const torch::Tensor& w, double eps) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

std::array<torch::Tensor, 3> TorchMiniVl::qkv(const torch::Tensor& h, const std::string& pf) {
  namespace F = torch::nn::functional;
  return {F::linear(h, at(pf + "attn_q.weight"), at(pf + "attn_q.bias")),
          F::linear(h, at(pf + "attn_k.weight"), at(pf + "attn_k.bias")),
          F::linear(h, at(pf + "attn_v.weight"), at(pf + "attn_v.bias"))};
}

torch::Tensor TorchMiniVl::swiglu(const torch::Tensor& h, const std::string& pf) {
  namespace F = torch::nn::functional;
  auto gate = F::linear(h, at(pf + "ffn_gate.weight")), up = F::linear(h, at(pf + "ffn_up.weight"));
  return F::linear(torch::silu(gate) * up, at(pf + "ffn_down.weight"));
}

torch::Tensor TorchMiniVl::rope(const torch::Tensor& x, const torch::Tensor& cos,
                                const torch::Tensor& sin) const {
  // x [B, T, H, hd]; cos/sin [T, half] -> broadcast over B and H. NeoX pairs (i, i + half).
  const int64_t half = dc_.rope.n_pairs();
  auto x1 = x.slice(-1, 0, half), x2 = x.slice(-1, half, 2 * half);
  auto c = cos.unsqueeze(0).unsqueeze(2), s = sin.unsqueeze(0).unsqueeze(2);
  auto r = torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);
  if (2 * half < x.size(-1)) r = torch::cat({r, x.slice(-1, 2 * half, x.size(-1))}, -1);
  return r;
}

torch::Tensor TorchMiniVl::encode(const torch::Tensor& frames_u8) {
  const VisionConfig& c = vc_;
  const int64_t n = frames_u8.size(0), g = c.grid(), p = c.patch, d = c.dim, H = c.n_heads;
  const int64_t hd = c.head_dim();
  auto x = frames_u8.to(torch::kFloat32).div(255.0).sub(0.5).div(0.5);
  // [n, S, S, 3] -> [n, gy, py, gx, px, 3] -> [n, gy, gx, py, px, 3] -> [n, patches, p*p*3]
  x = x.view({n, g, p, g, p, 3}).permute({0, 1, 3, 2, 4, 5}).reshape({n, g * g, p * p * 3});
  x = torch::nn::functional::linear(x, at("v.patch_embd.weight"), at("v.patch_embd.bias"));
  x = x + at("v.position_embd.weight").unsqueeze(0);
  const int64_t np = g * g;
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string pf = "v.blk." + std::to_string(i) + ".";
    auto h = rms(x, at(pf + "ln1.weight"), c.eps);
    auto [q, k, v] = qkv(h, pf);
    q = q.view({n, np, H, hd}).transpose(1, 2);
    k = k.view({n, np, H, hd}).transpose(1, 2);
    v = v.view({n, np, H, hd}).transpose(1, 2);
    auto att = torch::softmax(torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd)), -1);
    auto o = torch::matmul(att, v).transpose(1, 2).reshape({n, np, d});
    x = x + torch::nn::functional::linear(o, at(pf + "attn_out.weight"), at(pf + "attn_out.bias"));
    h = rms(x, at(pf + "ln2.weight"), c.eps);
    x = x + swiglu(h, pf);
  }
  x = rms(x, at("v.post_ln.weight"), c.eps);
  const int64_t m = c.merge, tg = c.token_grid();
  // [n, gy, gx, d] with gy = ty*m + dy -> [n, ty, tx, dy, dx, d]
  x = x.view({n, tg, m, tg, m, d}).permute({0, 1, 3, 2, 4, 5}).reshape({n, tg * tg, m * m * d});
  x = torch::silu(torch::nn::functional::linear(x, at("mm.0.weight"), at("mm.0.bias")));
  return torch::nn::functional::linear(x, at("mm.2.weight"), at("mm.2.bias"));
}

torch::Tensor sequence_positions(int n_frames, int token_grid, int n_text) {
  std::vector<int64_t> v;
  auto push = [&](int64_t t, int64_t h, int64_t w) {
    v.push_back(t);
    v.push_back(h);
    v.push_back(w);
  };
  push(0, 0, 0);
  int64_t p = 1;
  for (int f = 0; f < n_frames; ++f) {
    for (int r = 0; r < token_grid; ++r)
      for (int c = 0; c < token_grid; ++c) push(p, p + r, p + c);
    p += token_grid;
  }
  for (int i = 0; i < n_text; ++i, ++p) push(p, p, p);
  return torch::from_blob(v.data(), {int64_t(v.size() / 3), 3}, torch::kInt64).clone();
}

torch::Tensor packed_mask(int64_t prefix, int64_t seg, int64_t n_segments) {
  const int64_t T = prefix + seg * n_segments;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> m(size_t(T * T), -inf);
  for (int64_t r = 0; r < T; ++r) {
    const int64_t own = r < prefix ? 0 : prefix + (r - prefix) / seg * seg;  // segment start
    for (int64_t c = 0; c <= r; ++c)
      if (c < prefix || c >= own) m[size_t(r * T + c)] = 0.0f;
  }
  return torch::from_blob(m.data(), {T, T}, torch::kFloat32).clone();
}

torch::Tensor TorchMiniVl::decode(torch::Tensor x, const torch::Tensor& pos, torch::Tensor mask) {
  const ModelConfig& c = dc_;
  const int64_t B = x.size(0), T = x.size(1), H = c.n_heads, Hkv = c.n_kv_heads, hd = c.head_dim;
  const int half = c.rope.n_pairs();
  // angles in double, rounded once to f32 (as the engine's rope tables)
  auto posd = pos.to(torch::kFloat64);
  std::vector<torch::Tensor> cols;
  for (int i = 0; i < half; ++i) {
    const double freq = c.rope.freq_scale * std::pow(c.rope.theta, -2.0 * i / double(c.rope.n_rot));
    cols.push_back(posd.select(1, component(c.rope, i)) * freq);
  }
  auto ang = torch::stack(cols, 1);  // [T, half]
  auto cos = torch::cos(ang).to(torch::kFloat32), sin = torch::sin(ang).to(torch::kFloat32);
  if (!mask.defined()) mask = torch::full({T, T}, -std::numeric_limits<float>::infinity()).triu(1);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string pf = "blk." + std::to_string(i) + ".";
    auto h = rms(x, at(pf + "attn_norm.weight"), c.rms_eps);
    auto [q, k, v] = qkv(h, pf);
    q = rope(q.view({B, T, H, hd}), cos, sin).transpose(1, 2);    // [B, H, T, hd]
    k = rope(k.view({B, T, Hkv, hd}), cos, sin).transpose(1, 2);  // [B, Hkv, T, hd]
    v = v.view({B, T, Hkv, hd}).transpose(1, 2);
    k = k.repeat_interleave(H / Hkv, 1);  // q head j reads kv head j / group
    v = v.repeat_interleave(H / Hkv, 1);
    auto s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd)) + mask;
    auto o = torch::matmul(torch::softmax(s, -1), v).transpose(1, 2).reshape({B, T, H * hd});
    x = x + torch::nn::functional::linear(o, at(pf + "attn_output.weight"));
    h = rms(x, at(pf + "ffn_norm.weight"), c.rms_eps);
    x = x + swiglu(h, pf);
  }
  x = rms(x, at("output_norm.weight"), c.rms_eps);
  return torch::nn::functional::linear(x, at("output.weight"));
}

namespace {

torch::Tensor frames_tensor(const minivl::Clip& clip) {
  const int64_t F = int64_t(clip.frames.size()), S = minivl::kFramePixels;
  auto t = torch::empty({F, S, S, 3}, torch::kUInt8);
  for (int64_t f = 0; f < F; ++f)
    std::memcpy(t[f].data_ptr<uint8_t>(), clip.frames[size_t(f)].rgb.data(), size_t(S * S * 3));
  return t;
}

}  // namespace

torch::Tensor TorchMiniVl::answer_logits(const std::vector<Example>& batch) {
  // One sequence per distinct clip: [<bos>][frames][q_0 padded][q_1 padded]..., each question in
  // a segment of the longest question's length, at the text positions it would have alone.
  std::vector<const minivl::Clip*> clips;
  std::vector<int64_t> clip_of, seg_of, n_seg;
  for (const Example& e : batch) {
    auto it = std::find(clips.begin(), clips.end(), e.clip);
    clip_of.push_back(it - clips.begin());
    if (it == clips.end()) clips.push_back(e.clip), n_seg.push_back(0);
    seg_of.push_back(n_seg[size_t(clip_of.back())]++);
  }
  const int64_t F = int64_t(batch[0].clip->frames.size()), C = int64_t(clips.size());
  std::vector<torch::Tensor> fr;
  for (auto* c : clips) fr.push_back(frames_tensor(*c));
  auto vis = encode(torch::cat(fr, 0));  // [C*F, tokens, D]
  const int64_t nt = vis.size(1), D = vis.size(2);
  vis = vis.view({C, F * nt, D});
  int64_t qmax = 0;
  for (const Example& e : batch) qmax = std::max<int64_t>(qmax, int64_t(e.question->tokens.size()));
  const int64_t S = *std::max_element(n_seg.begin(), n_seg.end()), P = 1 + F * nt;
  std::vector<int64_t> ids(size_t(C * (1 + S * qmax)), 0), last;  // 0: <pad>
  for (int64_t c = 0; c < C; ++c) ids[size_t(c * (1 + S * qmax))] = minivl::bos_id();
  for (size_t b = 0; b < batch.size(); ++b) {
    const auto& q = batch[b].question->tokens;
    const int64_t at0 = clip_of[b] * (1 + S * qmax) + 1 + seg_of[b] * qmax;
    for (size_t i = 0; i < q.size(); ++i) ids[size_t(at0) + i] = q[i];
    last.push_back(P + seg_of[b] * qmax + int64_t(q.size()) - 1);
  }
  auto tok = torch::from_blob(ids.data(), {C, 1 + S * qmax}, torch::kInt64).clone();
  auto emb = torch::nn::functional::embedding(tok, at("token_embd.weight"));  // [C, 1+S*q, D]
  auto x = torch::cat({emb.slice(1, 0, 1), vis, emb.slice(1, 1)}, 1);         // [C, T, D]
  auto alone = sequence_positions(int(F), vc_.token_grid(), int(qmax));       // [P + q, 3]
  auto pos = torch::cat({alone.slice(0, 0, P), alone.slice(0, P).repeat({S, 1})}, 0);
  auto logits = decode(x, pos, packed_mask(P, qmax, S));  // [C, T, V]
  auto ci = torch::from_blob(clip_of.data(), {int64_t(batch.size())}, torch::kInt64).clone();
  auto li = torch::from_blob(last.data(), {int64_t(batch.size())}, torch::kInt64).clone();
  return logits.index({ci, li});
}

torch::Tensor TorchMiniVl::sequence_logits(const Example& e) {
  auto vis = encode(frames_tensor(*e.clip));
  const int64_t F = vis.size(0), nt = vis.size(1), D = vis.size(2);
  std::vector<int64_t> ids = {minivl::bos_id()};
  for (int32_t t : e.question->tokens) ids.push_back(t);
  auto tok = torch::from_blob(ids.data(), {1, int64_t(ids.size())}, torch::kInt64).clone();
  auto emb = torch::nn::functional::embedding(tok, at("token_embd.weight"));
  auto x = torch::cat({emb.slice(1, 0, 1), vis.reshape({1, F * nt, D}), emb.slice(1, 1)}, 1);
  auto pos = sequence_positions(int(F), vc_.token_grid(), int(ids.size()) - 1);
  return decode(x, pos)[0];
}

torch::Tensor TorchMiniVl::text_logits(const torch::Tensor& ids) {
  const int64_t T = ids.size(1);
  auto x = torch::nn::functional::embedding(ids, at("token_embd.weight"));
  auto pos = torch::arange(T, torch::kInt64).unsqueeze(1).repeat({1, 3});
  return decode(x, pos);
}

std::vector<std::pair<std::string, torch::Tensor>> TorchMiniVl::gguf_tensors() const {
  return named_;
}

Status TorchMiniVl::export_files(const std::string& decoder_path,
                                 const std::string& vision_path) const {
  torch::NoGradGuard ng;
  auto values = [&](const std::string& name) {
    auto t = by_name_.at(name).detach().contiguous().to(torch::kFloat32);
    return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  };
  VisionModel vm;
  vm.cfg = vc_;
  for (VisionTensor& t : vm.tensors()) {
    if (!by_name_.count(t.name))
      return make_error(ErrorCode::InvalidArgument, "export: no parameter {}", t.name);
    *t.data = values(t.name);
  }
  KAMERA_TRY(vm.write_gguf(vision_path));
  return export_decoder(decoder_path, minivl::word_vocab(), "kamera-minivl", DType::F32);
}

Status TorchMiniVl::export_decoder(const std::string& path, const Tokenizer::Vocab& vocab,
                                   const std::string& name, DType weight_type) const {
  torch::NoGradGuard ng;
  Status missing = Status::Ok();
  TensorFill fill = [&](const std::string& tname, const std::vector<int64_t>& ne, float* dst) {
    auto it = by_name_.find(tname);
    int64_t n = 1;
    for (int64_t e : ne) n *= e;
    if (it == by_name_.end() || it->second.numel() != n) {
      missing = make_error(ErrorCode::InvalidArgument,
                           "export: parameter {} is missing or has the wrong size", tname);
      std::fill(dst, dst + n, 0.0f);
      return;
    }
    auto t = it->second.detach().contiguous().to(torch::kFloat32);
    std::memcpy(dst, t.data_ptr<float>(), sizeof(float) * size_t(n));
  };
  KAMERA_TRY(write_decoder_gguf(dc_, name, weight_type, vocab, fill, path));
  return missing;
}

Status TorchMiniVl::import_files(const std::string& decoder_path, const std::string& vision_path) {
  auto m = minivl::MiniVl::load(decoder_path, vision_path);
  if (!m.ok()) return m.error();
  torch::NoGradGuard ng;
  for (VisionTensor& t : m->vision.tensors()) KAMERA_TRY(set_param(t.name, *t.data));
  if (m->decoder->output.empty())
    return make_error(ErrorCode::InvalidArgument, "import: {} has a tied output head",
                      decoder_path);
  return import_decoder(*m->decoder);
}

Status TorchMiniVl::set_param(const std::string& name, const std::vector<float>& v) {
  torch::NoGradGuard ng;
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    return make_error(ErrorCode::InvalidArgument, "import: no parameter {}", name);
  if (it->second.numel() != int64_t(v.size()))
    return make_error(ErrorCode::InvalidArgument, "import: {} has {} values, expected {}", name,
                      v.size(), it->second.numel());
  it->second.copy_(torch::from_blob(const_cast<float*>(v.data()), it->second.sizes()));
  return Status::Ok();
}

Status TorchMiniVl::import_decoder(const Model& d) {
  if (d.output.empty())
    return make_error(ErrorCode::InvalidArgument, "import: the decoder has a tied output head");
  auto set = [&](const std::string& name, const std::vector<float>& v) {
    return set_param(name, v);
  };
  auto set_w = [&](const std::string& name, const Weight& w) { return set(name, w.to_f32()); };
  KAMERA_TRY(set_w("token_embd.weight", d.tok_embd));
  KAMERA_TRY(set("output_norm.weight", d.out_norm));
  KAMERA_TRY(set_w("output.weight", d.output));
  for (int i = 0; i < d.cfg.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const LayerWeights& L = d.layers[size_t(i)];
    KAMERA_TRY(set(p + "attn_norm.weight", L.attn_norm));
    KAMERA_TRY(set_w(p + "attn_q.weight", L.wq));
    KAMERA_TRY(set(p + "attn_q.bias", L.bq));
    KAMERA_TRY(set_w(p + "attn_k.weight", L.wk));
    KAMERA_TRY(set(p + "attn_k.bias", L.bk));
    KAMERA_TRY(set_w(p + "attn_v.weight", L.wv));
    KAMERA_TRY(set(p + "attn_v.bias", L.bv));
    KAMERA_TRY(set_w(p + "attn_output.weight", L.wo));
    KAMERA_TRY(set(p + "ffn_norm.weight", L.ffn_norm));
    KAMERA_TRY(set_w(p + "ffn_gate.weight", L.w_gate));
    KAMERA_TRY(set_w(p + "ffn_up.weight", L.w_up));
    KAMERA_TRY(set_w(p + "ffn_down.weight", L.w_down));
  }
  return Status::Ok();
}

}  // namespace kamera::train
