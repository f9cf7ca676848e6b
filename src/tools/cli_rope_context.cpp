// --rope-context N: the context the model will run in, as llama.cpp's n_ctx chooses LongRoPE's
// factor set (phi3: the long set above the original context, model/phi3.h). One option shared by
// the subcommands that load a model through load_for_cli (registered in kamera.cpp).
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {
int64_t& rope_context_value() {
  static int64_t n = 0;
  return n;
}
}  // namespace

void add_rope_context_option(CLI::App& app) {
  app.add_option("--rope-context", rope_context_value(),
                 "Context the model runs in, for LongRoPE's factor choice (phi3: long factors "
                 "above the original context; 0: the trained context, as llama.cpp's n_ctx 0)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

int64_t rope_context_option() {
  return rope_context_value();
}

}  // namespace kamera::cli
