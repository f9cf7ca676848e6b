#include "synthetic/phi3_shapes.h"

#include <cmath>

#include "gguf/gguf.h"
#include "gguf/keys.h"
#include "synthetic/preset_shape.h"

namespace kamera {

namespace {

// LongRoPE over `pairs` pairs trained at `orig` and extended to c.ctx_len: short factors near 1,
// long ones growing from 1 to about ctx / orig with the pair (slow pairs stretch the most).
void longrope(ModelConfig& c, int orig) {
  const int pairs = c.rope.n_pairs();
  const double stretch = double(c.ctx_len) / orig;
  c.longrope.orig_ctx = orig;
  c.longrope.short_factors.resize(size_t(pairs));
  c.longrope.long_factors.resize(size_t(pairs));
  for (int i = 0; i < pairs; ++i) {
    const double t = pairs > 1 ? double(i) / (pairs - 1) : 0.0;
    c.longrope.short_factors[size_t(i)] = float(1.0 + 0.05 * t);
    c.longrope.long_factors[size_t(i)] = float(1.0 + (stretch - 1.0) * t * t);
  }
  c.rope.attn_factor = std::sqrt(1.0 + std::log(stretch) / std::log(double(orig)));
}

}  // namespace

bool phi3_preset(const std::string& preset, ModelConfig& c) {
  c.rope.theta = 10000.0;
  c.rms_eps = 1e-5f;
  c.tied_output = true;
  int orig = 4096;
  if (preset == "tiny") {
    set_shape(c, {64, 2, 4, 2, 16, 128, 512, 8192});
    c.rope.n_rot = 12;
  } else if (preset == "phi4-mini") {  // microsoft/Phi-4-mini-instruct's config.json shapes
    set_shape(c, {3072, 32, 24, 8, 128, 8192, 200064, 131072});
    c.rope.n_rot = 96;  // partial_rotary_factor 0.75
  } else {
    return false;
  }
  c.rope.layout = RopeLayout::Neox;
  c.rope.head_dim = c.head_dim;
  longrope(c, orig);
  select_rope_context(c, 0);
  return true;
}

void write_phi3_keys(GgufWriter& w, const ModelConfig& c) {
  if (c.arch != Arch::Phi3) return;
  const std::string a = arch_name(c.arch);
  w.set_u32(gguf_key::arch_key(a, gguf_key::kRopeScalingOrigCtx), uint32_t(c.longrope.orig_ctx));
  w.set_f32(gguf_key::arch_key(a, gguf_key::kRopeScalingAttnFactor), float(c.rope.attn_factor));
}

const std::vector<std::string>& phi3_control_tokens() {
  static const std::vector<std::string> t = {"<|endoftext|>", "<|system|>", "<|user|>",
                                             "<|assistant|>", "<|end|>"};
  return t;
}

const char* phi3_chat_template() {
  return "{% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + "
         "'<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";
}

}  // namespace kamera
