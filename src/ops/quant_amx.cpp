// The amx path: decode as avx512_vnni; prefill on AMX tiles in bf16. The weight panel is the A
// operand (16 weight rows x 32 k values per tile, loaded straight from the dequantized rows) and
// the activations the B operand, packed once per call into AMX's pair-interleaved layout, so a
// C tile holds 16 weight rows x 16 activation rows and is stored transposed into y. Compiled
// with AMX flags (src/CMakeLists.txt); used only when the CPU and the OS allow AMX.
// GCC 12's AVX-512 headers fill unused lanes with an "undefined" value that its own
// -Wuninitialized then reports inside the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "ops/amx_tiles.h"
#include "ops/quant_kernels.h"

namespace kamera::quant {

namespace {

// Tile configuration: tiles 0-3 hold C (16 x 16 f32), 4-5 A (16 rows x 32 bf16), 6-7 B (16
// k-pairs x 16 columns x 2 bf16); every row is 64 bytes.
const AmxTileConfig& gemm_tiles() {
  static const AmxTileConfig c = [] {
    AmxTileConfig t;
    for (int i = 0; i < 8; ++i) {
      t.colsb[i] = 64;
      t.rows[i] = 16;
    }
    return t;
  }();
  return c;
}

void configure_tiles() {
  // Linux grants tile data per process on request, which feature detection makes.
  KAMERA_ASSERT(cpu_features().amx_bf16);
  amx::use_tiles(gemm_tiles());
}

// Activations packed per block of 16 rows and 32 k values, as one B tile image: row p (a k pair)
// holds, for each of the 16 activation rows c, x[c][2p] and x[c][2p + 1]. Rows past m are zero.
int64_t padded_rows(int64_t m) {
  return (m + 15) / 16 * 16;
}

size_t packed_bytes(int64_t m, int64_t k) {
  return size_t(padded_rows(m) * k) * 2;
}

void pack(const float* x, int64_t m, int64_t k, void* dst) {
  auto* out = static_cast<uint32_t*>(dst);  // bf16 pairs
  uint16_t row[32];
  for (int64_t ib = 0; ib < padded_rows(m); ib += 16) {
    for (int64_t kb = 0; kb < k; kb += 32) {
      uint32_t* tile = out + (ib / 16 * (k / 32) + kb / 32) * 256;
      for (int c = 0; c < 16; ++c) {
        if (ib + c < m) {
          bf16::to_bf16(x + (ib + c) * k + kb, row, 32);
        } else {
          std::memset(row, 0, sizeof(row));
        }
        for (int p = 0; p < 16; ++p)
          tile[p * 16 + c] = uint32_t(row[2 * p]) | uint32_t(row[2 * p + 1]) << 16;
      }
    }
  }
}

// y[i][j] for activation rows [ib, ib + 16) and weight rows [jb, jb + 16) from a C tile image
// c[j - jb][i - ib], only where i < m and j < nw.
void store_transposed(const float* c, int64_t ib, int64_t jb, int64_t m, int64_t nw, float* y,
                      int64_t ldy) {
  const int im = int(m - ib < 16 ? m - ib : 16), jm = int(nw - jb < 16 ? nw - jb : 16);
  for (int i = 0; i < im; ++i)
    for (int j = 0; j < jm; ++j) y[(ib + i) * ldy + jb + j] = c[j * 16 + i];
}

// Rows [jb, nw) of the panel w (rows wstride bytes apart, k bf16 values) copied to 32 rows of k
// values, zeros past nw, in a buffer of the calling thread.
const uint8_t* tail_rows(const uint8_t* w, int64_t jb, int64_t nw, int64_t k, size_t wstride) {
  thread_local std::vector<uint8_t> buf;
  const size_t row = size_t(k) * 2;
  buf.assign(32 * row, 0);
  for (int64_t j = jb; j < nw; ++j)
    std::memcpy(buf.data() + size_t(j - jb) * row, w + j * wstride, row);
  return buf.data();
}

// w: weight panel in bf16, rows ldw apart, nw rows. A tile pair reads 32 rows: the last block,
// where nw is not a multiple of 32, reads a zero-padded copy, never past row nw (BF16 weights are
// their own panel, so past nw lies the next tensor or the end of the mapping).
void gemm(int64_t m, int64_t nw, int64_t k, const void* xv, const void* wv, int64_t ldw, float* y,
          int64_t ldy) {
  configure_tiles();
  const auto* x = static_cast<const uint8_t*>(xv);
  const auto* w = static_cast<const uint8_t*>(wv);
  const int64_t kt = k / 32, mp = padded_rows(m);
  const size_t tile_bytes = 1024, wstride = size_t(ldw) * 2;
  const int64_t jtail = nw / 32 * 32;  // the block that reaches past nw, if any
  const uint8_t* tail = jtail < nw ? tail_rows(w, jtail, nw, k, wstride) : nullptr;
  alignas(64) float c[4][256];
  // Activation blocks outside: a block's B tiles stay in L2 while every weight block of the
  // panel passes over them, so the packed activations stream from L3 once per panel.
  for (int64_t ib = 0; ib < mp; ib += 32) {
    for (int64_t jb = 0; jb < nw; jb += 32) {
      const bool two_i = ib + 16 < mp;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const uint8_t* b0 = x + size_t(ib / 16 * kt) * tile_bytes;
      const uint8_t* b1 = two_i ? b0 + size_t(kt) * tile_bytes : b0;
      const bool in_tail = jb == jtail;
      const size_t astride = in_tail ? size_t(k) * 2 : wstride;
      const uint8_t* a0 = in_tail ? tail : w + size_t(jb) * wstride;
      const uint8_t* a1 = a0 + 16 * astride;
      for (int64_t t = 0; t < kt; ++t) {
        _tile_loadd(4, a0 + t * 64, astride);
        _tile_loadd(5, a1 + t * 64, astride);
        _tile_loadd(6, b0 + t * tile_bytes, 64);
        _tile_loadd(7, b1 + t * tile_bytes, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
      store_transposed(c[0], ib, jb, m, nw, y, ldy);
      if (two_i) store_transposed(c[1], ib + 16, jb, m, nw, y, ldy);
      if (jb + 16 < nw) {
        store_transposed(c[2], ib, jb + 16, m, nw, y, ldy);
        if (two_i) store_transposed(c[3], ib + 16, jb + 16, m, nw, y, ldy);
      }
    }
  }
}

}  // namespace

// The entry points (quant_kernels.h); the table is built in quant.cpp.
namespace amx {
void use_tiles(const AmxTileConfig& c) {
  thread_local const AmxTileConfig* loaded = nullptr;
  if (loaded == &c) return;
  _tile_loadconfig(&c);
  loaded = &c;
}
size_t packed_x_bytes(int64_t m, int64_t k) {
  return packed_bytes(m, k);
}
void pack_x(const float* x, int64_t m, int64_t k, void* dst) {
  pack(x, m, k, dst);
}
void gemm(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw, float* y,
          int64_t ldy) {
  kamera::quant::gemm(m, nw, k, x, w, ldw, y, ldy);
}
}  // namespace amx

}  // namespace kamera::quant
