#include "vision/frame_chunk.h"

namespace kamera {

Result<ChunkContent> frame_chunk(VisionEncoder& enc, std::span<const uint8_t> rgb) {
  const VisionConfig& vc = enc.model().cfg;
  if (rgb.size() != size_t(vc.image_size) * vc.image_size * 3)
    return make_error(ErrorCode::InvalidArgument, "frame: {} bytes, the encoder takes {} x {} RGB",
                      rgb.size(), vc.image_size, vc.image_size);
  ChunkContent c;
  KAMERA_TRY(enc.encode(rgb.data(), &c.embeddings));
  c.dim = vc.out_dim;
  const int g = vc.token_grid();
  for (int r = 0; r < g; ++r)
    for (int col = 0; col < g; ++col) c.layout.push_back(Pos{0, r, col});
  return c;
}

}  // namespace kamera
