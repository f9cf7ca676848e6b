#include "vision/qwen3vl_video.h"

#include <fmt/format.h>

#include <cmath>

#include "vision/rope_index.h"
#include "vision/vl_prompt.h"

namespace kamera {

Result<std::vector<double>> qwen3vl_timestamps(std::span<const int> indices, double fps,
                                               int temporal_patch) {
  if (indices.empty() || !(fps > 0) || !std::isfinite(fps) || temporal_patch < 1)
    return make_error(ErrorCode::InvalidArgument,
                      "video timestamps: {} frame indices at {} fps (need frames and fps > 0)",
                      indices.size(), fps);
  std::vector<int> idx(indices.begin(), indices.end());
  while (idx.size() % size_t(temporal_patch) != 0) idx.push_back(idx.back());
  std::vector<double> ts;
  for (size_t i = 0; i < idx.size(); i += size_t(temporal_patch))
    ts.push_back((idx[i] / fps + idx[i + size_t(temporal_patch) - 1] / fps) / 2);
  return ts;
}

std::string qwen3vl_timestamp_text(double seconds) {
  return fmt::format("<{:.1f} seconds>", seconds);
}

Result<std::vector<ChunkContent>> qwen3vl_video_pieces(const Tokenizer& tok,
                                                       const QwenVisionEmbeddings& video,
                                                       std::span<const double> timestamps) {
  if (int(timestamps.size()) != video.grid_t)
    return make_error(ErrorCode::InvalidArgument,
                      "video: {} timestamps for {} temporal pairs of frames", timestamps.size(),
                      video.grid_t);
  const int32_t start = find_piece(tok, kVisionStart), end = find_piece(tok, kVisionEnd);
  if (start < 0 || end < 0)
    return make_error(ErrorCode::InvalidArgument, "the vocabulary has no {} / {} token",
                      kVisionStart, kVisionEnd);
  std::vector<ChunkContent> pieces;
  std::vector<int32_t> text;
  const size_t per_pair = size_t(video.grid_h) * video.grid_w * video.dim;
  for (int k = 0; k < video.grid_t; ++k) {
    const auto ts = tok.encode_raw(qwen3vl_timestamp_text(timestamps[size_t(k)]));
    text.insert(text.end(), ts.begin(), ts.end());
    text.push_back(start);
    pieces.push_back(ChunkContent::from_tokens(std::exchange(text, {})));
    QwenVisionEmbeddings pair{1, video.grid_h, video.grid_w, video.dim, {}};
    pair.rows.assign(video.rows.begin() + std::ptrdiff_t(k * per_pair),
                     video.rows.begin() + std::ptrdiff_t((k + 1) * per_pair));
    pieces.push_back(image_chunk(std::move(pair)));
    text.push_back(end);
  }
  pieces.push_back(ChunkContent::from_tokens(std::move(text)));
  return pieces;
}

}  // namespace kamera
