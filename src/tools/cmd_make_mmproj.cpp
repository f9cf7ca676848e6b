// kamera make-model --arch qwen2vl-mmproj | qwen25vl-mmproj | qwen3vl-mmproj: a seeded
// random-weight vision tower in llama.cpp's mmproj layout (vision/qwen_vision.h), beside a decoder
// written by `make-model --arch qwen2vl` (or qwen3vl) of the matching width.
#include <cstdio>

#include "tools/cli_common.h"
#include "vision/qwen_vision.h"

namespace kamera::cli {

// make-model --arch kimivl-mmproj (tools/cmd_make_kimi_mmproj.cpp).
int run_make_kimi_mmproj(const std::string& preset, const std::string& type, uint64_t seed,
                         const std::string& out, bool json);

int run_make_mmproj(const std::string& arch, const std::string& preset_in,
                    const std::string& type_name, uint64_t seed, const std::string& out,
                    bool as_json) {
  if (arch == "kimivl-mmproj")
    return run_make_kimi_mmproj(preset_in, type_name, seed, out, as_json);
  const std::string tower = arch.substr(0, arch.size() - std::string("-mmproj").size());
  const std::string preset = preset_in.empty() ? "tiny" : preset_in;
  auto cfg = qwen_vision_preset(tower, preset);
  if (!cfg)
    return fail(fmt::format("--arch {} has no --preset '{}' (qwen2vl-mmproj: tiny, 2b; "
                            "qwen25vl-mmproj: tiny, 3b; qwen3vl-mmproj: tiny, 2b, 30b-a3b)",
                            arch, preset),
                as_json);
  auto type = dtype_from_name(type_name);
  if (!type || *type == DType::BF16)
    return fail(fmt::format("--type '{}': an mmproj is written as f32, f16 or q8_0", type_name),
                as_json);
  const double t0 = now_ms();
  const QwenVisionModel m = QwenVisionModel::random(*cfg, seed);
  Status st = m.write_gguf(out, *type);
  if (!st.ok()) return fail(st.message(), as_json);
  const double ms = now_ms() - t0;
  int64_t params =
      int64_t(m.w.patch0.size() + m.w.patch1.size() + m.w.patch_b.size() + m.w.pos_embd.size());
  for (const auto& ds : m.w.deepstack) {
    params += int64_t(ds.norm_w.size() + ds.norm_b.size() + ds.fc1.b.size() + ds.fc2.b.size());
    for (const QwenLinear* l : {&ds.fc1, &ds.fc2}) params += l->w.rows() * l->w.cols();
  }
  for (const auto& L : m.w.layers) {
    params += int64_t(L.ln1_w.size() + L.ln1_b.size() + L.ln2_w.size() + L.ln2_b.size());
    for (const QwenLinear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
      params += int64_t(l->w.rows() * l->w.cols()) + int64_t(l->b.size());
  }
  params +=
      int64_t(m.w.post_ln_w.size() + m.w.post_ln_b.size() + m.w.mm0.b.size() + m.w.mm2.b.size());
  for (const QwenLinear* l : {&m.w.mm0, &m.w.mm2}) params += l->w.rows() * l->w.cols();
  if (as_json) {
    print_json(json{{"path", out},
                    {"arch", arch},
                    {"preset", preset},
                    {"seed", seed},
                    {"type", type_name},
                    {"params", params},
                    {"out_dim", m.cfg.out_dim},
                    {"deepstack_layers", m.cfg.deepstack_layers},
                    {"write_ms", ms}});
  } else {
    std::fprintf(stderr,
                 "kamera: wrote %s (%s %s, %.1fM parameters, %s, seed %llu, into a %d-wide "
                 "decoder) in %.0f ms\n",
                 out.c_str(), arch.c_str(), preset.c_str(), params / 1e6, type_name.c_str(),
                 (unsigned long long)seed, m.cfg.out_dim, ms);
  }
  return 0;
}

}  // namespace kamera::cli
