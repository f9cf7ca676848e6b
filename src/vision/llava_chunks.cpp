#include "vision/llava_chunks.h"

#include "media/resize.h"

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

LlavaImageChunks::LlavaImageChunks(const LlavaVisionModel& tower,
                                   const std::array<uint64_t, 2>& decoder_fp, ThreadPool* pool,
                                   size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> LlavaImageChunks::image(const Image& img,
                                                                    bool* encoded) {
  return lru_.get(
      picture_key("kamera-llava-image-v1", img, tower_.fingerprint, decoder_fp_),
      tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        KAMERA_ASSIGN_OR_RETURN(const Image sq, llava_square(img, tower_.cfg));
        ChunkContent c;
        c.dim = tower_.cfg.out_dim;
        KAMERA_ASSIGN_OR_RETURN(c.embeddings, enc_.encode(sq));
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

}  // namespace kamera
