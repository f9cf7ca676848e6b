#include "model/qwen3.h"

#include "gguf/gguf.h"
#include "gguf/keys.h"

namespace kamera {

namespace {

namespace gk = gguf_key;

Result<int> positive(const GgufFile& f, const std::string& arch, const char* k,
                     std::optional<int64_t> dflt) {
  const auto key = [&arch](const char* s) { return gk::arch_key(arch, s); };
  std::optional<int64_t> v = f.get_int(key(k));
  if (!v) v = dflt;
  if (!v)
    return make_error(ErrorCode::CorruptData, "{}: missing metadata key '{}'", f.name(), key(k));
  if (*v <= 0 || *v > INT32_MAX)
    return make_error(ErrorCode::CorruptData, "{}: {} = {} is out of range", f.name(), key(k), *v);
  return int(*v);
}

}  // namespace

Status read_qwen3moe_hparams(const GgufFile& f, ModelConfig& c) {
  const std::string arch = arch_name(c.arch);
  const auto key = [&arch](const char* s) { return gk::arch_key(arch, s); };
  MoeConfig& m = c.moe;
  KAMERA_ASSIGN_OR_RETURN(m.n_experts, positive(f, arch, gk::kExpertCount, std::nullopt));
  KAMERA_ASSIGN_OR_RETURN(m.n_used, positive(f, arch, gk::kExpertUsedCount, std::nullopt));
  KAMERA_ASSIGN_OR_RETURN(m.expert_ffn,
                          positive(f, arch, gk::kExpertFeedForwardLength, c.ffn_dim / m.n_used));
  m.n_dense_lead = 0;
  m.n_shared = 0;
  m.norm_weights = true;
  m.weights_scale = 1.0f;
  const double scale = f.get_float(key(gk::kExpertWeightsScale)).value_or(1.0);
  if (scale != 1.0 && scale != 0.0)
    return make_error(
        ErrorCode::Unsupported,
        "{}: {} = {} is not supported: llama.cpp's qwen3moe and qwen3vlmoe do not scale the "
        "experts' weights",
        f.name(), key(gk::kExpertWeightsScale), scale);
  if (f.get_int(key(gk::kExpertSharedCount)).value_or(0) != 0)
    return make_error(ErrorCode::Unsupported,
                      "{}: {} > 0: qwen3moe has no shared experts (llama.cpp ignores the key)",
                      f.name(), key(gk::kExpertSharedCount));
  if (!f.get_bool(key(gk::kExpertWeightsNorm)).value_or(true))
    return make_error(ErrorCode::Unsupported,
                      "{}: {} = false is not supported: llama.cpp's qwen3(vl)moe always normalizes "
                      "the selected experts' weights",
                      f.name(), key(gk::kExpertWeightsNorm));
  return validate_moe(m, c.n_layers, f.name());
}

}  // namespace kamera
