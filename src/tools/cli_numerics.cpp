// --numerics kamera|ggml: the roundings a loaded model's forward follows (ops/numerics.h). One
// option shared by the subcommands that load a model through load_for_cli (registered in
// kamera.cpp).
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {
std::string& numerics_value() {
  static std::string s = "kamera";
  return s;
}
}  // namespace

void add_numerics_option(CLI::App& app) {
  app.add_option("--numerics", numerics_value(),
                 "kamera: kamera's kernels; ggml: round as llama.cpp's x86 CPU backend where "
                 "kamera's kernels differ (Q8_0 products in ggml's lane order, gemma3's GELU "
                 "through an f16 table), for llama.cpp's numbers at some speed cost")
      ->check(CLI::IsMember({"kamera", "ggml"}))
      ->capture_default_str();
}

Numerics numerics_option() {
  const auto n = parse_numerics(numerics_value());  // checked by the option's IsMember
  return n.ok() ? *n : Numerics::Kamera;
}

}  // namespace kamera::cli
