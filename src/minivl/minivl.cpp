#include "minivl/minivl.h"

#include "cache/chunk_cache.h"
#include "synthetic/synthetic_model.h"

namespace kamera::minivl {

ModelConfig decoder_config() {
  ModelConfig c = *synthetic_preset(Arch::Qwen2Vl, "tiny");
  c.dim = 64;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 192;
  c.n_vocab = kVocabSize;
  c.ctx_len = 512;
  c.tied_output = false;
  c.rope.head_dim = 16;
  c.rope.n_rot = 16;
  c.rope.sections = {2, 3, 3, 0};
  return c;
}

VisionConfig vision_config() {
  VisionConfig v;
  v.image_size = kFramePixels;
  v.patch = 8;
  v.dim = 64;
  v.n_layers = 2;
  v.n_heads = 4;
  v.ffn_dim = 128;
  v.merge = 2;
  v.merger_dim = 128;
  v.out_dim = decoder_config().dim;
  return v;
}

Tokenizer::Vocab word_vocab() {
  Tokenizer::Vocab v;
  const auto& w = words();
  for (int i = 0; i < kVocabSize; ++i) {
    if (i < int(w.size())) {
      const std::string& s = w[size_t(i)];
      const bool special = !s.empty() && s.front() == '<' && s.back() == '>';
      v.pieces.push_back(special ? s : "\xe2\x96\x81" + s);
      v.types.push_back(i == 0    ? TokenType::Unknown
                        : special ? TokenType::Control
                                  : TokenType::Normal);
    } else {
      v.pieces.push_back("<unused" + std::to_string(i) + ">");
      v.types.push_back(TokenType::Unused);
    }
    v.scores.push_back(0.0f);
  }
  v.unk = 0;
  v.bos = word_id("<bos>");
  v.eos = word_id("<eos>");
  return v;
}

Result<MiniVl> MiniVl::load(const std::string& decoder_path, const std::string& vision_path) {
  MiniVl m;
  auto d = load_model(decoder_path);
  if (!d.ok()) return d.error();
  m.decoder = std::move(*d);
  const ModelConfig& c = m.decoder->cfg;
  if (c.arch != Arch::Qwen2Vl)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the mini-VL decoder must be a qwen2vl model (this is '{}')",
                      decoder_path, arch_name(c.arch));
  if (c.n_vocab != kVocabSize)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: vocabulary of {} tokens, the mini-VL word vocabulary has {}",
                      decoder_path, c.n_vocab, kVocabSize);
  auto v = VisionModel::load(vision_path);
  if (!v.ok()) return v.error();
  m.vision = std::move(*v);
  if (m.vision.cfg.out_dim != c.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects to width {}, but the decoder {} is {} wide", vision_path,
                      m.vision.cfg.out_dim, decoder_path, c.dim);
  if (m.vision.cfg.image_size != kFramePixels)
    return make_error(ErrorCode::InvalidArgument, "{}: frames are {} pixels, the clips {}",
                      vision_path, m.vision.cfg.image_size, kFramePixels);
  return m;
}

Status write_random_minivl(const std::string& decoder_path, const std::string& vision_path,
                           uint64_t seed) {
  SyntheticSpec spec;
  spec.cfg = decoder_config();
  spec.seed = seed;
  spec.name = "kamera-minivl-random";
  spec.vocab = word_vocab();
  KAMERA_TRY(write_synthetic_gguf(spec, decoder_path));
  return VisionModel::random(vision_config(), seed ^ 0x5eed).write_gguf(vision_path);
}

ChunkContent text_chunk(const std::vector<int32_t>& ids) {
  return ChunkContent::from_tokens(ids);
}

int32_t frame_start(int f, int token_grid) {
  return 1 + f * token_grid;
}

Result<std::vector<float>> clip_logits(Engine& engine, KvPool& pool,
                                       const std::vector<ChunkContent>& frames,
                                       const std::vector<int32_t>& question, bool all_positions) {
  const SeqId seq = pool.create_sequence();
  std::vector<float> out;
  auto run = [&](const ChunkContent& c, int32_t at, bool want) -> Status {
    const std::vector<Pos> pos = c.positions_at(at);
    ForwardOptions fo;
    fo.logits = want ? (all_positions ? LogitsMode::All : LogitsMode::Last) : LogitsMode::None;
    auto r = engine.forward(pool, seq, forward_input(c, pos), fo);
    if (!r.ok()) return r.error();
    out.insert(out.end(), r->begin(), r->end());
    return Status::Ok();
  };
  Status st = run(text_chunk({bos_id()}), 0, all_positions);
  int32_t p = 1;
  for (size_t f = 0; f < frames.size() && st.ok(); ++f) {
    st = run(frames[f], p, all_positions);
    p += frames[f].extent();
  }
  if (st.ok()) st = run(text_chunk(question), p, true);
  pool.free_sequence(seq);
  if (!st.ok()) return st.error();
  return out;
}

}  // namespace kamera::minivl
