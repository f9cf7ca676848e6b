// kamera make-model --arch kimivl-mmproj: a seeded random-weight Kimi-VL tower (MoonViT and its
// projector) in llama.cpp's mmproj layout (vision/kimi_vision.h), beside a decoder written by
// `make-model --arch deepseek2 --preset kimi-vl-tiny | kimi-vl-a3b` of the matching width.
#include <cstdio>

#include "tools/cli_common.h"
#include "vision/kimi_vision.h"

namespace kamera::cli {

int run_make_kimi_mmproj(const std::string& preset_in, const std::string& type_name, uint64_t seed,
                         const std::string& out, bool as_json) {
  const std::string preset = preset_in.empty() ? "tiny" : preset_in;
  auto cfg = kimi_vision_preset(preset);
  if (!cfg)
    return fail(fmt::format("--arch kimivl-mmproj has no --preset '{}' (tiny, a3b)", preset),
                as_json);
  auto type = dtype_from_name(type_name);
  if (!type || *type == DType::BF16)
    return fail(fmt::format("--type '{}': an mmproj is written as f32, f16 or q8_0", type_name),
                as_json);
  const double t0 = now_ms();
  const KimiVisionModel m = KimiVisionModel::random(*cfg, seed);
  Status st = m.write_gguf(out, *type);
  if (!st.ok()) return fail(st.message(), as_json);
  const double ms = now_ms() - t0;
  const int64_t params = m.n_parameters();
  if (as_json) {
    print_json(json{{"path", out},
                    {"arch", "kimivl-mmproj"},
                    {"preset", preset},
                    {"seed", seed},
                    {"type", type_name},
                    {"params", params},
                    {"out_dim", m.cfg.out_dim},
                    {"write_ms", ms}});
  } else {
    std::fprintf(stderr,
                 "kamera: wrote %s (kimivl-mmproj %s, %.1fM parameters, %s, seed %llu, into a "
                 "%d-wide decoder) in %.0f ms\n",
                 out.c_str(), preset.c_str(), params / 1e6, type_name.c_str(),
                 (unsigned long long)seed, m.cfg.out_dim, ms);
  }
  return 0;
}

}  // namespace kamera::cli
