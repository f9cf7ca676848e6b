// Q8_0 weights repacked at load into the order the VNNI decode kernel streams them.
//
// Layout Q8_0x16: rows in groups of 16. Group g (rows 16g .. 16g+15) takes the bytes those rows
// took in the file (16 x row_bytes, at g * 16 * row_bytes); inside it, for each block b of 32
// columns: the 16 rows' f16 scales (32 bytes), then 8 chunks of 64 bytes, chunk c holding
// quants 4c .. 4c+3 of row j at byte 4j, each quant stored + 128 as an unsigned byte (q ^ 0x80).
// One 64-byte load then feeds a dpbusd for 16 rows, and the activation side's bias is one sum
// per block: dot(q + 128, a) = dot(q, a) + 128 * sum(a).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/quant.h"

namespace kamera::quant {

inline constexpr int64_t kQ8x16Rows = 16;

// True when this CPU's decode path has a kernel for the Q8_0x16 layout (else repacking would
// only add unpacking).
bool decode_has_q8_0x16();

// Q8_0, rows a whole number of groups (cols is whole blocks already).
bool q8_0x16_fits(const WeightView& w);

// Writes groups [g0, g1) of `src` (Rows layout) to dst in the Q8_0x16 layout; dst is the whole
// matrix's buffer (group g at g * 16 * row_bytes).
void repack_q8_0x16(const WeightView& src, int64_t g0, int64_t g1, uint8_t* dst);

// Rows [r0, r0 + count) of a Q8_0x16 view back in the file's row layout (count * row_bytes).
void unpack_q8_0x16_rows(const WeightView& w, int64_t r0, int64_t count, uint8_t* dst);

// 128 * the sum of each block's quants of one q8_0 activation row (cols / 32 values).
void q8_0_block_sums(const void* act, int64_t cols, int32_t* sums);

}  // namespace kamera::quant
