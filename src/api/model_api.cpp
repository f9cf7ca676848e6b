// Models: loading, their shape, their KV layout, and the tokenizer (include/kamera.h).
#include <cstring>

#include "api/handles.h"

using namespace kamera;
using namespace kamera::api;

extern "C" {

kamera_status kamera_model_load(const char* path, const char* tokenizer_path, kamera_model** out) {
  clear_out(out);
  return guarded("kamera_model_load", [&] {
    KAMERA_API_REQUIRE("kamera_model_load", path);
    KAMERA_API_REQUIRE("kamera_model_load", out);
    LoadOptions lo;
    if (tokenizer_path) lo.tokenizer_path = tokenizer_path;
    auto m = load_model(path, lo);
    if (!m.ok()) return set_error(m.error());
    auto h = std::make_unique<kamera_model>();
    h->layout = (*m)->kv_layout();
    h->model = std::shared_ptr<const Model>(std::move(m.value()));
    *out = h.release();
    return KAMERA_OK;
  });
}

void kamera_model_free(kamera_model* model) {
  delete model;
}

kamera_status kamera_model_get_info(const kamera_model* model, kamera_model_info* out) {
  return guarded("kamera_model_get_info", [&] {
    KAMERA_API_REQUIRE("kamera_model_get_info", model);
    KAMERA_API_REQUIRE("kamera_model_get_info", out);
    const Model& m = *model->model;
    const ModelConfig& c = m.cfg;
    *out = kamera_model_info{};
    out->arch = arch_name(c.arch);
    out->format = m.format.c_str();
    out->n_vocab = c.n_vocab;
    out->dim = c.dim;
    out->n_layers = c.n_layers;
    out->n_heads = c.n_heads;
    out->n_kv_heads = c.n_kv_heads;
    out->head_dim = c.head_dim;
    out->ctx_len = c.ctx_len;
    out->bos = m.tokenizer ? m.tokenizer->bos() : 1;
    out->eos = m.tokenizer ? m.tokenizer->eos() : 2;
    out->has_tokenizer = m.tokenizer.has_value();
    out->n_kv_channels = int32_t(model->layout.channels.size());
    out->input_dim = c.input_width();
    return KAMERA_OK;
  });
}

kamera_status kamera_model_kv_channel(const kamera_model* model, int32_t channel,
                                      kamera_kv_channel* out) {
  return guarded("kamera_model_kv_channel", [&] {
    KAMERA_API_REQUIRE("kamera_model_kv_channel", model);
    KAMERA_API_REQUIRE("kamera_model_kv_channel", out);
    const auto& chans = model->layout.channels;
    if (channel < 0 || channel >= int32_t(chans.size()))
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_model_kv_channel: channel {} is outside [0, {})", channel, chans.size());
    const ChannelDesc& d = chans[size_t(channel)];
    *out = kamera_kv_channel{d.name.c_str(), d.width, d.rotated};
    return KAMERA_OK;
  });
}

kamera_status kamera_tokenize(const kamera_model* model, const char* text, size_t text_len,
                              uint32_t flags, int32_t* tokens, int32_t capacity,
                              int32_t* n_tokens) {
  return guarded("kamera_tokenize", [&] {
    KAMERA_API_REQUIRE("kamera_tokenize", model);
    KAMERA_API_REQUIRE("kamera_tokenize", n_tokens);
    if (!text && text_len > 0) return null_argument("kamera_tokenize", "text");
    if (capacity < 0 || (!tokens && capacity > 0))
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_tokenize: capacity {} does not describe the tokens buffer", capacity);
    const Model& m = *model->model;
    if (!m.tokenizer)
      return fail(KAMERA_ERR_UNSUPPORTED, "kamera_tokenize: {} has no tokenizer", m.source);
    const std::string_view s(text ? text : "", text_len);
    const bool bos = flags & KAMERA_TOKENIZE_ADD_BOS;
    std::vector<int32_t> ids =
        (flags & KAMERA_TOKENIZE_RAW) ? m.tokenizer->encode_raw(s) : m.tokenizer->encode(s, bos);
    if ((flags & KAMERA_TOKENIZE_RAW) && bos) ids.insert(ids.begin(), m.tokenizer->bos());
    *n_tokens = int32_t(ids.size());
    if (!tokens) return KAMERA_OK;
    if (int64_t(ids.size()) > capacity)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_tokenize: the text has {} tokens, the buffer holds {}", ids.size(),
                  capacity);
    std::copy(ids.begin(), ids.end(), tokens);
    return KAMERA_OK;
  });
}

kamera_status kamera_detokenize(const kamera_model* model, const int32_t* tokens, int32_t n_tokens,
                                char* buf, size_t capacity, size_t* length) {
  return guarded("kamera_detokenize", [&] {
    KAMERA_API_REQUIRE("kamera_detokenize", model);
    KAMERA_API_REQUIRE("kamera_detokenize", length);
    if (n_tokens < 0 || (!tokens && n_tokens > 0))
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "kamera_detokenize: {} tokens at a null pointer",
                  n_tokens);
    if (!buf && capacity > 0) return null_argument("kamera_detokenize", "buf");
    const Model& m = *model->model;
    if (!m.tokenizer)
      return fail(KAMERA_ERR_UNSUPPORTED, "kamera_detokenize: {} has no tokenizer", m.source);
    std::vector<int32_t> ids(tokens, tokens + n_tokens);
    for (int32_t t : ids)
      if (t < 0 || t >= m.tokenizer->n_vocab())
        return fail(KAMERA_ERR_INVALID_ARGUMENT,
                    "kamera_detokenize: token {} is outside the vocabulary [0, {})", t,
                    m.tokenizer->n_vocab());
    const std::string text = m.tokenizer->decode_all(ids);
    *length = text.size();
    if (!buf) return KAMERA_OK;
    if (text.size() + 1 > capacity)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_detokenize: the text needs {} bytes with its NUL, the buffer holds {}",
                  text.size() + 1, capacity);
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return KAMERA_OK;
  });
}

}  // extern "C"
