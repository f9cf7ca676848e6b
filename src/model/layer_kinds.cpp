#include "model/layer_kinds.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

constexpr int kSmollm3NoRopeStep = 4;  // llama.cpp's n_no_rope_layer_step for smollm3
constexpr int kGemma3DefaultPattern = 6;

std::string layer_list(const LayerKinds& k, LayerKind want) {
  std::vector<int> ids;
  for (int i = 0; i < int(k.kinds.size()); ++i)
    if (k.kinds[i] == want) ids.push_back(i);
  return fmt::format("{}", fmt::join(ids, ", "));
}

Status read_gemma3(const GgufFile& f, ModelConfig& c) {
  const std::string arch = arch_name(c.arch);
  const auto key = [&arch](const char* s) { return gk::arch_key(arch, s); };
  c.qk_norm = true;
  c.attn_scale = c.n_layers == 62 ? float(1.0 / std::sqrt(double(c.dim / c.n_heads)))
                                  : float(1.0 / std::sqrt(double(c.head_dim)));
  c.final_softcap = float(f.get_float(key(gk::kFinalLogitSoftcapping)).value_or(0.0));
  if (c.final_softcap < 0)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} must be >= 0", f.name(),
                      key(gk::kFinalLogitSoftcapping), c.final_softcap);
  const int64_t window = f.get_int(key(gk::kSlidingWindow)).value_or(0);
  if (window <= 0) return Status::Ok();  // llama.cpp: no sliding window, every layer global
  if (window > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", f.name(),
                      key(gk::kSlidingWindow), window);
  if (f.get_int_array(key(gk::kSlidingWindowPattern)))
    return make_error(ErrorCode::Unsupported,
                      "{}: {} as an array is not supported (llama.cpp's gemma3 reads one period)",
                      f.name(), key(gk::kSlidingWindowPattern));
  const int64_t pattern = f.get_int(key(gk::kSlidingWindowPattern)).value_or(kGemma3DefaultPattern);
  if (pattern < 0 || pattern > c.n_layers + 1)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", f.name(),
                      key(gk::kSlidingWindowPattern), pattern);
  c.layer_kinds.window = int(window);
  c.layer_kinds.kinds = gemma3_layer_kinds(c.n_layers, int(pattern));
  c.layer_kinds.local_theta = f.get_float(key(gk::kRopeFreqBaseSwa)).value_or(10000.0);
  return Status::Ok();
}

}  // namespace

bool LayerKinds::any(LayerKind k) const {
  for (LayerKind x : kinds)
    if (x == k) return true;
  return k == LayerKind::Global && kinds.empty();
}

std::vector<LayerKind> smollm3_layer_kinds(int n_layers) {
  std::vector<LayerKind> k(size_t(std::max(0, n_layers)), LayerKind::Global);
  for (int i = 0; i < n_layers; ++i)
    if ((i + 1) % kSmollm3NoRopeStep == 0) k[size_t(i)] = LayerKind::NoRope;
  return k;
}

std::vector<LayerKind> gemma3_layer_kinds(int n_layers, int pattern) {
  std::vector<LayerKind> k(size_t(std::max(0, n_layers)), LayerKind::Global);
  for (int i = 0; i < n_layers; ++i)
    if (pattern == 0 || i % pattern < pattern - 1) k[size_t(i)] = LayerKind::Local;
  return k;
}

Status read_layer_kinds(const GgufFile& f, ModelConfig& c) {
  if (c.arch == Arch::Smollm3) {
    c.layer_kinds.kinds = smollm3_layer_kinds(c.n_layers);
    return Status::Ok();
  }
  if (is_gemma3(c.arch)) return read_gemma3(f, c);
  return Status::Ok();
}

Status validate_layer_kinds(const ModelConfig& c, const std::string& src) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: invalid model config: {}", src, what);
  };
  const LayerKinds& k = c.layer_kinds;
  if (!k.kinds.empty() && int(k.kinds.size()) != c.n_layers)
    return bad(fmt::format("{} layer kinds for {} layers", k.kinds.size(), c.n_layers));
  if (k.window < 0) return bad(fmt::format("sliding window {}", k.window));
  if (k.any(LayerKind::Local) && (k.window <= 0 || !(k.local_theta > 0)))
    return bad("local (sliding-window) layers need a window > 0 and a local rope base > 0");
  if (!k.kinds.empty() && (c.attention != AttentionKind::Gqa || c.rope.mrope != MropeMode::None))
    return bad("per-layer rope kinds are for GQA layers with 1-D rope");
  if (!(c.attn_scale >= 0) || !(c.final_softcap >= 0))
    return bad("attention scale and logit soft-cap must be >= 0");
  return Status::Ok();
}

void add_layer_kind_features(const ModelConfig& c, std::vector<std::string>& out) {
  const LayerKinds& k = c.layer_kinds;
  if (k.any(LayerKind::NoRope))
    out.push_back(fmt::format("nope (no rope on layers {}: keys position-free)",
                              layer_list(k, LayerKind::NoRope)));
  if (k.any(LayerKind::Local))
    out.push_back(fmt::format(
        "sliding_window ({} positions on layers {}, local rope base {}; global layers {}, rope "
        "base {}; full KV kept)",
        k.window, layer_list(k, LayerKind::Local), k.local_theta, layer_list(k, LayerKind::Global),
        c.rope.theta));
  if (is_gemma3(c.arch))
    out.push_back(fmt::format(
        "gemma3 (embedding x sqrt(dim), post-attention and post-FFN norms, GELU-tanh gate, "
        "query scale {:.6g})",
        attention_scale(c)));
  if (c.final_softcap > 0) out.push_back(fmt::format("final_logit_softcap ({})", c.final_softcap));
}

float attention_scale(const ModelConfig& c) {
  return c.attn_scale > 0 ? c.attn_scale : float(1.0 / std::sqrt(double(c.head_dim)));
}

}  // namespace kamera
