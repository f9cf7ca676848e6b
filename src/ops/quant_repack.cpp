// The layouts of quant_repack.h: repacking and unpacking, as moves of each row's block bytes to
// and from their places in the group's block column.
#include "ops/quant_repack.h"

#include <cstring>

#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"

namespace kamera::quant {

namespace {

// Copies n bytes between a group's block column (grp, at g) and one row's block (blk, at b):
// into the group when packing, back out when unpacking.
template <bool kPack>
inline void move(uint8_t* grp, size_t g, uint8_t* blk, size_t b, size_t n) {
  if constexpr (kPack) {
    std::memcpy(grp + g, blk + b, n);
  } else {
    std::memcpy(blk + b, grp + g, n);
  }
}

// Row j's block <-> its places, per layout (the offsets of the table in quant_repack.h).
template <bool kPack>
void places(WeightLayout l, uint8_t* grp, uint8_t* blk, size_t j) {
  switch (l) {
    case WeightLayout::Q8_0x16:
      move<kPack>(grp, 2 * j, blk, 0, 2);
      for (size_t c = 0; c < 8; ++c) move<kPack>(grp, 32 + 64 * c + 4 * j, blk, 2 + 4 * c, 4);
      return;
    case WeightLayout::Q5_0x16:
      move<kPack>(grp, 2 * j, blk, 0, 2);
      move<kPack>(grp, 32 + 4 * j, blk, 2, 4);  // qh, its bits reordered by q5_qh_order
      for (size_t c = 0; c < 4; ++c) move<kPack>(grp, 96 + 64 * c + 4 * j, blk, 6 + 4 * c, 4);
      return;
    case WeightLayout::Q5_1x16:
      move<kPack>(grp, 2 * j, blk, 0, 2);
      move<kPack>(grp, 32 + 2 * j, blk, 2, 2);
      move<kPack>(grp, 64 + 4 * j, blk, 4, 4);  // qh, as Q5_0x16's
      for (size_t c = 0; c < 4; ++c) move<kPack>(grp, 128 + 64 * c + 4 * j, blk, 8 + 4 * c, 4);
      return;
    case WeightLayout::Q4_0x16:
    case WeightLayout::IQ4_NLx16:
      move<kPack>(grp, 2 * j, blk, 0, 2);
      for (size_t c = 0; c < 4; ++c) move<kPack>(grp, 32 + 64 * c + 4 * j, blk, 2 + 4 * c, 4);
      return;
    case WeightLayout::Q4_Kx16:
    case WeightLayout::Q5_Kx16: {
      const bool five = l == WeightLayout::Q5_Kx16;
      const size_t qs = five ? 48 : 16, qs_at = five ? 768 : 256;  // in the block, in the column
      move<kPack>(grp, 2 * j, blk, 0, 2);
      move<kPack>(grp, 32 + 2 * j, blk, 2, 2);
      for (size_t k = 0; k < 12; ++k) move<kPack>(grp, 64 + 16 * k + j, blk, 4 + k, 1);
      if (five)
        for (size_t c = 0; c < 8; ++c) move<kPack>(grp, 256 + 64 * c + 4 * j, blk, 16 + 4 * c, 4);
      for (size_t c = 0; c < 32; ++c) move<kPack>(grp, qs_at + 64 * c + 4 * j, blk, qs + 4 * c, 4);
      return;
    }
    case WeightLayout::Q6_Kx16:
      move<kPack>(grp, 2 * j, blk, 208, 2);
      for (size_t g = 0; g < 16; ++g) move<kPack>(grp, 32 + 16 * g + j, blk, 192 + g, 1);
      for (size_t h = 0; h < 2; ++h)
        for (size_t c = 0; c < 8; ++c) {
          const size_t at = 288 + 192 * (8 * h + c) + 4 * j;
          move<kPack>(grp, at, blk, 64 * h + 4 * c, 4);
          move<kPack>(grp, at + 64, blk, 64 * h + 32 + 4 * c, 4);
          move<kPack>(grp, at + 128, blk, 128 + 32 * h + 4 * c, 4);
        }
      return;
    case WeightLayout::IQ4_XSx16:
      move<kPack>(grp, 2 * j, blk, 0, 2);
      for (size_t k = 0; k < 6; ++k) move<kPack>(grp, 32 + 16 * k + j, blk, 2 + k, 1);
      for (size_t c = 0; c < 32; ++c) move<kPack>(grp, 128 + 64 * c + 4 * j, blk, 8 + 4 * c, 4);
      return;
    case WeightLayout::Rows:
      return;
  }
}

// Q5_0x16's qh: the fifth bit of value 4m + i (bit 4m + i of the file's u32) at bit 8i + m, and
// back.
uint32_t q5_qh_order(uint32_t h, bool to_repacked) {
  uint32_t out = 0;
  for (uint32_t m = 0; m < 8; ++m)
    for (uint32_t i = 0; i < 4; ++i) {
      const uint32_t file = 4 * m + i, packed = 8 * i + m;
      const uint32_t from = to_repacked ? file : packed, to = to_repacked ? packed : file;
      out |= ((h >> from) & 1u) << to;
    }
  return out;
}
void reorder_q5_qh(WeightLayout l, uint8_t* blk, bool to_repacked) {
  if (l != WeightLayout::Q5_0x16 && l != WeightLayout::Q5_1x16) return;
  uint8_t* at = blk + (l == WeightLayout::Q5_1x16 ? 4 : 2);  // after d (and m)
  uint32_t h;
  std::memcpy(&h, at, 4);
  h = q5_qh_order(h, to_repacked);
  std::memcpy(at, &h, 4);
}

// Q8_0x16 keeps its quants + 128 (bytes 2.. of a block flipped in their top bit).
void flip_q8_0_quants(uint8_t* blk) {
  for (size_t i = 2; i < sizeof(BlockQ8_0); ++i) blk[i] ^= 0x80;
}

}  // namespace

WeightLayout x16_layout_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
      return WeightLayout::Q8_0x16;
    case GgmlType::Q4_0:
      return WeightLayout::Q4_0x16;
    case GgmlType::Q5_0:
      return WeightLayout::Q5_0x16;
    case GgmlType::Q5_1:
      return WeightLayout::Q5_1x16;
    case GgmlType::Q4_K:
      return WeightLayout::Q4_Kx16;
    case GgmlType::Q5_K:
      return WeightLayout::Q5_Kx16;
    case GgmlType::Q6_K:
      return WeightLayout::Q6_Kx16;
    case GgmlType::IQ4_XS:
      return WeightLayout::IQ4_XSx16;
    case GgmlType::IQ4_NL:
      return WeightLayout::IQ4_NLx16;
    default:
      return WeightLayout::Rows;
  }
}

bool decode_has_x16(WeightLayout l) {
  const QuantKernels& k = decode_kernels();
  return l != WeightLayout::Rows && k.has_x16 != nullptr && k.has_x16(l);
}

bool x16_fits(const WeightView& w) {
  return x16_layout_of(w.type) != WeightLayout::Rows && w.layout == WeightLayout::Rows &&
         w.rows > 0 && w.cols % ggml_block_size(w.type) == 0;
}

void repack_x16(const WeightView& src, int64_t g0, int64_t g1, uint8_t* dst) {
  const WeightLayout l = x16_layout_of(src.type);
  const size_t bb = size_t(ggml_block_bytes(src.type)), nb = src.row_bytes / bb;
  uint8_t tmp[256];
  for (int64_t g = g0; g < g1; ++g)
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* grp = dst + size_t(g) * kRepackRows * src.row_bytes + b * kRepackRows * bb;
      for (size_t j = 0; j < size_t(kRepackRows); ++j) {
        const int64_t r = g * kRepackRows + int64_t(j);
        if (r < src.rows) {
          std::memcpy(tmp, src.row(r) + b * bb, bb);
        } else {
          std::memset(tmp, 0, bb);  // padding of a last partial group: scale 0
        }
        if (l == WeightLayout::Q8_0x16) flip_q8_0_quants(tmp);
        reorder_q5_qh(l, tmp, true);
        places<true>(l, grp, tmp, j);
      }
    }
}

void unpack_x16_rows(const WeightView& w, int64_t r0, int64_t count, uint8_t* dst) {
  const size_t bb = size_t(ggml_block_bytes(w.type)), nb = w.row_bytes / bb;
  for (int64_t r = r0; r < r0 + count; ++r) {
    uint8_t* out = dst + size_t(r - r0) * w.row_bytes;
    const int64_t g = r / kRepackRows;
    const size_t j = size_t(r % kRepackRows);
    for (size_t b = 0; b < nb; ++b) {
      // places<false> only reads the group column.
      auto* grp = const_cast<uint8_t*>(w.data + size_t(g) * kRepackRows * w.row_bytes +
                                       b * kRepackRows * bb);
      places<false>(w.layout, grp, out + b * bb, j);
      if (w.layout == WeightLayout::Q8_0x16) flip_q8_0_quants(out + b * bb);
      reorder_q5_qh(w.layout, out + b * bb, false);
    }
  }
}

void q8_0_block_sums(const void* act, int64_t cols, int32_t* sums) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t s = 0;
    for (int8_t q : a[b].qs) s += q;
    sums[b] = s;
  }
}

}  // namespace kamera::quant
