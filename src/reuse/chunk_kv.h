// Position-free KV of one chunk: for every (layer, channel) an n_tokens x width matrix, rope
// channels pre-rotation. Stored in f32, f16 or bf16 (kv/kv_row.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kv/pool.h"

namespace kamera {

class ChannelMatrix {
 public:
  ChannelMatrix() = default;
  ChannelMatrix(int rows, int cols, DType dtype);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return f32_.size() * 4 + b16_.size() * 2; }

  void set_row(int r, const float* src);
  void get_row(int r, float* dst) const;
  // Stored bytes (rows x cols of f32, f16 or bf16), for serialization.
  const void* raw() const {
    return dtype_ == DType::F32 ? (const void*)f32_.data() : (const void*)b16_.data();
  }
  void* raw() { return dtype_ == DType::F32 ? (void*)f32_.data() : (void*)b16_.data(); }
  // Direct f32 view (only for F32 storage).
  const float* f32_data() const { return f32_.data(); }
  float* f32_data() { return f32_.data(); }

 private:
  int rows_ = 0, cols_ = 0;
  DType dtype_ = DType::F32;
  std::vector<float> f32_;
  std::vector<uint16_t> b16_;
};

struct ChunkKV {
  KvLayout layout;
  int n_tokens = 0;
  std::vector<ChannelMatrix> blocks;  // index layer * n_channels + channel

  ChunkKV() = default;
  ChunkKV(const KvLayout& layout, int n_tokens, DType dtype);
  ChannelMatrix& at(int layer, int channel) {
    return blocks[size_t(layer) * layout.channels.size() + channel];
  }
  const ChannelMatrix& at(int layer, int channel) const {
    return blocks[size_t(layer) * layout.channels.size() + channel];
  }
  size_t bytes() const;
};

// Bytes of rows the ChunkKV(layout, n, dtype) constructor has allocated in this process, all
// threads together: what KV copied out of the pool onto the heap costs (tests read it).
int64_t chunk_kv_bytes_allocated();

// Copies rows of tokens [begin, begin + n) of a sequence out of the pool (pre-rotation keys),
// converted from the pool's dtype to `dtype` (exact when `dtype` is as wide as the pool's).
ChunkKV read_chunk_kv(const KvPool& pool, SeqId seq, int begin, int n, DType dtype = DType::F32);

// Writes the chunk's rows into tokens [begin, begin + kv.n_tokens) of a sequence. The tokens must
// exist and be writable (KvPool::insert / make_writable). Rows of another dtype than the pool's are
// converted: widened exactly, or rounded once to the pool's dtype.
void write_chunk_kv(const ChunkKV& kv, KvPool& pool, SeqId seq, int begin);

}  // namespace kamera
