// A frame of the mini-VL vision encoder (vision/encoder.h) as a chunk: the encoder's rows of one
// image_size x image_size RGB frame, with layout (0, row, col) over its token grid. From then on a
// frame is an ordinary chunk (reuse/chunk.h): content-addressed, cached, relocated.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "reuse/chunk.h"
#include "vision/encoder.h"

namespace kamera {

// `rgb`: image_size * image_size * 3 bytes, row-major; anything else is InvalidArgument.
Result<ChunkContent> frame_chunk(VisionEncoder& enc, std::span<const uint8_t> rgb);

}  // namespace kamera
