// Quantized weights repacked at load into the order the VNNI and AVX2 decode kernels stream them.
//
// Every layout keeps rows in groups of 16: group g (rows 16g .. 16g+15) takes the bytes those
// rows took in the file (16 x row_bytes, at g * 16 * row_bytes), and inside it each block
// column b (the 16 rows' block b) takes 16 x the block's bytes at b * 16 * block_bytes, in an
// order that lets one 64-byte load feed a dpbusd for 16 rows (4 quants of each row, row j at
// byte 4j). Per block column:
//   Q8_0x16 (34 B/row):  the 16 f16 scales (32 B); 8 chunks of 64 B, chunk c = quants 4c..4c+3
//                        of each row, stored + 128 as unsigned bytes (q ^ 0x80).
//   Q5_0x16 (22 B/row):  16 f16 scales (32 B); the 16 rows' 32-bit qh (64 B), the fifth bit of
//                        value 4m + i moved to bit m of byte i (one shift per chunk); 4 chunks of
//                        64 B, chunk c = bytes qs[4c .. 4c+3] of each row (low nibbles: values
//                        4c.., high nibbles: values 16 + 4c..).
//   Q5_1x16 (24 B/row):  16 f16 d (32 B); 16 f16 m (32 B); then qh and chunks as Q5_0x16's.
//   Q4_0x16 (18 B/row):  16 f16 scales (32 B); 4 chunks of 64 B, chunk c = bytes qs[4c .. 4c+3]
//                        of each row (low nibbles: values 4c.., high nibbles: values 16 + 4c..).
//   IQ4_NLx16 (18 B/row): as Q4_0x16 (the nibbles index the 16 levels).
//   Q4_Kx16 (144 B/row): 16 f16 d (32 B); 16 f16 dmin (32 B); the 12 scale bytes as [byte k]
//                        [row j] (192 B); 32 chunks of 64 B, chunk 8p + c = bytes
//                        qs[32p + 4c .. +3] of each row (sub-blocks 2p and 2p + 1 in the nibbles).
//   Q5_Kx16 (176 B/row): d, dmin and scale bytes as Q4_Kx16 (256 B); 8 chunks of 64 B, chunk c =
//                        bytes qh[4c .. 4c+3] of each row (bit 2p + s of byte i: the fifth bit of
//                        the value in sub-block 2p + s at byte i of chunk 8p + c's nibbles, so one
//                        shift and one mask bring it to bit 4); 32 chunks of 64 B as Q4_Kx16's.
//   Q6_Kx16 (210 B/row): 16 f16 d (32 B); the 16 scales as [sub-block g][row j] (256 B); for
//                        half h and c = 0..7, three chunks of 64 B: ql[64h + 4c ..],
//                        ql[64h + 32 + 4c ..], qh[32h + 4c ..] of each row.
//   IQ4_XSx16 (136 B/row): 16 f16 d (32 B); the 6 scale bytes (scales_h, scales_l) as
//                        [byte k][row j] (96 B); 32 chunks of 64 B, chunk 4s + c = bytes
//                        qs[16s + 4c .. +3] of each row (sub-block s: low nibbles values 4c..,
//                        high nibbles 16 + 4c..).
// The activation side's offsets (q8_0's +128, q4_0's -8, q5_0's -16, q6_K's -32, iq4_xs's levels
// looked up + 128) come off through sums of the activation's quants per block (or q8_K's bsums);
// q5_1's mins are added as m times q8_1's s.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/quant.h"

namespace kamera::quant {

inline constexpr int64_t kRepackRows = 16;

// The repacked layout of a weight type (Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS), else Rows.
WeightLayout x16_layout_of(GgmlType t);

// True when this CPU's decode path has a kernel for layout l (else repacking would only add
// unpacking).
bool decode_has_x16(WeightLayout l);

// A type with a repacked layout, in the file's layout. Rows go in groups of 16; a last group of
// fewer (an output matrix of 50,257 or 151,669 rows) is padded with zero rows, which the
// products compute and drop (x16_bytes holds them).
bool x16_fits(const WeightView& w);

// Groups of 16 rows of a repacked matrix of `rows` rows, the last one padded.
inline int64_t x16_group_count(int64_t rows) {
  return (rows + kRepackRows - 1) / kRepackRows;
}

// Bytes of w's repacked layout: its groups, padding included.
inline size_t x16_bytes(const WeightView& w) {
  return size_t(x16_group_count(w.rows) * kRepackRows) * w.row_bytes;
}

// Writes groups [g0, g1) of `src` (Rows layout) to dst in x16_layout_of(src.type); dst is the
// whole matrix's buffer (group g at g * 16 * row_bytes, x16_bytes in all; rows past src.rows are
// zero blocks).
void repack_x16(const WeightView& src, int64_t g0, int64_t g1, uint8_t* dst);

// Rows [r0, r0 + count) of a repacked view back in the file's row layout (count * row_bytes).
void unpack_x16_rows(const WeightView& w, int64_t r0, int64_t count, uint8_t* dst);

// The sum of each block's quants of one q8_0 activation row (cols / 32 values).
void q8_0_block_sums(const void* act, int64_t cols, int32_t* sums);

}  // namespace kamera::quant
