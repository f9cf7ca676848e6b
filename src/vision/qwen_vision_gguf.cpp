// Qwen2-VL / Qwen2.5-VL / Qwen3-VL mmproj GGUF: the tensor table, the loader and the writer
// (qwen_vision.h lists the keys and tensor names).
#include <algorithm>
#include <cstring>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "vision/clip_keys.h"
#include "vision/qwen_vision.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

struct Spec {
  std::string name;
  std::vector<int64_t> ne;         // GGUF order, ne[0] contiguous
  const std::vector<float>* data;  // held in f32 (norms, biases, the patch kernels), or null
  bool weight;                     // a 2-D (or 4-D) weight: written in the file's weight type
  const Weight* matrix = nullptr;  // a product's matrix, held in the file's type (data null)
  // Qwen3-VL's fused attn_qkv (weight: the three matrices' rows; bias: their biases), or null
  const QwenVisionWeights::Layer* qkv = nullptr;
};

// Sizes the layer list and the products' shapes to the config (before loading into w).
void shape_weights(const QwenVisionConfig& c, QwenVisionWeights& w) {
  const int d = c.dim, f = c.ffn_dim, mw = c.merged_width();
  w.layers.resize(size_t(c.n_layers));
  for (auto& L : w.layers) {
    for (QwenLinear* l : {&L.q, &L.k, &L.v, &L.o}) *l = QwenLinear{d, d, Weight(), {}};
    L.gate = QwenLinear{d, f, Weight(), {}};
    L.up = QwenLinear{d, f, Weight(), {}};
    L.down = QwenLinear{f, d, Weight(), {}};
  }
  w.deepstack.resize(c.deepstack_layers.size());
  for (auto& ds : w.deepstack) {
    ds.fc1 = QwenLinear{mw, mw, Weight(), {}};
    ds.fc2 = QwenLinear{mw, c.out_dim, Weight(), {}};
  }
  w.mm0 = QwenLinear{mw, mw, Weight(), {}};
  w.mm2 = QwenLinear{mw, c.out_dim, Weight(), {}};
}

// Every tensor of a file of this config (w's layer list already sized). legacy_ffn: the FFN's
// input side is named ffn_down and its output side ffn_up (llama.cpp's Qwen2-VL surgery);
// otherwise the reverse.
std::vector<Spec> tensor_specs(const QwenVisionConfig& c, const QwenVisionWeights& w,
                               bool legacy_ffn) {
  const int64_t d = c.dim, f = c.ffn_dim, p = c.patch, mw = c.merged_width();
  const bool rms = c.rms_norm();
  std::vector<Spec> s = {{"v.patch_embd.weight", {p, p, 3, d}, &w.patch0, true},
                         {"v.patch_embd.weight.1", {p, p, 3, d}, &w.patch1, true}};
  if (c.patch_bias) s.push_back({"v.patch_embd.bias", {d}, &w.patch_b, false});
  auto linear = [&s](const std::string& name, const QwenLinear& l, int64_t in, int64_t out) {
    s.push_back({name + ".weight", {in, out}, nullptr, true, &l.w});
    s.push_back({name + ".bias", {out}, &l.b, false});
  };
  const std::string in_name = legacy_ffn ? "ffn_down" : "ffn_up";
  const std::string out_name = legacy_ffn ? "ffn_up" : "ffn_down";
  if (c.qwen3()) s.push_back({"v.position_embd.weight", {d, c.n_pos_embd}, &w.pos_embd, false});
  for (int i = 0; i < c.n_layers; ++i) {
    auto& L = w.layers[size_t(i)];
    const std::string b = "v.blk." + std::to_string(i) + ".";
    s.push_back({b + "ln1.weight", {d}, &L.ln1_w, false});
    if (!rms) s.push_back({b + "ln1.bias", {d}, &L.ln1_b, false});
    if (c.qwen3()) {
      s.push_back({b + "attn_qkv.weight", {d, 3 * d}, nullptr, true, nullptr, &L});
      s.push_back({b + "attn_qkv.bias", {3 * d}, nullptr, false, nullptr, &L});
    } else {
      linear(b + "attn_q", L.q, d, d);
      linear(b + "attn_k", L.k, d, d);
      linear(b + "attn_v", L.v, d, d);
    }
    linear(b + "attn_out", L.o, d, d);
    s.push_back({b + "ln2.weight", {d}, &L.ln2_w, false});
    if (!rms) s.push_back({b + "ln2.bias", {d}, &L.ln2_b, false});
    if (c.act == QwenVisionAct::SiluGated) linear(b + "ffn_gate", L.gate, d, f);
    linear(b + in_name, L.up, d, f);
    linear(b + out_name, L.down, f, d);
  }
  for (size_t k = 0; k < c.deepstack_layers.size(); ++k) {
    const auto& ds = w.deepstack[k];
    const std::string b = "v.deepstack." + std::to_string(c.deepstack_layers[k]) + ".";
    s.push_back({b + "norm.weight", {mw}, &ds.norm_w, false});
    s.push_back({b + "norm.bias", {mw}, &ds.norm_b, false});
    linear(b + "fc1", ds.fc1, mw, mw);
    linear(b + "fc2", ds.fc2, mw, c.out_dim);
  }
  s.push_back({"v.post_ln.weight", {d}, &w.post_ln_w, false});
  if (!rms) s.push_back({"v.post_ln.bias", {d}, &w.post_ln_b, false});
  linear("mm.0", w.mm0, mw, mw);
  linear("mm.2", w.mm2, mw, c.out_dim);
  return s;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

// Qwen3-VL: the position table's size and the deepstack layers, from the tensors present.
Status read_qwen3_tables(const GgufFile& g, const std::string& path, QwenVisionConfig* c) {
  const GgufTensor* pe = g.find_tensor("v.position_embd.weight");
  if (!pe || pe->ne.size() != 2 || pe->ne[1] < 1 || pe->ne[1] > (1 << 20))
    return make_error(ErrorCode::CorruptData,
                      "{}: a Qwen3-VL tower needs a 2-D v.position_embd.weight", path);
  c->n_pos_embd = int(pe->ne[1]);
  c->deepstack_layers.clear();
  for (int l = 0; l < c->n_layers; ++l)
    if (g.find_tensor("v.deepstack." + std::to_string(l) + ".fc1.weight"))
      c->deepstack_layers.push_back(l);
  return Status::Ok();
}

// Reads the config keys (qwen_vision.h). The FFN width comes from the tensors.
Status read_config(const GgufFile& g, const std::string& path, QwenVisionConfig* c,
                   bool* legacy_ffn) {
  const std::string proj = clip_vision_projector(g);  // (Qwen3-Omni's: clip.vision.*)
  if (proj == "qwen2vl_merger") {
    c->variant = QwenVisionVariant::Qwen2VL;
    c->act = g.get_bool(gk::kClipUseGelu).value_or(false) ? QwenVisionAct::Gelu
                                                          : QwenVisionAct::QuickGelu;
    if (g.get_bool(gk::kClipUseSilu).value_or(false))
      return make_error(ErrorCode::Unsupported, "{}: a Qwen2-VL tower with a SiLU FFN", path);
  } else if (proj == "qwen2.5vl_merger" || proj == "qwen2.5o") {
    // (a Qwen2.5-Omni file's vision half is a Qwen2.5-VL tower: clip.vision.* keys, v.* tensors)
    c->variant = QwenVisionVariant::Qwen25VL;
    c->act = QwenVisionAct::SiluGated;
  } else if (proj == "qwen3vl_merger") {
    c->variant = QwenVisionVariant::Qwen3VL;
    c->act = QwenVisionAct::GeluTanh;
    c->image_mean = c->image_std = kHalf;
    c->min_pixels = kQwen3VlMinPixels;
    c->max_pixels = kQwen3VlMaxPixels;
  } else {
    return make_error(ErrorCode::Unsupported,
                      "{}: projector type '{}' is not a Qwen-VL family tower (qwen2vl_merger, "
                      "qwen2.5vl_merger, qwen3vl_merger, qwen2.5o's vision half)",
                      path, proj);
  }
  auto need = [&](const char* key, int* out, int lo, int hi) {
    return clip_count(g, path, key, out, lo, hi);
  };
  KAMERA_TRY(need(gk::kVisionEmbeddingLength, &c->dim, 1, 16384));
  KAMERA_TRY(need(gk::kVisionBlockCount, &c->n_layers, 0, 256));
  KAMERA_TRY(need(gk::kVisionHeadCount, &c->n_heads, 1, 1024));
  KAMERA_TRY(need(gk::kVisionPatchSize, &c->patch, 1, 64));
  KAMERA_TRY(need(gk::kVisionProjectionDim, &c->out_dim, 1, 65536));
  c->merge = 2;
  if (g.has(gk::kVisionSpatialMergeSize))
    KAMERA_TRY(need(gk::kVisionSpatialMergeSize, &c->merge, 1, 8));
  c->eps = float(g.get_float(gk::kVisionLayerNormEps).value_or(1e-6));
  KAMERA_TRY(clip_mean_std(g, path, &c->image_mean, &c->image_std));
  c->min_pixels = g.get_int(gk::kVisionImageMinPixels).value_or(c->min_pixels);
  c->max_pixels = g.get_int(gk::kVisionImageMaxPixels).value_or(c->max_pixels);
  if (c->variant == QwenVisionVariant::Qwen25VL) {
    c->window = int(g.get_int(gk::kVisionWindowSize).value_or(112));
    c->full_attention_layers.clear();
    if (const std::vector<int64_t>* idx = g.get_int_array(gk::kVisionWaLayerIndexes)) {
      for (int64_t l : *idx) c->full_attention_layers.push_back(int(l));
    } else {
      const int64_t n = g.get_int(gk::kVisionNWaPattern).value_or(0);
      if (n <= 0)
        return make_error(ErrorCode::CorruptData, "{}: a Qwen2.5-VL tower needs {} or {}", path,
                          gk::kVisionNWaPattern, gk::kVisionWaLayerIndexes);
      for (int l = 0; l < c->n_layers; ++l)
        if ((l + 1) % n == 0) c->full_attention_layers.push_back(l);
    }
  }
  if (c->variant == QwenVisionVariant::Qwen3VL) KAMERA_TRY(read_qwen3_tables(g, path, c));
  // The FFN width and which of ffn_down / ffn_up is the input side, from block 0's tensors.
  c->ffn_dim = 1;
  *legacy_ffn = c->variant == QwenVisionVariant::Qwen2VL;
  if (c->n_layers == 0) return Status::Ok();
  if (c->variant == QwenVisionVariant::Qwen3VL) {  // fc1 is ffn_up, always
    const GgufTensor* up = g.find_tensor("v.blk.0.ffn_up.weight");
    if (!up || up->ne.size() != 2)
      return make_error(ErrorCode::CorruptData, "{}: v.blk.0.ffn_up is missing or not a matrix",
                        path);
    c->ffn_dim = int(up->ne[1]);
    return Status::Ok();
  }
  const GgufTensor* dn = g.find_tensor("v.blk.0.ffn_down.weight");
  const GgufTensor* up = g.find_tensor("v.blk.0.ffn_up.weight");
  if (!dn || !up || dn->ne.size() != 2 || up->ne.size() != 2)
    return make_error(ErrorCode::CorruptData,
                      "{}: v.blk.0.ffn_down / ffn_up are missing or not matrices", path);
  const bool dn_in = dn->ne[0] == c->dim, up_in = up->ne[0] == c->dim;
  if (dn_in && up_in) {  // ffn == dim: names alone decide
    *legacy_ffn = c->variant == QwenVisionVariant::Qwen2VL &&
                  g.get_int(gk::kVisionFeedForwardLength).value_or(0) == 0;
  } else if (dn_in || up_in) {
    *legacy_ffn = dn_in;
  } else {
    return make_error(ErrorCode::CorruptData,
                      "{}: neither ffn_down {} nor ffn_up {} of block 0 reads the width {}", path,
                      shape_str(dn->ne), shape_str(up->ne), c->dim);
  }
  c->ffn_dim = int((*legacy_ffn ? dn : up)->ne[1]);
  return Status::Ok();
}

// Qwen3-VL's attn_qkv: the weight's rows [0, d), [d, 2d), [2d, 3d) are q, k, v (borrowed from
// the mapping in the file's type), the bias likewise.
Status load_qkv(const GgufFile& g, const GgufTensor& gt, const std::string& path,
                QwenVisionWeights::Layer& L) {
  QwenLinear* parts[3] = {&L.q, &L.k, &L.v};
  const int64_t d = gt.ne[0];
  if (gt.ne.size() == 1) {  // the bias
    KAMERA_ASSIGN_OR_RETURN(std::vector<float> b, g.read_f32(gt));
    for (int i = 0; i < 3; ++i)
      parts[i]->b.assign(b.begin() + i * (d / 3), b.begin() + (i + 1) * (d / 3));
    return Status::Ok();
  }
  const std::optional<size_t> row = ggml_row_bytes(gt.type, d);
  if (!row)
    return make_error(ErrorCode::Unsupported, "{}: tensor {} has a type kamera cannot read", path,
                      gt.name);
  for (int i = 0; i < 3; ++i) {
    auto w =
        Weight::borrow(gt.type, static_cast<const uint8_t*>(gt.data) + size_t(i * d) * *row, d, d);
    if (!w.ok()) return make_error(w.code(), "{}: tensor {}: {}", path, gt.name, w.message());
    parts[i]->w = std::move(w.value());
  }
  return Status::Ok();
}

}  // namespace

Result<QwenVisionModel> QwenVisionModel::load(const std::string& path) {
  KAMERA_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  const GgufFile& g = *file;
  KAMERA_TRY(clip_vision_file(g, path));
  QwenVisionModel m;
  m.source = path;
  bool legacy_ffn = true;
  KAMERA_TRY(read_config(g, path, &m.cfg, &legacy_ffn));
  m.cfg.patch_bias = g.find_tensor("v.patch_embd.bias") != nullptr;
  if (Status s = m.cfg.validate(); !s.ok())
    return make_error(ErrorCode::CorruptData, "{}: {}", path, s.message());
  shape_weights(m.cfg, m.w);
  for (const Spec& t : tensor_specs(m.cfg, m.w, legacy_ffn)) {
    const GgufTensor* gt = g.find_tensor(t.name);
    if (!gt) return make_error(ErrorCode::CorruptData, "{}: tensor {} is missing", path, t.name);
    if (gt->ne != t.ne)
      return make_error(ErrorCode::CorruptData, "{}: tensor {} has shape {}, this config needs {}",
                        path, t.name, shape_str(gt->ne), shape_str(t.ne));
    // the specs point into m.w, which this function owns
    if (t.qkv) KAMERA_TRY(load_qkv(g, *gt, path, const_cast<QwenVisionWeights::Layer&>(*t.qkv)));
    if (t.qkv) continue;
    if (t.matrix) {  // the file's bytes in its type, in the mapping the model keeps
      auto b = Weight::borrow(gt->type, gt->data, t.ne[1], t.ne[0]);
      if (!b.ok()) return make_error(b.code(), "{}: tensor {}: {}", path, t.name, b.message());
      *const_cast<Weight*>(t.matrix) = std::move(b.value());
      continue;
    }
    KAMERA_ASSIGN_OR_RETURN(*const_cast<std::vector<float>*>(t.data), g.read_f32(*gt));
  }
  m.mapping = file->mapping();  // the matrices point into it
  m.finish();
  return m;
}

Status QwenVisionModel::write_gguf(const std::string& path, DType weight_type) const {
  KAMERA_TRY(check_shapes());
  if (weight_type == DType::BF16)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: mmproj weights are written as f32, f16 or q8_0 (llama.cpp's clip reads "
                      "no bf16 tower)",
                      path);
  // the patch kernels' rows of 14 fit no Q8_0 block: F16 beside Q8_0 matrices
  const DType patch_type = weight_type == DType::Q8_0 ? DType::F16 : weight_type;
  const bool v25 = cfg.variant == QwenVisionVariant::Qwen25VL, v3 = cfg.qwen3();
  GgufWriter g;
  g.set_string(gk::kArchitecture, "clip");
  g.set_string(gk::kName, v3    ? "kamera-synthetic-qwen3-vl-vision"
                          : v25 ? "kamera-synthetic-qwen2.5-vl-vision"
                                : "kamera-synthetic-qwen2-vl-vision");
  g.set_string(gk::kDescription, v3    ? "image encoder for Qwen3VL"
                                 : v25 ? "image encoder for Qwen2.5VL"
                                       : "image encoder for Qwen2VL");
  g.set_u32(gk::kFileType, weight_type == DType::F16 ? 1 : weight_type == DType::Q8_0 ? 7 : 0);
  g.set_bool(gk::kClipHasTextEncoder, false);
  g.set_bool(gk::kClipHasVisionEncoder, true);
  if (!v25 && !v3) g.set_bool(gk::kClipHasQwen2vlMerger, true);
  g.set_string(gk::kClipProjectorType, v3    ? "qwen3vl_merger"
                                       : v25 ? "qwen2.5vl_merger"
                                             : "qwen2vl_merger");
  g.set_bool(gk::kClipUseSilu, v25);
  // llama.cpp's Qwen3-VL converter writes use_gelu (its tanh ggml_gelu for the blocks)
  g.set_bool(gk::kClipUseGelu, cfg.act == QwenVisionAct::Gelu || v3);
  g.set_u32(gk::kVisionPatchSize, uint32_t(cfg.patch));
  // what llama.cpp's converters write (Qwen3-VL: sqrt(position rows) x patch)
  g.set_u32(gk::kVisionImageSize, v3 ? uint32_t(cfg.pos_side() * cfg.patch) : 560u);
  g.set_u32(gk::kVisionEmbeddingLength, uint32_t(cfg.dim));
  g.set_u32(gk::kVisionProjectionDim, uint32_t(cfg.out_dim));
  g.set_u32(gk::kVisionHeadCount, uint32_t(cfg.n_heads));
  g.set_f32(gk::kVisionLayerNormEps, cfg.eps);
  g.set_u32(gk::kVisionBlockCount, uint32_t(cfg.n_layers));
  g.set_u32(gk::kVisionFeedForwardLength, v25 || v3 ? uint32_t(cfg.ffn_dim) : 0u);
  if (cfg.merge != 2) g.set_u32(gk::kVisionSpatialMergeSize, uint32_t(cfg.merge));
  g.set_f32_array(gk::kVisionImageMean, {cfg.image_mean.begin(), cfg.image_mean.end()});
  g.set_f32_array(gk::kVisionImageStd, {cfg.image_std.begin(), cfg.image_std.end()});
  if (v25) {
    g.set_u32(gk::kVisionWindowSize, uint32_t(cfg.window));
    // n_wa_pattern when the full-attention layers are every n-th, else the explicit list
    const auto& fl = cfg.full_attention_layers;
    const int n = fl.empty() ? 0 : fl[0] + 1;
    bool regular = n > 0;
    for (int l = 0; l < cfg.n_layers && regular; ++l)
      regular = cfg.full_attention(l) == ((l + 1) % n == 0);
    if (regular)
      g.set_u32(gk::kVisionNWaPattern, uint32_t(n));
    else
      g.set_i32_array(gk::kVisionWaLayerIndexes, {fl.begin(), fl.end()});
  }
  for (const Spec& t : tensor_specs(cfg, w, !v25 && !v3)) {
    if (t.qkv && t.weight) {  // q, k, v rows one after another
      const QwenVisionWeights::Layer* L = t.qkv;
      g.add_tensor(t.name, t.ne, weight_type, [L](float* dst) {
        for (const QwenLinear* l : {&L->q, &L->k, &L->v}) {
          l->w.rows_f32(0, l->w.rows(), dst);
          dst += l->w.rows() * l->w.cols();
        }
      });
      continue;
    }
    if (t.qkv) {
      const QwenVisionWeights::Layer* L = t.qkv;
      g.add_tensor(t.name, t.ne, DType::F32, [L](float* dst) {
        for (const QwenLinear* l : {&L->q, &L->k, &L->v})
          dst = std::copy(l->b.begin(), l->b.end(), dst);
      });
      continue;
    }
    if (t.matrix) {
      const Weight* m = t.matrix;
      g.add_tensor(t.name, t.ne, weight_type, [m](float* dst) { m->rows_f32(0, m->rows(), dst); });
      continue;
    }
    const std::vector<float>* src = t.data;
    if (!t.weight && src->empty()) continue;
    g.add_tensor(t.name, t.ne, t.weight ? patch_type : DType::F32,
                 [src](float* dst) { std::memcpy(dst, src->data(), src->size() * sizeof(float)); });
  }
  if (!v25 && !v3)  // the placeholder llama.cpp's Qwen2-VL surgery adds
    g.add_tensor("v.position_embd.weight", {10, 10}, DType::F32,
                 [](float* dst) { std::memset(dst, 0, 100 * sizeof(float)); });
  return g.write(path);
}

}  // namespace kamera
