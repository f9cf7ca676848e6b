#include "model/phi3.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace gk = gguf_key;

Status read_phi3_hparams(const GgufFile& f, ModelConfig& c) {
  const std::string arch = arch_name(c.arch);
  const int64_t orig = f.get_int(gk::arch_key(arch, gk::kRopeScalingOrigCtx)).value_or(c.ctx_len);
  if (orig <= 0 || orig > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: {}.{} = {} is out of range", f.name(), arch,
                      gk::kRopeScalingOrigCtx, orig);
  c.longrope.orig_ctx = int(orig);
  c.rope.attn_factor = f.get_float(gk::arch_key(arch, gk::kRopeScalingAttnFactor)).value_or(1.0);
  if (!(c.rope.attn_factor > 0))
    return make_error(ErrorCode::CorruptData, "{}: {}.{} = {} must be > 0", f.name(), arch,
                      gk::kRopeScalingAttnFactor, c.rope.attn_factor);
  return Status::Ok();
}

Result<std::vector<Weight>> split_rows(const GgufTensor& t, const std::vector<int64_t>& rows) {
  const auto row_bytes = ggml_row_bytes(t.type, t.ne[0]);
  if (!row_bytes)
    return make_error(ErrorCode::CorruptData,
                      "tensor '{}': rows of {} values are not whole "
                      "blocks of {}",
                      t.name, t.ne[0], ggml_type_name(t.type));
  std::vector<Weight> out;
  int64_t first = 0;
  for (int64_t n : rows) {
    auto w = Weight::borrow(t.type, t.data + size_t(first) * *row_bytes, n, t.ne[0]);
    if (!w.ok()) return make_error(w.code(), "tensor '{}': {}", t.name, w.message());
    out.push_back(std::move(w.value()));
    first += n;
  }
  return out;
}

}  // namespace kamera
