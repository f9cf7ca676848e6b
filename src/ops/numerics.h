// Which roundings a model's forward follows (a load option: LoadOptions::numerics, the CLI's
// --numerics).
//
//   Kamera (the default): kamera's own kernels. Logits follow llama.cpp's to within a tenth of a
//     quantized file's quantization effect except where a last-bit difference meets an f16 tie
//     (docs/MODELS.md, "Quantized files against llama.cpp").
//   Ggml: where kamera's default rounds differently from ggml's x86 CPU backend, round as ggml
//     does, for users who need llama.cpp's numbers (migration checks, regression comparisons):
//     products with Q8_0 weights sum in ggml's lane order (ops/ggml_q8_0.h) and gemma3's GELU
//     goes through ggml's f16 table (ops/ggml_gelu.h). Slower (ops/ggml_q8_0.h says by how much).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace kamera {

enum class Numerics : uint8_t { Kamera, Ggml };

inline const char* numerics_name(Numerics n) {
  return n == Numerics::Ggml ? "ggml" : "kamera";
}

inline Result<Numerics> parse_numerics(std::string_view s) {
  if (s == "kamera") return Numerics::Kamera;
  if (s == "ggml") return Numerics::Ggml;
  return make_error(ErrorCode::InvalidArgument, "numerics '{}': expected kamera or ggml", s);
}

}  // namespace kamera
