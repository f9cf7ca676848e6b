// The amx path's prefill over weights repacked in groups of 16 rows (ops/quant_repack.h): the
// integer products on AMX tiles, the scales in AVX-512, so that every product gives the
// avx512_vnni path's floats to the bit.
//
// One group (16 weight rows) is unpacked once per call and activation chunk into signed bytes in
// AMX's B layout, which is the repacked chunk layout itself (tile row c = quants 4c .. 4c + 3 of
// each weight row, row j at byte 4j): Q8_0's bytes lose their + 128, nibbles lose their offset
// (Q4_0 - 8, Q5_0 - 16, Q6_K - 32; Q5_1 keeps its 0 .. 31, its m added as m x s after the
// dot, against q8_1) or become their IQ4_NL level (IQ4_NL, IQ4_XS). Activation rows, 16 at a time,
// are the A tiles, copied once per call from the q8_0 / q8_K rows into contiguous 64-byte
// aligned tiles (a strided tile load of 32-byte rows touched up to 32 cache lines). tdpbssd then
// gives, per activation row and weight row, the same int32 as the vnni
// kernel's dpbusd with its offset taken off (the same integer), and the float steps after it are
// the vnni kernel's, in its order:
//   32-value blocks:  acc = fma(dw x da, float(dot), acc), block by block;
//   Q4_K / Q5_K:      isum = sum_j sc_j dot_j (int32); acc = fma(d x da, float(isum), acc);
//                     acc = fnmadd(dmin x da, float(msum), acc), msum = sum_j m_j (bsums of j),
//                     summed here in f32 FMAs that are exact (every partial sum < 2^21);
//   Q6_K:             isum = sum_g sc_g dot_g over its 16-value sub-blocks (tiles of 16 values);
//   IQ4_XS:           isum = sum_s (ls_s - 32) dot_s over its levels; acc = fma(d x da, isum).
// Four C tiles rotate (TilePipe) so that the tiles compute while AVX-512 scales earlier blocks.
// Activation rows past the last multiple of 16 take the avx512_vnni kernel. Compiled with AMX flags
// (src/CMakeLists.txt).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/status.h"
#include "ops/amx_tiles.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_repack.h"

namespace kamera::quant {

namespace {

// Tile registers: four C (16 activation rows x 16 weight rows, int32), two A (16 activation rows
// of K quants), two B (K / 4 quads x 16 weight rows x 4 bytes). Macros: GCC's tile intrinsics
// paste the register's number into the instruction text.
#define KQ_C0 0
#define KQ_C1 1
#define KQ_C2 2
#define KQ_C3 3
#define KQ_A0 4
#define KQ_A1 5
#define KQ_B0 6
#define KQ_B1 7

// K = 32 per product (a block, or a K-quant's sub-block); Q6_K's sub-blocks take K = 16.
template <int K>
const AmxTileConfig& tiles() {
  static const AmxTileConfig c = [] {
    AmxTileConfig t;
    for (int i : {KQ_C0, KQ_C1, KQ_C2, KQ_C3}) t.rows[i] = 16, t.colsb[i] = 64;
    for (int i : {KQ_A0, KQ_A1}) t.rows[i] = 16, t.colsb[i] = K;
    for (int i : {KQ_B0, KQ_B1}) t.rows[i] = K / 4, t.colsb[i] = 64;
    return t;
  }();
  return c;
}

inline __m512i load64(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}
inline void store64(uint8_t* p, __m512i v) {
  _mm512_storeu_si512(p, v);
}
inline __m512i low4(__m512i v) {
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}
inline __m512i high4(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f));
}
inline __m512 scales16(const uint8_t* p) {  // 16 f16 values
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Bit 4 of each byte: the fifth bit of Q5_0's value 4m + i (m < 8), kept at bit m of byte i of
// the repacked qh (ops/quant_repack.h), and of Q5_K's sub-block m value at bit m.
inline __m512i fifth(__m512i qh, int m) {
  const __m512i m10 = _mm512_set1_epi8(0x10);
  if (m <= 4) return _mm512_and_si512(_mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - m)), m10);
  return _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(m - 4)), m10);
}

bool is_k45(WeightLayout l) {
  return l == WeightLayout::Q4_Kx16 || l == WeightLayout::Q5_Kx16;
}
// Super-blocks of 8 sub-blocks of 32 against q8_K: Q4_K, Q5_K (with mins), IQ4_XS.
bool is_k8(WeightLayout l) {
  return is_k45(l) || l == WeightLayout::IQ4_XSx16;
}
bool tiled(WeightLayout l) {
  return l == WeightLayout::Q8_0x16 || l == WeightLayout::Q4_0x16 || l == WeightLayout::IQ4_NLx16 ||
         l == WeightLayout::Q5_0x16 || l == WeightLayout::Q5_1x16 || is_k8(l) ||
         l == WeightLayout::Q6_Kx16;
}
size_t block_bytes(WeightLayout l) {
  switch (l) {
    case WeightLayout::Q8_0x16:
      return 544;
    case WeightLayout::Q4_0x16:
    case WeightLayout::IQ4_NLx16:
      return 288;
    case WeightLayout::Q5_0x16:
      return 352;
    case WeightLayout::Q5_1x16:
      return 384;
    case WeightLayout::Q4_Kx16:
      return 2304;
    case WeightLayout::Q5_Kx16:
      return 2816;
    case WeightLayout::IQ4_XSx16:
      return 2176;
    default:
      return 3360;  // Q6_Kx16
  }
}

// Bytes that only grow, handed out 64-byte aligned (a tile's rows then fill whole cache lines).
struct Aligned {
  std::vector<uint8_t> raw;
  uint8_t* at = nullptr;
  uint8_t* get(size_t bytes) {
    if (raw.size() < bytes + 64) raw.resize(bytes + 64);
    at = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
    return at;
  }
  const uint8_t* data() const { return at; }
};

// One group unpacked: per block (super-block) its B tiles (signed quants) and its scales as
// 16-lane vectors.
struct Group {
  Aligned q;                // per block: 512 B (32-value blocks), 8 x 512 (Q4/5_K), 16 x 256 (Q6_K)
  std::vector<float> d;     // per block: 16 scales (d)
  std::vector<float> dmin;  // Q4/5_K: 16 dmin per block; Q5_1: 16 m per block
  std::vector<int32_t> sc;  // K-quants: per sub-block, 16 scales
  std::vector<float> mn;    // Q4/5_K: per sub-block, 16 mins
};

// A 32-value block's 8 B rows.
void unpack_block32(WeightLayout l, const uint8_t* blk, uint8_t* out) {
  switch (l) {
    case WeightLayout::Q8_0x16:
      for (int c = 0; c < 8; ++c)
        store64(out + 64 * c, _mm512_xor_si512(load64(blk + 32 + 64 * c), _mm512_set1_epi8(-128)));
      return;
    case WeightLayout::Q4_0x16:
      for (int c = 0; c < 4; ++c) {
        const __m512i v = load64(blk + 32 + 64 * c), eight = _mm512_set1_epi8(8);
        store64(out + 64 * c, _mm512_sub_epi8(low4(v), eight));
        store64(out + 64 * (4 + c), _mm512_sub_epi8(high4(v), eight));
      }
      return;
    case WeightLayout::IQ4_NLx16: {
      const __m512i table =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
      for (int c = 0; c < 4; ++c) {
        const __m512i v = load64(blk + 32 + 64 * c);
        store64(out + 64 * c, _mm512_shuffle_epi8(table, low4(v)));
        store64(out + 64 * (4 + c), _mm512_shuffle_epi8(table, high4(v)));
      }
      return;
    }
    default: {  // Q5_0x16: 16 scales, qh (64 B), 4 chunks; Q5_1x16: 16 mins after the scales
      const bool min = l == WeightLayout::Q5_1x16;
      const uint8_t* at = blk + (min ? 64 : 32);
      const __m512i qh = load64(at), off = _mm512_set1_epi8(min ? 0 : 16);
      for (int c = 0; c < 4; ++c) {
        const __m512i v = load64(at + 64 + 64 * c);
        store64(out + 64 * c, _mm512_sub_epi8(_mm512_or_si512(low4(v), fifth(qh, c)), off));
        store64(out + 64 * (4 + c),
                _mm512_sub_epi8(_mm512_or_si512(high4(v), fifth(qh, 4 + c)), off));
      }
    }
  }
}

// Q4_K / Q5_K super-block: sub-block 2P + s's B rows from chunks 8P .. 8P + 7 (nibble s), its
// scale and min from the [byte k][row] scale bytes (k4_scale_min, ops/quant_blocks.h).
void unpack_k45(bool five, const uint8_t* blk, uint8_t* out, int32_t* sc, float* mn) {
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 8; ++c) {
      const __m512i v = load64(blk + (five ? 768 : 256) + 64 * (8 * p + c));
      __m512i lo = low4(v), hi = high4(v);
      if (five) {
        const __m512i qh = load64(blk + 256 + 64 * c);
        lo = _mm512_or_si512(lo, fifth(qh, 2 * p));
        hi = _mm512_or_si512(hi, fifth(qh, 2 * p + 1));
      }
      store64(out + 512 * (2 * p) + 64 * c, lo);
      store64(out + 512 * (2 * p + 1) + 64 * c, hi);
    }
  for (int r = 0; r < 16; ++r) {
    uint8_t scales[12];  // row r's 12 scale bytes, from the [byte k][row] order at blk + 64
    for (int k = 0; k < 12; ++k) scales[k] = blk[64 + 16 * k + r];
    for (int j = 0; j < 8; ++j) {
      int scj = 0, mnj = 0;
      k4_scale_min(scales, j, &scj, &mnj);
      sc[16 * j + r] = scj;
      mn[16 * j + r] = float(mnj);
    }
  }
}

// Q6_K super-block: the 16-value sub-block g = 8h + 2r + c / 4 takes quad c % 4 from chunk c of
// half h's value set r (ql low / high nibbles and 2 bits of qh), less 32.
void unpack_q6k(const uint8_t* blk, uint8_t* out, int32_t* sc) {
  const __m512i m30 = _mm512_set1_epi8(0x30), m32 = _mm512_set1_epi8(32);
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 8; ++c) {
      const uint8_t* at = blk + 288 + 192 * (8 * h + c);
      const __m512i l0 = load64(at), l1 = load64(at + 64), qh = load64(at + 128);
      const __m512i q[4] = {
          _mm512_or_si512(low4(l0), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30)),
          _mm512_or_si512(low4(l1), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30)),
          _mm512_or_si512(high4(l0), _mm512_and_si512(qh, m30)),
          _mm512_or_si512(high4(l1), _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30))};
      for (int r = 0; r < 4; ++r) {
        const int g = 8 * h + 2 * r + c / 4;
        store64(out + 256 * g + 64 * (c % 4), _mm512_sub_epi8(q[r], m32));
      }
    }
  for (int g = 0; g < 16; ++g)
    _mm512_storeu_si512(
        sc + 16 * g,
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * g))));
}

// IQ4_XS super-block: sub-block s's B rows are the levels of chunks 4s .. 4s + 3's low nibbles
// (values 4c ..) and high nibbles (16 + 4c ..); its scale ls - 32 from the 6 scale bytes
// (scales_h's 2 bits s, scales_l's nibble), per row.
void unpack_iq4xs(const uint8_t* blk, uint8_t* out, int32_t* sc) {
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  for (int sb = 0; sb < 8; ++sb)
    for (int c = 0; c < 4; ++c) {
      const __m512i v = load64(blk + 128 + 64 * (4 * sb + c));
      store64(out + 512 * sb + 64 * c, _mm512_shuffle_epi8(table, low4(v)));
      store64(out + 512 * sb + 64 * (4 + c), _mm512_shuffle_epi8(table, high4(v)));
    }
  for (int r = 0; r < 16; ++r) {
    const int32_t h = int32_t(blk[32 + r]) | int32_t(blk[48 + r]) << 8;  // scales_h
    for (int sb = 0; sb < 8; ++sb) {
      const int32_t lo = (blk[64 + 16 * (sb / 2) + r] >> (4 * (sb % 2))) & 15;
      sc[16 * sb + r] = (lo | ((h >> (2 * sb)) & 3) << 4) - 32;
    }
  }
}

void unpack_group(WeightLayout l, const uint8_t* wg, int64_t nb, Group& g) {
  const size_t bb = block_bytes(l);
  const bool k45 = is_k45(l), k8 = is_k8(l), q6 = l == WeightLayout::Q6_Kx16;
  const int subs = k8 ? 8 : q6 ? 16 : 0;
  uint8_t* q = g.q.get(size_t(nb) * (k8 || q6 ? 4096 : 512));
  g.d.resize(size_t(nb) * 16);
  if (k45) g.mn.resize(size_t(nb) * subs * 16);
  if (k45 || l == WeightLayout::Q5_1x16) g.dmin.resize(size_t(nb) * 16);
  if (subs > 0) g.sc.resize(size_t(nb) * subs * 16);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = wg + size_t(b) * bb;
    _mm512_storeu_ps(g.d.data() + 16 * b, scales16(blk));
    if (k45) {
      _mm512_storeu_ps(g.dmin.data() + 16 * b, scales16(blk + 32));
      unpack_k45(l == WeightLayout::Q5_Kx16, blk, q + 4096 * b, g.sc.data() + 128 * b,
                 g.mn.data() + 128 * b);
    } else if (k8) {
      unpack_iq4xs(blk, q + 4096 * b, g.sc.data() + 128 * b);
    } else if (q6) {
      unpack_q6k(blk, q + 4096 * b, g.sc.data() + 256 * b);
    } else {
      unpack_block32(l, blk, q + 512 * b);
      if (l == WeightLayout::Q5_1x16) _mm512_storeu_ps(g.dmin.data() + 16 * b, scales16(blk + 32));
    }
  }
}

// The activation side of one call, rows [0, n) (a multiple of 16), per tile of 16 rows: its A
// tiles packed (per block, or K-quant sub-block, 16 rows x its K quants, contiguous), d per block
// as 16 lanes (one per row), and for Q4/5_K the sums of each 32-value sub-block's quants (bsums
// pairs) as f32, per sub-block 16 lanes.
struct Acts {
  Aligned q;               // [tile][item] 16 x kvals bytes
  std::vector<float> d;    // [tile][block][16]
  std::vector<float> s;    // q8_1 (Q5_1): its s, [tile][block][16]
  std::vector<float> bsp;  // [tile][block][8][16]
};

void prepare_acts(WeightLayout l, const uint8_t* act, size_t act_bytes, int64_t n, int64_t nb,
                  Acts& a) {
  const bool k45 = is_k45(l), k8 = is_k8(l), q6 = l == WeightLayout::Q6_Kx16;
  const int subs = k8 ? 8 : q6 ? 16 : 1, kvals = q6 ? 16 : 32;
  const int64_t items = nb * subs;  // per tile
  uint8_t* q = a.q.get(size_t(n * items * kvals));
  const bool q8_1 = l == WeightLayout::Q5_1x16;
  a.d.resize(size_t(n * nb));
  if (q8_1) a.s.resize(size_t(n * nb));
  if (k45) a.bsp.resize(size_t(n * nb * 8));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = r / 16, i = r % 16;
    const uint8_t* row = act + size_t(r) * act_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      float* d = a.d.data() + (t * nb + b) * 16 + i;
      if (q8_1) {
        const BlockQ8_1& blk = reinterpret_cast<const BlockQ8_1*>(row)[b];
        *d = _cvtsh_ss(blk.d);
        a.s[size_t((t * nb + b) * 16 + i)] = _cvtsh_ss(blk.s);
        std::memcpy(q + size_t((t * items + b) * 16 + i) * 32, blk.qs, 32);
        continue;
      }
      if (!k8 && !q6) {
        const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        *d = _cvtsh_ss(blk.d);
        std::memcpy(q + size_t((t * items + b) * 16 + i) * 32, blk.qs, 32);
        continue;
      }
      const BlockQ8_K& blk = reinterpret_cast<const BlockQ8_K*>(row)[b];
      *d = blk.d;
      for (int j = 0; j < subs; ++j)
        std::memcpy(q + size_t((t * items + b * subs + j) * 16 + i) * size_t(kvals),
                    blk.qs + kvals * j, size_t(kvals));
      if (k45)
        for (int j = 0; j < 8; ++j)
          a.bsp[size_t(((t * nb + b) * 8 + j) * 16 + i)] =
              float(int32_t(blk.bsums[2 * j]) + blk.bsums[2 * j + 1]);
    }
  }
}

// The products of `count` items in order: item i is an A tile (16 rows, a_stride apart) times a
// B tile (64-byte rows). Tiles are not renamed, so the items go through four C tiles and two A /
// B pairs: step(s, a, b) issues item s (while s < count), stores item s - 2's C tile, and
// returns item s - 4's stored 16 x 16 int32 (row = activation row; null while s < 4), which the
// caller scales in AVX-512 in its own loop (its accumulators stay in registers). A tile store
// waits for its product, and vector loads right behind a store wait for the store: hence the
// distances.
#define KQ_ISSUE(C, A, B)           \
  do {                              \
    if (s < count_) {               \
      _tile_zero(C);                \
      _tile_loadd(A, a, a_stride_); \
      _tile_loadd(B, b, 64);        \
      _tile_dpbssd(C, A, B);        \
    }                               \
  } while (0)
#define KQ_STORE(C)                                            \
  do {                                                         \
    if (s >= 2 && s <= count_ + 1) _tile_stored(C, c_[C], 64); \
  } while (0)

class TilePipe {
 public:
  TilePipe(int64_t count, size_t a_stride) : count_(count), a_stride_(a_stride) {}
  int64_t steps() const { return count_ + 4; }
  [[gnu::always_inline]] const int32_t* step(int64_t s, const uint8_t* a, const uint8_t* b) {
    const int32_t* out = nullptr;
    switch (s & 3) {
      case 0:
        KQ_ISSUE(KQ_C0, KQ_A0, KQ_B0);
        KQ_STORE(KQ_C2);
        out = c_[KQ_C0];
        break;
      case 1:
        KQ_ISSUE(KQ_C1, KQ_A1, KQ_B1);
        KQ_STORE(KQ_C3);
        out = c_[KQ_C1];
        break;
      case 2:
        KQ_ISSUE(KQ_C2, KQ_A0, KQ_B0);
        KQ_STORE(KQ_C0);
        out = c_[KQ_C2];
        break;
      default:
        KQ_ISSUE(KQ_C3, KQ_A1, KQ_B1);
        KQ_STORE(KQ_C1);
        out = c_[KQ_C3];
    }
    return s >= 4 ? out : nullptr;
  }

 private:
  alignas(64) int32_t c_[4][256];
  int64_t count_;
  size_t a_stride_;
};

#undef KQ_ISSUE
#undef KQ_STORE

// One tile of 16 activation rows (aq: its packed A tiles, da: its d per block) against one group
// of 32-value blocks: y[i * y_stride + j] for the group's 16 weight rows j.
// Q5_1 (sa: the activations' s per block) adds m x s, as the vnni kernel does against q8_1.
void tile_rows_32(const Group& g, int64_t nb, const uint8_t* aq, const float* da, const float* sa,
                  float* y, int64_t y_stride) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  const uint8_t* bq = g.q.data();
  TilePipe pipe(nb, 32);
  for (int64_t s = 0; s < pipe.steps(); ++s) {
    const int64_t at = s < nb ? 512 * s : 0;
    const int32_t* ct = pipe.step(s, aq + at, bq + at);
    if (ct == nullptr) continue;
    const int64_t b = s - 4;
    const __m512 dw = _mm512_loadu_ps(g.d.data() + 16 * b);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(da[16 * b + i])),
                               _mm512_cvtepi32_ps(_mm512_load_si512(ct + 16 * i)), acc[i]);
    if (sa == nullptr) continue;
    const __m512 m = _mm512_loadu_ps(g.dmin.data() + 16 * b);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(sa[16 * b + i]), acc[i]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(y + i * y_stride, acc[i]);
}

// The same for K-quant super-blocks: SUBS sub-blocks of 256 / SUBS values (Q4/5_K, IQ4_XS: 8;
// Q6_K: 16); kMins: Q4/5_K's dmin x msum taken off (bsp: the sub-blocks' quant sums).
// isum[i] collects sc_j dot_j over the super-block; the f32 steps close it.
template <int SUBS, bool kMins>
void tile_rows_k(const Group& g, int64_t nb, const uint8_t* aq, const float* da, const float* bsp,
                 float* y, int64_t y_stride) {
  constexpr int kVals = 256 / SUBS, kTileBytes = kVals * 16;
  const uint8_t* bq = g.q.data();
  alignas(64) float acc[16][16] = {};
  __m512i isum[16];
  for (auto& v : isum) v = _mm512_setzero_si512();
  const auto close = [&](int64_t b) __attribute__((always_inline)) {  // super-block b's float steps
    const __m512 d = _mm512_loadu_ps(g.d.data() + 16 * b);
    for (int i = 0; i < 16; ++i) {
      const __m512 dai = _mm512_set1_ps(da[16 * b + i]);
      __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(d, dai), _mm512_cvtepi32_ps(isum[i]),
                                 _mm512_load_ps(acc[i]));
      if constexpr (kMins) {
        __m512 msum = _mm512_setzero_ps();
        for (int j = 0; j < 8; ++j)
          msum = _mm512_fmadd_ps(_mm512_loadu_ps(g.mn.data() + 128 * b + 16 * j),
                                 _mm512_set1_ps(bsp[(8 * b + j) * 16 + i]), msum);
        a = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(g.dmin.data() + 16 * b), dai), msum, a);
      }
      _mm512_store_ps(acc[i], a);
      isum[i] = _mm512_setzero_si512();
    }
  };
  TilePipe pipe(nb * SUBS, kVals);
  for (int64_t s = 0; s < pipe.steps(); ++s) {
    const int64_t at = s < nb * SUBS ? kTileBytes * s : 0;
    const int32_t* ct = pipe.step(s, aq + at, bq + at);
    if (ct == nullptr) continue;
    const int64_t i = s - 4;  // sub-block i % SUBS of super-block i / SUBS
    const __m512i sc = _mm512_loadu_si512(g.sc.data() + 16 * i);
    for (int r = 0; r < 16; ++r)
      isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(_mm512_load_si512(ct + 16 * r), sc));
    if (i % SUBS == SUBS - 1) close(i / SUBS);
  }
  for (int i = 0; i < 16; ++i) std::memcpy(y + i * y_stride, acc[i], sizeof acc[i]);
}

#undef KQ_C0
#undef KQ_C1
#undef KQ_C2
#undef KQ_C3
#undef KQ_A0
#undef KQ_A1
#undef KQ_B0
#undef KQ_B1

}  // namespace

namespace amx {

bool tiles_x16(WeightLayout l) {
  return tiled(l);
}

bool has_x16(WeightLayout l) {
  const QuantKernels& v = avx512_vnni_kernels();
  return v.has_x16 != nullptr && v.has_x16(l);
}

void vec_dot_x16(WeightLayout l, int64_t cols, const uint8_t* w, int64_t g0, int64_t g1,
                 const uint8_t* act, size_t act_bytes, const int32_t* act_sums, int n_act, float* y,
                 int64_t y_stride) {
  const QuantKernels& vnni = avx512_vnni_kernels();
  const int full = tiled(l) ? n_act / 16 * 16 : 0;
  const bool k45 = is_k45(l), k8 = is_k8(l), q6 = l == WeightLayout::Q6_Kx16;
  const int64_t nb = cols / (k8 || q6 ? 256 : 32);
  if (full < n_act)  // rows past the last whole tile (and untiled layouts): the vnni kernel
    vnni.vec_dot_x16(l, cols, w, g0, g1, act + size_t(full) * act_bytes, act_bytes,
                     act_sums == nullptr ? nullptr : act_sums + size_t(full) * size_t(cols / 32),
                     n_act - full, y + full * y_stride, y_stride);
  if (full == 0) return;
  KAMERA_ASSERT(cpu_features().amx_int8);
  use_tiles(q6 ? tiles<16>() : tiles<32>());
  thread_local Group grp;
  thread_local Acts acts;
  // Activation rows in chunks that stay in L2 while the chunk's groups pass over them (packed
  // per chunk: the buffers stay the size of a chunk).
  const int64_t chunk = std::max<int64_t>(16, int64_t((512u << 10) / act_bytes) / 16 * 16);
  const size_t gb = size_t(nb) * block_bytes(l);
  for (int64_t r0 = 0; r0 < full; r0 += chunk) {
    const int64_t r1 = std::min<int64_t>(full, r0 + chunk);
    prepare_acts(l, act + size_t(r0) * act_bytes, act_bytes, r1 - r0, nb, acts);
    for (int64_t g = g0; g < g1; ++g) {
      unpack_group(l, w + size_t(g) * gb, nb, grp);
      for (int64_t t = r0; t < r1; t += 16) {
        const int64_t tile = (t - r0) / 16;
        const uint8_t* aq = acts.q.data() + size_t(tile) * size_t(nb) * 4096 / (k8 || q6 ? 1 : 8);
        float* yt = y + t * y_stride + g * 16;
        const float* da = acts.d.data() + tile * nb * 16;
        if (k45) {
          tile_rows_k<8, true>(grp, nb, aq, da, acts.bsp.data() + tile * nb * 128, yt, y_stride);
        } else if (k8) {  // IQ4_XS
          tile_rows_k<8, false>(grp, nb, aq, da, nullptr, yt, y_stride);
        } else if (q6) {
          tile_rows_k<16, false>(grp, nb, aq, da, nullptr, yt, y_stride);
        } else {
          const float* sa = l == WeightLayout::Q5_1x16 ? acts.s.data() + tile * nb * 16 : nullptr;
          tile_rows_32(grp, nb, aq, da, sa, yt, y_stride);
        }
      }
    }
  }
}

}  // namespace amx

}  // namespace kamera::quant
