#include "synthetic/layer_kind_shapes.h"

#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "model/layer_kinds.h"
#include "synthetic/preset_shape.h"

namespace kamera {

namespace {

bool smollm3_preset(const std::string& preset, ModelConfig& c) {
  if (preset == "tiny") {
    set_shape(c, {64, 4, 4, 2, 16, 128, 512, 1024});
  } else if (preset == "3b") {
    set_shape(c, {2048, 36, 16, 4, 128, 11008, 128256, 65536});
    c.rope.theta = 5000000.0;
    c.rms_eps = 1e-6f;
  } else {
    return false;
  }
  c.rope.layout = RopeLayout::Normal;
  c.layer_kinds.kinds = smollm3_layer_kinds(c.n_layers);
  return true;
}

bool gemma3_preset(const std::string& preset, ModelConfig& c) {
  int pattern = 6;
  if (preset == "tiny") {
    set_shape(c, {64, 6, 4, 2, 16, 128, 512, 1024});
    c.layer_kinds.window = 8;
  } else if (preset == "1b") {
    set_shape(c, {1152, 26, 4, 1, 256, 6912, 262144, 32768});
    c.layer_kinds.window = 512;
  } else {
    return false;
  }
  c.rope.layout = RopeLayout::Neox;
  c.rope.theta = 1000000.0;
  c.rms_eps = 1e-6f;
  c.qk_norm = true;
  c.layer_kinds.kinds = gemma3_layer_kinds(c.n_layers, pattern);
  c.layer_kinds.local_theta = 10000.0;
  c.attn_scale = float(1.0 / std::sqrt(double(c.head_dim)));
  return true;
}

}  // namespace

bool layer_kind_preset(Arch arch, const std::string& preset, ModelConfig& c) {
  if (arch == Arch::Smollm3 && smollm3_preset(preset, c)) return true;
  if (is_gemma3(arch) && gemma3_preset(preset, c)) return true;
  return false;
}

void write_layer_kind_keys(GgufWriter& w, const ModelConfig& c) {
  if (!is_gemma3(c.arch)) return;
  const std::string a = arch_name(c.arch);
  const auto k = [&a](const char* suffix) { return gguf_key::arch_key(a, suffix); };
  const LayerKinds& lk = c.layer_kinds;
  if (c.final_softcap > 0) w.set_f32(k(gguf_key::kFinalLogitSoftcapping), c.final_softcap);
  if (lk.window <= 0) return;
  w.set_u32(k(gguf_key::kSlidingWindow), uint32_t(lk.window));
  if (lk.local_theta != 10000.0) w.set_f32(k(gguf_key::kRopeFreqBaseSwa), float(lk.local_theta));
  if (lk.kinds != gemma3_layer_kinds(c.n_layers, 6)) {  // another period (a key llama.cpp reads)
    int period = 0;
    while (period <= c.n_layers && lk.kinds != gemma3_layer_kinds(c.n_layers, period)) ++period;
    w.set_u32(k(gguf_key::kSlidingWindowPattern), uint32_t(period));
  }
}

}  // namespace kamera
