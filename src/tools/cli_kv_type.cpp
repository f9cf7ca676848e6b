// --kv-type f32|f16|bf16: the KV pool's storage dtype, and --swa-full: every token's row in the
// sliding-window layers (ContextOptions::swa_full), options shared by every subcommand that
// builds a Context (registered in kamera.cpp; read by context_for and the subcommands that fill
// ContextOptions themselves).
#include "kv/kv_row.h"
#include "tools/cli_common.h"

namespace kamera::cli {

namespace {
std::string& kv_type_text() {
  static std::string s = "f32";
  return s;
}
bool& swa_full_flag() {
  static bool full = false;
  return full;
}
}  // namespace

void add_kv_type_option(CLI::App& app) {
  app.add_option("--kv-type", kv_type_text(),
                 "KV cache storage: f32, f16 or bf16 (canonicals and patches follow; "
                 "docs/KV_DTYPE.md)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  app.add_flag("--swa-full", swa_full_flag(),
               "Keep every token's rows in sliding-window layers (gemma3, gpt-oss), as llama.cpp's "
               "--swa-full; without it they hold only the window (docs/MODELS.md, KV memory)");
}

bool swa_full_option() {
  return swa_full_flag();
}

DType kv_type_option() {
  auto t = kv_dtype_from_name(kv_type_text());
  KAMERA_ASSERT(t.has_value());  // CLI::IsMember checked it
  return *t;
}

}  // namespace kamera::cli
