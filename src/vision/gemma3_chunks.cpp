#include "vision/gemma3_chunks.h"

namespace kamera {

VisionDelimiters gemma3_delimiters(const Tokenizer* tok) {
  if (!tok) return {};
  const int32_t start = find_piece(*tok, kStartOfImage), end = find_piece(*tok, kEndOfImage);
  if (start < 0 || end < 0) return {};
  VisionDelimiters d;
  d.open_text = std::string(kStartOfImage);
  d.close_text = std::string(kEndOfImage);
  d.open.push_back(start);
  d.close.push_back(end);
  return d;
}

Status check_gemma3_pair(const Gemma3VisionConfig& tower, const Model& decoder,
                         const std::string& mmproj) {
  if (!is_gemma3(decoder.cfg.arch))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a Gemma 3 tower needs a gemma3 decoder; this one is '{}'", mmproj,
                      arch_name(decoder.cfg.arch));
  if (tower.out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.dim);
  if (gemma3_delimiters(decoder.tokenizer ? &*decoder.tokenizer : nullptr).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the decoder {} has no {} / {} tokens in its vocabulary", mmproj,
                      decoder.source, kStartOfImage, kEndOfImage);
  return Status::Ok();
}

Gemma3ImageChunks::Gemma3ImageChunks(const Gemma3VisionModel& tower,
                                     const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                     size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> Gemma3ImageChunks::image(const Image& img,
                                                                     bool* encoded) {
  return lru_.get(
      picture_key("kamera-gemma3-image-v1", img, tower_.fingerprint, decoder_fp_),
      tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        KAMERA_ASSIGN_OR_RETURN(const Image picture, gemma3_picture(img, tower_.cfg));
        ChunkContent c;
        c.dim = tower_.cfg.out_dim;
        KAMERA_ASSIGN_OR_RETURN(c.embeddings, enc_.encode(picture));
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

}  // namespace kamera
