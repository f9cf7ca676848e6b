// Chunks: made from token ids, embedding rows or a vision frame; cached in a context's store;
// their canonical KV viewed read-only (include/kamera.h).
#include "api/handles.h"
#include "vision/frame_chunk.h"
#include "vision/mmproj_kind.h"

using namespace kamera;
using namespace kamera::api;

namespace {

constexpr int32_t kMaxRelativePosition = 1 << 24;  // keeps extents and shifts far from overflow

}  // namespace

kamera_status kamera::api::make_chunk(const char* fn, const Model& m, ChunkContent content,
                                      kamera_chunk** out) {
  if (auto st = content.validate(m.cfg.n_vocab, m.cfg.input_width()); !st.ok())
    return set_error(with_context(st.error(), fn));
  for (const Pos& p : content.layout)
    if (p.t > kMaxRelativePosition || p.h > kMaxRelativePosition || p.w > kMaxRelativePosition)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "{}: a relative position exceeds {}", fn,
                  kMaxRelativePosition);
  auto h = std::make_unique<kamera_chunk>();
  h->id = chunk_id(m.fingerprint, content);
  h->fingerprint = m.fingerprint;
  h->content = std::move(content);
  *out = h.release();
  return KAMERA_OK;
}

namespace {

// The tower side of a handle for a llama.cpp mmproj (Tower: QwenVisionModel or
// KimiVisionModel).
template <class Handle>
kamera_status load_tower(const char* path, std::unique_ptr<Handle>& out) {
  auto tower = decltype(Handle::tower)::load(path);
  if (!tower.ok()) return set_error(tower.error());
  out = std::make_unique<Handle>();
  out->tower = std::move(tower.value());
  return KAMERA_OK;
}

}  // namespace

extern "C" {

kamera_status kamera_chunk_from_tokens(const kamera_model* model, const int32_t* tokens,
                                       int32_t n_tokens, kamera_chunk** out) {
  clear_out(out);
  return guarded("kamera_chunk_from_tokens", [&] {
    KAMERA_API_REQUIRE("kamera_chunk_from_tokens", model);
    KAMERA_API_REQUIRE("kamera_chunk_from_tokens", tokens);
    KAMERA_API_REQUIRE("kamera_chunk_from_tokens", out);
    if (n_tokens < 1)
      return fail(KAMERA_ERR_INVALID_ARGUMENT, "kamera_chunk_from_tokens: {} tokens (need >= 1)",
                  n_tokens);
    return make_chunk("kamera_chunk_from_tokens", *model->model,
                      ChunkContent::from_tokens(std::vector<int32_t>(tokens, tokens + n_tokens)),
                      out);
  });
}

kamera_status kamera_chunk_from_embeddings(const kamera_model* model, const float* rows,
                                           int32_t n_rows, int32_t dim, const kamera_pos* layout,
                                           kamera_chunk** out) {
  clear_out(out);
  return guarded("kamera_chunk_from_embeddings", [&] {
    KAMERA_API_REQUIRE("kamera_chunk_from_embeddings", model);
    KAMERA_API_REQUIRE("kamera_chunk_from_embeddings", rows);
    KAMERA_API_REQUIRE("kamera_chunk_from_embeddings", out);
    if (n_rows < 1 || dim < 1)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_chunk_from_embeddings: {} rows of width {} (need >= 1 of each)", n_rows,
                  dim);
    ChunkContent c;
    c.dim = dim;
    c.embeddings.assign(rows, rows + size_t(n_rows) * size_t(dim));
    c.layout.resize(size_t(n_rows));
    for (int32_t i = 0; i < n_rows; ++i)
      c.layout[size_t(i)] = layout ? Pos{layout[i].t, layout[i].h, layout[i].w} : Pos::linear(i);
    return make_chunk("kamera_chunk_from_embeddings", *model->model, std::move(c), out);
  });
}

void kamera_chunk_free(kamera_chunk* chunk) {
  delete chunk;
}

int32_t kamera_chunk_n_tokens(const kamera_chunk* chunk) {
  return chunk ? chunk->content.n() : 0;
}

int32_t kamera_chunk_extent(const kamera_chunk* chunk) {
  return chunk ? chunk->content.extent() : 0;
}

kamera_status kamera_chunk_id(const kamera_chunk* chunk, char out[KAMERA_ID_HEX_SIZE]) {
  return guarded("kamera_chunk_id", [&] {
    KAMERA_API_REQUIRE("kamera_chunk_id", chunk);
    KAMERA_API_REQUIRE("kamera_chunk_id", out);
    write_hex(chunk->id, out);
    return KAMERA_OK;
  });
}

kamera_status kamera_context_cache_chunk(kamera_context* ctx, kamera_chunk* chunk,
                                         int32_t* formed) {
  return guarded("kamera_context_cache_chunk", [&] {
    KAMERA_API_REQUIRE("kamera_context_cache_chunk", ctx);
    KAMERA_API_REQUIRE("kamera_context_cache_chunk", chunk);
    Context& c = *ctx->box->ctx;
    if (auto st = check_chunk_model("kamera_context_cache_chunk", chunk, c.model());
        st != KAMERA_OK)
      return st;
    bool was_formed = false;
    auto e = c.cache().canonical(chunk->content, DType::F32, &was_formed);
    if (!e.ok()) return set_error(with_context(e.error(), "kamera_context_cache_chunk"));
    if (chunk->canonical && chunk->canonical != *e) chunk->retired.push_back(chunk->canonical);
    chunk->canonical = *e;
    if (formed) *formed = was_formed;
    return KAMERA_OK;
  });
}

kamera_status kamera_chunk_kv(const kamera_chunk* chunk, int32_t layer, int32_t channel,
                              const float** data, int32_t* rows, int32_t* cols) {
  if (data) *data = nullptr;
  return guarded("kamera_chunk_kv", [&] {
    KAMERA_API_REQUIRE("kamera_chunk_kv", chunk);
    KAMERA_API_REQUIRE("kamera_chunk_kv", data);
    KAMERA_API_REQUIRE("kamera_chunk_kv", rows);
    KAMERA_API_REQUIRE("kamera_chunk_kv", cols);
    if (!chunk->canonical)
      return fail(KAMERA_ERR_NOT_FOUND,
                  "kamera_chunk_kv: chunk {} has no KV yet (kamera_context_cache_chunk first)",
                  chunk->id.hex());
    const ChunkKV& kv = chunk->canonical->kv;
    const int n_ch = int(kv.layout.channels.size());
    if (layer < 0 || layer >= kv.layout.n_layers || channel < 0 || channel >= n_ch)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_chunk_kv: (layer {}, channel {}) is outside {} layers x {} channels",
                  layer, channel, kv.layout.n_layers, n_ch);
    const ChannelMatrix& m = kv.at(layer, channel);
    if (m.dtype() != DType::F32)
      return fail(KAMERA_ERR_UNSUPPORTED, "kamera_chunk_kv: the canonical is stored as {}",
                  dtype_name(m.dtype()));
    *data = m.f32_data();
    *rows = m.rows();
    *cols = m.cols();
    return KAMERA_OK;
  });
}

kamera_status kamera_vision_load(const char* path, kamera_vision** out) {
  clear_out(out);
  return guarded("kamera_vision_load", [&] {
    KAMERA_API_REQUIRE("kamera_vision_load", path);
    KAMERA_API_REQUIRE("kamera_vision_load", out);
    auto h = std::make_unique<kamera_vision>();
    auto type = mmproj_projector_type(path);
    if (!type.ok()) return set_error(with_context(type.error(), "kamera_vision_load"));
    auto audio = mmproj_audio_width(path);  // an audio tower (an Omni file: its audio half)
    if (!audio.ok()) return set_error(with_context(audio.error(), "kamera_vision_load"));
    if (*audio > 0) {
      h->picture = std::make_unique<PictureTowerHandle>();
      h->picture->path = path;
      h->picture->type = *type;
      h->picture->out_dim = *audio;
      h->picture->audio = true;
      *out = h.release();
      return KAMERA_OK;
    }
    const bool qwen = is_qwen_projector(*type);
    if (qwen || *type == "kimivl") {
      const kamera_status st = qwen ? load_tower(path, h->qwen) : load_tower(path, h->kimi);
      if (st == KAMERA_OK) *out = h.release();
      return st;
    }
    if (*type == "idefics3" || *type == "gemma3" || *type == "internvl" || *type == "mlp") {
      auto dim = mmproj_projection_dim(path);  // the tower loads beside its first decoder
      if (!dim.ok()) return set_error(with_context(dim.error(), "kamera_vision_load"));
      h->picture = std::make_unique<PictureTowerHandle>();
      h->picture->path = path;
      h->picture->type = *type;
      h->picture->out_dim = *dim;
      *out = h.release();
      return KAMERA_OK;
    }
    auto vm = VisionModel::load(path);
    if (!vm.ok()) return set_error(vm.error());
    h->model = std::move(vm.value());
    h->encoder = std::make_unique<VisionEncoder>(h->model);
    *out = h.release();
    return KAMERA_OK;
  });
}

void kamera_vision_free(kamera_vision* vision) {
  delete vision;
}

kamera_status kamera_vision_get_info(const kamera_vision* vision, kamera_vision_info* out) {
  return guarded("kamera_vision_get_info", [&] {
    KAMERA_API_REQUIRE("kamera_vision_get_info", vision);
    KAMERA_API_REQUIRE("kamera_vision_get_info", out);
    if (vision->qwen) {  // any image size: rows per image follow its resized grid
      *out = kamera_vision_info{0, 0, 0, vision->qwen->tower.cfg.embed_width()};
      return KAMERA_OK;
    }
    if (vision->kimi) {  // any image size: one row per merged 2 x 2 patch block
      *out = kamera_vision_info{0, 0, 0, vision->kimi->tower.cfg.out_dim};
      return KAMERA_OK;
    }
    if (vision->picture) {  // any image size: rows per picture as the family cuts it
      *out = kamera_vision_info{0, 0, 0, vision->picture->out_dim};
      return KAMERA_OK;
    }
    const VisionConfig& c = vision->model.cfg;
    *out = kamera_vision_info{c.image_size, c.token_grid(), c.n_tokens(), c.out_dim};
    return KAMERA_OK;
  });
}

kamera_status kamera_vision_encode(kamera_vision* vision, const kamera_model* decoder,
                                   const uint8_t* rgb, size_t n_bytes, kamera_chunk** out) {
  clear_out(out);
  return guarded("kamera_vision_encode", [&] {
    KAMERA_API_REQUIRE("kamera_vision_encode", vision);
    KAMERA_API_REQUIRE("kamera_vision_encode", decoder);
    KAMERA_API_REQUIRE("kamera_vision_encode", rgb);
    KAMERA_API_REQUIRE("kamera_vision_encode", out);
    if (vision->picture && vision->picture->audio)
      return fail(KAMERA_ERR_UNSUPPORTED,
                  "kamera_vision_encode: a {} tower takes audio clips (kamera_chunk_from_audio)",
                  vision->picture->type);
    if (vision->qwen || vision->kimi || vision->picture)
      return fail(KAMERA_ERR_UNSUPPORTED,
                  "kamera_vision_encode: a {} tower takes images of any size "
                  "(kamera_chunk_from_image)",
                  vision->qwen   ? "Qwen2-VL"
                  : vision->kimi ? "Kimi-VL"
                                 : vision->picture->type);
    const VisionConfig& vc = vision->model.cfg;
    if (vc.out_dim != decoder->model->cfg.dim)
      return fail(KAMERA_ERR_INVALID_ARGUMENT,
                  "kamera_vision_encode: the encoder's rows have width {}, the decoder's {}",
                  vc.out_dim, decoder->model->cfg.dim);
    auto c = frame_chunk(*vision->encoder, std::span<const uint8_t>(rgb, n_bytes));
    if (!c.ok()) return set_error(with_context(c.error(), "kamera_vision_encode"));
    return make_chunk("kamera_vision_encode", *decoder->model, std::move(c.value()), out);
  });
}

}  // extern "C"
