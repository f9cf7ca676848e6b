// The Q8_0x16 layout of quant_repack.h: repacking and unpacking, byte by byte in 4-byte units.
#include "ops/quant_repack.h"

#include <cstring>

#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"

namespace kamera::quant {

namespace {

constexpr size_t kBlockGroupBytes = kQ8x16Rows * sizeof(BlockQ8_0);  // 544
constexpr size_t kScaleBytes = kQ8x16Rows * 2;                       // 32

const uint8_t* group_block(const WeightView& w, int64_t g, int64_t b) {
  return w.data + size_t(g) * kQ8x16Rows * w.row_bytes + size_t(b) * kBlockGroupBytes;
}

uint32_t flip(uint32_t q) {
  return q ^ 0x80808080u;
}

}  // namespace

bool decode_has_q8_0x16() {
  return decode_kernels().vec_dot_q8_0x16 != nullptr;
}

bool q8_0x16_fits(const WeightView& w) {
  return w.type == GgmlType::Q8_0 && w.layout == WeightLayout::Rows && w.rows > 0 &&
         w.rows % kQ8x16Rows == 0 && w.cols % 32 == 0;
}

void repack_q8_0x16(const WeightView& src, int64_t g0, int64_t g1, uint8_t* dst) {
  const int64_t nb = src.cols / 32;
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = dst + size_t(g) * kQ8x16Rows * src.row_bytes + size_t(b) * kBlockGroupBytes;
      for (int64_t j = 0; j < kQ8x16Rows; ++j) {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(src.row(g * kQ8x16Rows + j)) + b;
        std::memcpy(out + 2 * j, &blk->d, 2);
        for (int c = 0; c < 8; ++c) {
          uint32_t q;
          std::memcpy(&q, blk->qs + 4 * c, 4);
          q = flip(q);
          std::memcpy(out + kScaleBytes + 64 * c + 4 * j, &q, 4);
        }
      }
    }
}

void unpack_q8_0x16_rows(const WeightView& w, int64_t r0, int64_t count, uint8_t* dst) {
  const int64_t nb = w.cols / 32;
  for (int64_t r = r0; r < r0 + count; ++r) {
    auto* out = reinterpret_cast<BlockQ8_0*>(dst + size_t(r - r0) * w.row_bytes);
    const int64_t g = r / kQ8x16Rows, j = r % kQ8x16Rows;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* in = group_block(w, g, b);
      std::memcpy(&out[b].d, in + 2 * j, 2);
      for (int c = 0; c < 8; ++c) {
        uint32_t q;
        std::memcpy(&q, in + kScaleBytes + 64 * c + 4 * j, 4);
        q = flip(q);
        std::memcpy(out[b].qs + 4 * c, &q, 4);
      }
    }
  }
}

void q8_0_block_sums(const void* act, int64_t cols, int32_t* sums) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t s = 0;
    for (int8_t q : a[b].qs) s += q;
    sums[b] = 128 * s;
  }
}

}  // namespace kamera::quant
