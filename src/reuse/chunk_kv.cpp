#include "reuse/chunk_kv.h"

#include <atomic>
#include <cstring>

#include "kv/kv_row.h"

namespace kamera {

ChannelMatrix::ChannelMatrix(int rows, int cols, DType dtype)
    : rows_(rows), cols_(cols), dtype_(dtype) {
  KAMERA_ASSERT(is_kv_dtype(dtype));
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
    kv_store_row(dtype_, src, b16_.data() + size_t(r) * cols_, cols_);
  }
}

void ChannelMatrix::get_row(int r, float* dst) const {
  if (dtype_ == DType::F32) {
    std::memcpy(dst, f32_.data() + size_t(r) * cols_, sizeof(float) * cols_);
  } else {
    kv_load_row(dtype_, b16_.data() + size_t(r) * cols_, dst, cols_);
  }
}

namespace {
std::atomic<int64_t> g_rows_allocated{0};  // chunk_kv_bytes_allocated()
}  // namespace

ChunkKV::ChunkKV(const KvLayout& l, int n, DType dtype) : layout(l), n_tokens(n) {
  blocks.reserve(size_t(l.n_layers) * l.channels.size());
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (const ChannelDesc& c : l.channels) blocks.emplace_back(n, c.width, dtype);
  g_rows_allocated.fetch_add(int64_t(bytes()), std::memory_order_relaxed);
}

int64_t chunk_kv_bytes_allocated() {
  return g_rows_allocated.load(std::memory_order_relaxed);
}

size_t ChunkKV::bytes() const {
  size_t b = 0;
  for (const auto& m : blocks) b += m.bytes();
  return b;
}

ChunkKV read_chunk_kv(const KvPool& pool, SeqId seq, int begin, int n, DType dtype) {
  const KvLayout& l = pool.layout();
  ChunkKV kv(l, n, dtype);
  std::vector<float> row;
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (int ch = 0; ch < int(l.channels.size()); ++ch) {
      ChannelMatrix& m = kv.at(layer, ch);
      row.resize(size_t(m.cols()));
      for (int i = 0; i < n; ++i) {
        pool.read_row(seq, layer, ch, begin + i, row.data());
        m.set_row(i, row.data());
      }
    }
  return kv;
}

void write_chunk_kv(const ChunkKV& kv, KvPool& pool, SeqId seq, int begin) {
  const KvLayout& l = pool.layout();
  KAMERA_ASSERT(kv.layout.n_layers == l.n_layers && kv.layout.channels.size() == l.channels.size());
  std::vector<float> row;
  for (int layer = 0; layer < l.n_layers; ++layer)
    for (int ch = 0; ch < int(l.channels.size()); ++ch) {
      const ChannelMatrix& m = kv.at(layer, ch);
      row.resize(size_t(m.cols()));
      for (int i = 0; i < kv.n_tokens; ++i) {
        m.get_row(i, row.data());
        pool.write_row(seq, layer, ch, begin + i, row.data());
      }
    }
}

}  // namespace kamera
