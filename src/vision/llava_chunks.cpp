#include "vision/llava_chunks.h"

#include "media/resize.h"
#include "vision/llava_anyres.h"

namespace kamera {

Status check_llava_pair(const LlavaVisionConfig& tower, const Model& decoder,
                        const std::string& mmproj) {
  if (decoder.cfg.arch != Arch::Llama)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: a LLaVA tower needs a llama decoder; this one is '{}'", mmproj,
                      arch_name(decoder.cfg.arch));
  if (tower.out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.dim);
  return Status::Ok();
}

Result<Image> llava_square(const Image& img, const LlavaVisionConfig& c) {
  if (img.width < 1 || img.height < 1)
    return make_error(ErrorCode::InvalidArgument, "llava: an empty picture");
  const int side = std::max(img.width, img.height);
  Image sq = img;
  if (img.width != img.height) {
    static constexpr uint8_t kMean[3] = {122, 116, 104};  // CLIP's mean, in bytes
    sq.width = sq.height = side;
    sq.rgb.resize(size_t(side) * side * 3);
    for (size_t i = 0; i < sq.rgb.size(); ++i) sq.rgb[i] = kMean[i % 3];
    const int x0 = (side - img.width) / 2, y0 = (side - img.height) / 2;
    for (int y = 0; y < img.height; ++y)
      std::copy_n(img.rgb.data() + size_t(y) * img.width * 3, size_t(img.width) * 3,
                  sq.rgb.data() + (size_t(y + y0) * side + x0) * 3);
  }
  if (side == c.image_size) return sq;
  return resize_bicubic(sq, c.image_size, c.image_size);
}

Result<int64_t> llava_picture_rows(int width, int height, const LlavaVisionConfig& c) {
  if (width < 1 || height < 1)
    return make_error(ErrorCode::InvalidArgument, "llava: an empty picture");
  if (!c.anyres()) return int64_t(c.rows());
  KAMERA_ASSIGN_OR_RETURN(const LlavaAnyresPlan p, llava_anyres_plan(width, height, c));
  return p.rows(c.side());
}

LlavaImageChunks::LlavaImageChunks(const LlavaVisionModel& tower,
                                   const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                   size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

// The picture's rows: LLaVA-1.5's square, or LLaVA-1.6's base and tiles, packed.
Result<std::vector<float>> LlavaImageChunks::encode(const Image& img) {
  const LlavaVisionConfig& c = tower_.cfg;
  if (!c.anyres()) {
    KAMERA_ASSIGN_OR_RETURN(const Image sq, llava_square(img, c));
    return enc_.encode(sq);
  }
  KAMERA_ASSIGN_OR_RETURN(const LlavaAnyresPlan p, llava_anyres_plan(img.width, img.height, c));
  KAMERA_ASSIGN_OR_RETURN(const std::vector<Image> pics, llava_anyres_pictures(img, p, c));
  std::vector<std::vector<float>> encoded;
  for (const Image& pic : pics) {
    KAMERA_ASSIGN_OR_RETURN(std::vector<float> r, enc_.encode(pic));
    encoded.push_back(std::move(r));
  }
  return llava_anyres_pack(encoded, p, c, tower_.w.newline);
}

Result<std::shared_ptr<const ChunkContent>> LlavaImageChunks::image(const Image& img,
                                                                    bool* encoded) {
  const char* domain = tower_.cfg.anyres() ? "kamera-llava-anyres-v1" : "kamera-llava-image-v1";
  return lru_.get(
      picture_key(domain, img, tower_.fingerprint, decoder_fp_), tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        ChunkContent c;
        c.dim = tower_.cfg.out_dim;
        KAMERA_ASSIGN_OR_RETURN(c.embeddings, encode(img));
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

}  // namespace kamera
