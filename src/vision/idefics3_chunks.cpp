#include "vision/idefics3_chunks.h"

namespace kamera {

Status check_idefics3_pair(const Idefics3VisionConfig& tower, const Model& decoder,
                           const std::string& mmproj) {
  if (decoder.cfg.arch != Arch::Llama)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a SmolVLM tower needs a llama decoder (SmolLM2); this one is '{}'",
                      mmproj, arch_name(decoder.cfg.arch));
  if (tower.out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.dim);
  if (!decoder.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "{}: the decoder {} has no vocabulary", mmproj,
                      decoder.source);
  return Status::Ok();
}

Result<Idefics3TokenRows> Idefics3TokenRows::from(const Model& decoder) {
  if (!decoder.tokenizer)
    return make_error(ErrorCode::InvalidArgument, "{} has no vocabulary", decoder.source);
  Idefics3TokenRows t;
  KAMERA_ASSIGN_OR_RETURN(t.vocab, idefics3_vocab(*decoder.tokenizer));
  t.dim = decoder.cfg.dim;
  std::vector<int32_t> ids = {t.vocab.fake, t.vocab.global};
  for (const auto* v : {&t.vocab.newline, &t.vocab.double_newline, &t.vocab.row_col})
    ids.insert(ids.end(), v->begin(), v->end());
  for (int32_t id : ids) {
    if (id < 0 || id >= decoder.tok_embd.rows())
      return make_error(ErrorCode::InvalidArgument, "{}: token {} outside the embedding table",
                        decoder.source, id);
    std::vector<float>& row = t.rows[id];
    row.resize(size_t(t.dim));
    decoder.tok_embd.rows_f32(id, 1, row.data());
  }
  return t;
}

Result<ChunkContent> idefics3_picture_chunk(const std::vector<Idefics3Piece>& layout,
                                            const std::vector<std::vector<float>>& tiles,
                                            const Idefics3TokenRows& tokens) {
  ChunkContent c;
  c.dim = tokens.dim;
  for (const Idefics3Piece& p : layout) {
    const std::vector<float>* src = nullptr;
    if (p.tile >= 0) {
      if (size_t(p.tile) >= tiles.size())
        return make_error(ErrorCode::InvalidArgument, "idefics3 chunk: no tile {}", p.tile);
      src = &tiles[size_t(p.tile)];
    } else if (auto it = tokens.rows.find(p.token); it != tokens.rows.end()) {
      src = &it->second;
    } else {
      return make_error(ErrorCode::InvalidArgument, "idefics3 chunk: token {} has no row", p.token);
    }
    if (src->size() % size_t(c.dim))
      return make_error(ErrorCode::InvalidArgument, "idefics3 chunk: rows of another width");
    c.embeddings.insert(c.embeddings.end(), src->begin(), src->end());
  }
  for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
  return c;
}

Idefics3ImageChunks::Idefics3ImageChunks(const Idefics3VisionModel& tower, Idefics3TokenRows tokens,
                                         const std::array<uint64_t, 2>& decoder_fp,
                                         ThreadPool* pool, size_t max_entries)
    : tower_(tower),
      tokens_(std::move(tokens)),
      decoder_fp_(decoder_fp),
      enc_(tower, pool),
      lru_(decoder_fp, max_entries) {}

Result<int64_t> Idefics3ImageChunks::rows(int width, int height) const {
  KAMERA_ASSIGN_OR_RETURN(const Idefics3Grid g, idefics3_grid(width, height, tower_.cfg));
  KAMERA_ASSIGN_OR_RETURN(const auto layout, idefics3_layout(g, tokens_.vocab));
  return idefics3_layout_rows(layout, tower_.cfg);
}

Result<ChunkContent> Idefics3ImageChunks::encode(const Image& img) {
  KAMERA_ASSIGN_OR_RETURN(const Idefics3Tiles t, idefics3_preprocess(img, tower_.cfg));
  KAMERA_ASSIGN_OR_RETURN(const auto layout, idefics3_layout(t.grid, tokens_.vocab));
  std::vector<std::vector<float>> rows;
  for (const Image& tile : t.tiles) {
    KAMERA_ASSIGN_OR_RETURN(std::vector<float> r, enc_.encode(tile));
    rows.push_back(std::move(r));
  }
  return idefics3_picture_chunk(layout, rows, tokens_);
}

Result<std::shared_ptr<const ChunkContent>> Idefics3ImageChunks::image(const Image& img,
                                                                       bool* encoded) {
  return lru_.get(
      picture_key("kamera-idefics3-image-v1", img, tower_.fingerprint, decoder_fp_), tokens_.dim,
      [&] { return encode(img); }, encoded);
}

}  // namespace kamera
