#include "vision/internvl_chunks.h"

#include "vision/internvl_preprocess.h"

namespace kamera {

VisionDelimiters internvl_delimiters(const Tokenizer* tok) {
  if (!tok) return {};
  const int32_t open = find_piece(*tok, kInternvlImgOpen);
  const int32_t close = find_piece(*tok, kInternvlImgClose);
  if (open < 0 || close < 0) return {};
  VisionDelimiters d;
  d.open_text = std::string(kInternvlImgOpen);
  d.close_text = std::string(kInternvlImgClose);
  d.open.push_back(open);
  d.close.push_back(close);
  return d;
}

Status check_internvl_pair(const InternvlVisionConfig& tower, const Model& decoder,
                           const std::string& mmproj) {
  const Arch a = decoder.cfg.arch;
  if (a != Arch::Qwen2 && a != Arch::Qwen3)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: an InternVL tower needs a qwen2 or qwen3 decoder; this one is '{}'",
                      mmproj, arch_name(a));
  if (tower.out_dim != decoder.cfg.dim)
    return make_error(ErrorCode::InvalidArgument,
                      "{} projects images to width {}, but the decoder is {} wide (not a pair)",
                      mmproj, tower.out_dim, decoder.cfg.dim);
  if (internvl_delimiters(decoder.tokenizer ? &*decoder.tokenizer : nullptr).empty())
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the decoder {} has no {} / {} tokens in its vocabulary", mmproj,
                      decoder.source, kInternvlImgOpen, kInternvlImgClose);
  return Status::Ok();
}

int64_t internvl_picture_rows(int width, int height, const InternvlVisionConfig& c) {
  const InternvlGrid g = internvl_grid(std::max(1, width), std::max(1, height), c);
  const int tiles = g.cols * g.rows;
  return int64_t(tiles == 1 ? 1 : tiles + 1) * c.rows();
}

InternvlImageChunks::InternvlImageChunks(const InternvlVisionModel& tower,
                                         const std::array<uint64_t, 2>& decoder_fp,
                                         ThreadPool* pool, size_t max_entries)
    : tower_(tower), decoder_fp_(decoder_fp), enc_(tower, pool), lru_(decoder_fp, max_entries) {}

Result<std::shared_ptr<const ChunkContent>> InternvlImageChunks::image(const Image& img,
                                                                       bool* encoded) {
  return lru_.get(
      picture_key("kamera-internvl-image-v1", img, tower_.fingerprint, decoder_fp_),
      tower_.cfg.out_dim,
      [&]() -> Result<ChunkContent> {
        KAMERA_ASSIGN_OR_RETURN(const std::vector<Image> tiles, internvl_tiles(img, tower_.cfg));
        ChunkContent c;
        c.dim = tower_.cfg.out_dim;
        for (const Image& t : tiles) {
          KAMERA_ASSIGN_OR_RETURN(const std::vector<float> rows, enc_.encode(t));
          c.embeddings.insert(c.embeddings.end(), rows.begin(), rows.end());
        }
        for (int i = 0; i < c.n(); ++i) c.layout.push_back(Pos::linear(i));
        return c;
      },
      encoded);
}

}  // namespace kamera
