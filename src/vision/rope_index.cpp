#include "vision/rope_index.h"

#include "cache/chunk_cache.h"

namespace kamera {

namespace {

std::vector<Pos> image_layout(const QwenVisionEmbeddings& e) {
  std::vector<Pos> layout;
  layout.reserve(size_t(e.n_rows()));
  for (int t = 0; t < e.grid_t; ++t)
    for (int r = 0; r < e.grid_h; ++r)
      for (int c = 0; c < e.grid_w; ++c) layout.push_back(Pos{t, r, c});
  return layout;
}

}  // namespace

ChunkContent image_chunk(const QwenVisionEmbeddings& e) {
  ChunkContent c;
  c.embeddings = e.rows;
  c.dim = e.dim;
  c.layout = image_layout(e);
  return c;
}

ChunkContent image_chunk(QwenVisionEmbeddings&& e) {
  ChunkContent c;
  c.layout = image_layout(e);
  c.dim = e.dim;
  c.embeddings = std::move(e.rows);
  return c;
}

std::vector<std::vector<Pos>> place_pieces(std::span<const ChunkContent> pieces, int32_t start,
                                           int32_t* next) {
  std::vector<std::vector<Pos>> out;
  out.reserve(pieces.size());
  int32_t p = start;
  for (const ChunkContent& c : pieces) {
    out.push_back(c.positions_at(p));
    p += c.extent();
  }
  if (next) *next = p;
  return out;
}

Result<std::vector<float>> prefill_pieces(Engine& engine, KvPool& pool, SeqId seq,
                                          std::span<const ChunkContent> pieces, int32_t start,
                                          LogitsMode logits, int32_t* next) {
  const ModelConfig& cfg = engine.model().cfg;
  for (const ChunkContent& c : pieces) KAMERA_TRY(c.validate(cfg.n_vocab, cfg.input_width()));
  const auto positions = place_pieces(pieces, start, next);
  std::vector<float> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ForwardOptions fo;
    fo.logits = i + 1 == pieces.size() ? logits : LogitsMode::None;
    ForwardInput in = forward_input(pieces[i], positions[i]);
    in.non_causal = picture_rows(cfg, pieces[i]);  // a Gemma 3 picture's rows see each other
    KAMERA_ASSIGN_OR_RETURN(out, engine.forward(pool, seq, in, fo));
  }
  return out;
}

}  // namespace kamera
