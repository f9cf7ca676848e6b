#include "reuse/chunk_kv.h"

#include <cstring>

namespace kamera {

ChannelMatrix::ChannelMatrix(int rows, int cols, DType dtype)
    : rows_(rows), cols_(cols), dtype_(dtype) {
  KAMERA_ASSERT(dtype == DType::F32 || dtype == DType::BF16);
  if (dtype == DType::F32) {
    f32_.resize(size_t(rows) * cols);
  } else {
    b16_.resize(size_t(rows) * cols);
  }
}

void ChannelMatrix::set_row(int r, const float* src) {
  if (dtype_ == DType::F32) {
    std::memcpy(f32_.data() + size_t(r) * cols_, src, sizeof(float) * cols_);
  } else {
    quantize_row(DType::BF16, src, b16_.data() + size_t(r) * cols_, cols_);
  }
}

void ChannelMatrix::get_row(int r, float* dst) const {
  if (dtype_ == DType::F32) {
    std::memcpy(dst, f32_.data() + size_t(r) * cols_, sizeof(float) * cols_);
  } else {
    dequantize_row(DType::BF16, b16_.data() + size_t(r) * cols_, dst, cols_);
  }
}

ChunkKV::ChunkKV(const KvLayout& l, int n, DType dtype) : layout(l), n_tokens(n) {
  blocks.reserve(size_t(l.n_layers) * l.channels.size());
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (const ChannelDesc& c : l.channels) blocks.emplace_back(n, c.width, dtype);
}

size_t ChunkKV::bytes() const {
  size_t b = 0;
  for (const auto& m : blocks) b += m.bytes();
  return b;
}

ChunkKV read_chunk_kv(const KvPool& pool, SeqId seq, int begin, int n, DType dtype) {
  const KvLayout& l = pool.layout();
  ChunkKV kv(l, n, dtype);
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (int ch = 0; ch < int(l.channels.size()); ++ch) {
      ChannelMatrix& m = kv.at(layer, ch);
      for (int i = 0; i < n; ++i) m.set_row(i, pool.row(seq, layer, ch, begin + i));
    }
  return kv;
}

void write_chunk_kv(const ChunkKV& kv, KvPool& pool, SeqId seq, int begin) {
  const KvLayout& l = pool.layout();
  KAMERA_ASSERT(kv.layout.n_layers == l.n_layers && kv.layout.channels.size() == l.channels.size());
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (int ch = 0; ch < int(l.channels.size()); ++ch) {
      const ChannelMatrix& m = kv.at(layer, ch);
      for (int i = 0; i < kv.n_tokens; ++i) m.get_row(i, pool.row(seq, layer, ch, begin + i));
    }
}

}  // namespace kamera
