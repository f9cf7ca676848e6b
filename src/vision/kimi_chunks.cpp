#include "vision/kimi_chunks.h"

#include <xxhash.h>

namespace kamera {

VisionDelimiters kimi_delimiters(const Tokenizer* tok) {
  if (!tok) return {};
  const int32_t start = find_piece(*tok, kMediaStart), content = find_piece(*tok, kMediaContent),
                end = find_piece(*tok, kMediaEnd);
  if (start < 0 || content < 0 || end < 0) return {};
  VisionDelimiters d;
  d.open_text = std::string(kKimiImageOpen);
  d.close_text = std::string(kMediaEnd);
  d.open.push_back(start);
  for (int32_t id : tok->encode_raw("image")) d.open.push_back(id);
  d.open.push_back(content);
  d.close.push_back(end);
  return d;
}

Status check_kimi_pair(const KimiVisionConfig& tower, const ModelConfig& decoder,
                       const std::string& mmproj) {
  if (decoder.arch != Arch::Deepseek2)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a Kimi-VL tower needs a deepseek2 decoder; this one is '{}'", mmproj,
                      arch_name(decoder.arch));
  if (tower.out_dim != decoder.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.dim);
  return Status::Ok();
}

ChunkContent kimi_image_chunk(KimiVisionEmbeddings e) {
  ChunkContent c;
  c.dim = e.dim;
  c.embeddings = std::move(e.rows);
  for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
  return c;
}

ChunkId kimi_image_key(const Image& img, const KimiVisionConfig& cfg,
                       const std::array<uint64_t, 2>& tower_fp,
                       const std::array<uint64_t, 2>& dec_fp) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const char tag[] = "kamera-kimi-image-v1";
  XXH3_128bits_update(st, tag, sizeof(tag));
  XXH3_128bits_update(st, tower_fp.data(), sizeof(uint64_t) * 2);
  XXH3_128bits_update(st, dec_fp.data(), sizeof(uint64_t) * 2);
  const int32_t ints[] = {cfg.in_token_limit, img.width, img.height};
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, img.rgb.data(), img.rgb.size());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

KimiImageChunks::KimiImageChunks(const KimiVisionModel& tower,
                                 const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                 size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> KimiImageChunks::image(const Image& img,
                                                                   bool* encoded) {
  const ChunkId key = kimi_image_key(img, tower_.cfg, tower_.fingerprint, decoder_fp_);
  return lru_.get(
      key, tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        KAMERA_ASSIGN_OR_RETURN(const KimiPatches p, kimi_preprocess_image(img, tower_.cfg));
        KAMERA_ASSIGN_OR_RETURN(KimiVisionEmbeddings e, enc_.encode(p));
        return kimi_image_chunk(std::move(e));
      },
      encoded);
}

Result<std::shared_ptr<const ChunkContent>> KimiImageChunks::frames(std::span<const Image> frames,
                                                                    bool* encoded, double) {
  if (encoded) *encoded = false;
  if (frames.empty()) return make_error(ErrorCode::InvalidArgument, "image chunk: no frames");
  if (frames.size() > 1)
    return make_error(ErrorCode::Unsupported,
                      "Kimi-VL's tower reads one picture per chunk, not {} frames (its video "
                      "path is not here)",
                      frames.size());
  return image(frames.front(), encoded);
}

}  // namespace kamera
