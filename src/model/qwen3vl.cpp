#include "model/qwen3vl.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

Status read_qwen3vl_hparams(const GgufFile& f, ModelConfig& c) {
  namespace gk = gguf_key;
  const std::string arch = arch_name(c.arch);
  const std::string n_key = gk::arch_key(arch, gk::kNumDeepstackLayers);
  const int64_t n = f.get_int(n_key).value_or(0);
  if (n < 0 || n > c.n_layers)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is outside [0, {}] (the layer count)",
                      f.name(), n_key, n, c.n_layers);
  if (f.has(gk::arch_key(arch, gk::kDeepstackMapping)))
    return make_error(ErrorCode::Unsupported,
                      "{}: {} is not supported for {} (deepstack slices go to the first layers)",
                      f.name(), gk::arch_key(arch, gk::kDeepstackMapping), arch);
  c.n_deepstack = int(n);
  return Status::Ok();
}

}  // namespace kamera
