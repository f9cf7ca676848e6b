// The kernel tables behind ops/quant.h, one per ISA path, for the dispatcher and the tests (which
// run every path this CPU supports against the scalar references). Not for the forward pass.
//
// A path is compiled in its own file with its -m flags (src/CMakeLists.txt) and is only called
// after isa checks say the CPU has them, so the binary still runs on a baseline x86-64.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/ggml_type.h"
#include "ops/quant.h"

namespace kamera::quant {

// Prefill GEMMs over dequantized weight panels: y[i][j] += x_i . w_j.
enum class PanelFormat : uint8_t { F32, BF16 };

struct QuantKernels {
  const char* name;             // "scalar", "avx2", "avx2_vnni", "avx512", "avx512_vnni", ...
  IsaLevel level;               // the level the CPU needs ...
  bool needs_bf16;              // ... plus AVX512-BF16
  bool needs_avx_vnni = false;  // ... plus AVX-VNNI, and avx_vnni_enabled() (KAMERA_ISA)

  // Dequantizes n values (whole blocks) of one row of type t to f32.
  void (*dequantize)(GgmlType t, const void* src, float* dst, int64_t n);

  // y[a * y_stride + r] = dot(weight row r, activation row a) for r in [r0, r1) and a in
  // [0, n_act): weight rows of row_bytes bytes, activation rows of act_bytes bytes quantized to
  // dot_type_of(t) (f32 for the float types), cols values each.
  void (*vec_dot_rows)(GgmlType t, int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0,
                       int64_t r1, const uint8_t* act, size_t act_bytes, int n_act, float* y,
                       int64_t y_stride);

  // n activations (a multiple of 32) to q8_0 blocks, the same bytes as quantize_act_ref; null
  // where the path has no faster quantizer than the reference.
  void (*quantize_q8_0)(const float* x, void* dst, int64_t n) = nullptr;
  // The same for q8_K (n a multiple of 256).
  void (*quantize_q8_K)(const float* x, void* dst, int64_t n) = nullptr;

  // Non-null where vec_dot_rows takes BF16 weights' activation rows rounded to bf16 (2 bytes a
  // value, round to nearest even) by this function instead of f32 (see act_bytes_of).
  void (*acts_to_bf16)(const float* src, void* dst, int64_t n) = nullptr;

  // Prefill: a GEMM over weight panels dequantized to the path's panel format.
  PanelFormat panel;
  // Converts n f32 values (a dequantized weight row) to the panel format; null for F32.
  void (*to_panel)(const float* src, void* dst, int64_t n);
  // Bytes of m activation rows of k values packed for gemm, and the packing; null when gemm
  // reads the f32 rows as they are. Rows [16 b, 16 b + 16) pack to packed_x_bytes(16, k) bytes
  // at b * packed_x_bytes(16, k), so blocks of 16 rows can be packed separately.
  size_t (*packed_x_bytes)(int64_t m, int64_t k);
  void (*pack_x)(const float* x, int64_t m, int64_t k, void* dst);
  // y[i * ldy + j] = sum_k x[i][k] * w[j][k] for i < m, j < nw: x packed (or f32 rows of k), w
  // rows of k values ldw apart in the panel format; k a multiple of 32.
  void (*gemm)(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw,
               float* y, int64_t ldy);
  // The same over F16 (gemm_f16) or BF16 (gemm_bf16) weight rows as the file holds them (ldw
  // values apart), widened in the GEMM's own packing (in registers; F16C for F16): gemm's
  // results on their dequantized f32 panel, to the bit, without the panel. The avx2 paths have
  // them; null on the others (prefill dequantizes the rows into the panel format first).
  void (*gemm_f16)(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw,
                   float* y, int64_t ldy) = nullptr;
  void (*gemm_bf16)(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw,
                    float* y, int64_t ldy) = nullptr;

  // Decode over weights repacked in groups of 16 rows (ops/quant_repack.h): y[a * y_stride + r]
  // for the rows r of groups [g0, g1), activation rows in the type's dot type (q8_0 or q8_K),
  // act_sums[a * cols / 32 + b] = the sum of block b's quants of q8_0 row a (q8_0_block_sums;
  // unused for q8_K). has_x16 says which layouts the path has a kernel for; both null where it
  // has none (matmul then unpacks the groups and runs vec_dot_rows).
  bool (*has_x16)(WeightLayout l) = nullptr;
  void (*vec_dot_x16)(WeightLayout l, int64_t cols, const uint8_t* w, int64_t g0, int64_t g1,
                      const uint8_t* act, size_t act_bytes, const int32_t* act_sums, int n_act,
                      float* y, int64_t y_stride) = nullptr;
  // The avx2 paths' prefill kernel behind vec_dot_x16 (which calls it from kX16GemmMinRows
  // activation rows on: each group's blocks unpacked once per call), callable at any row count;
  // the same floats as vec_dot_x16's decode kernel. Null on the other paths.
  void (*vec_dot_x16_gemm)(WeightLayout l, int64_t cols, const uint8_t* w, int64_t g0, int64_t g1,
                           const uint8_t* act, size_t act_bytes, const int32_t* act_sums, int n_act,
                           float* y, int64_t y_stride) = nullptr;
};

// Activation rows from which the avx2 paths' vec_dot_x16 runs vec_dot_x16_gemm.
constexpr int kX16GemmMinRows = 8;

const QuantKernels& scalar_kernels();
const QuantKernels& avx2_kernels();
const QuantKernels& avx2_vnni_kernels();
const QuantKernels& avx512_kernels();
const QuantKernels& avx512_vnni_kernels();
const QuantKernels& avx512_bf16_kernels();
const QuantKernels& amx_kernels();

// The prefill pieces of the avx512_bf16 and amx paths, from their own files (the tables are
// built in quant.cpp: no code compiled with AVX-512 flags runs before the CPU check, and a
// table's run-time initializer would).
namespace bf16 {
void to_bf16(const float* src, void* dst, int64_t n);
size_t packed_x_bytes(int64_t m, int64_t k);
void pack_x(const float* x, int64_t m, int64_t k, void* dst);
void gemm(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw, float* y,
          int64_t ldy);
// avx512_vnni's vec_dot_rows, except BF16 weights: vdpbf16ps against bf16 activation rows.
void vec_dot_rows(GgmlType t, int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0,
                  int64_t r1, const uint8_t* act, size_t act_bytes, int n_act, float* y,
                  int64_t y_stride);
}  // namespace bf16
namespace amx {
size_t packed_x_bytes(int64_t m, int64_t k);
void pack_x(const float* x, int64_t m, int64_t k, void* dst);
void gemm(int64_t m, int64_t nw, int64_t k, const void* x, const void* w, int64_t ldw, float* y,
          int64_t ldy);
// Repacked groups (quant_amx_x16.cpp): the int8 products of 16 activation rows at a time on AMX
// tiles, avx512_vnni's floats to the bit; the rows past a multiple of 16, and the layouts it
// does not tile, through avx512_vnni's kernel.
bool has_x16(WeightLayout l);
bool tiles_x16(WeightLayout l);  // the layouts it tiles (the others: avx512_vnni's kernel)
void vec_dot_x16(WeightLayout l, int64_t cols, const uint8_t* w, int64_t g0, int64_t g1,
                 const uint8_t* act, size_t act_bytes, const int32_t* act_sums, int n_act, float* y,
                 int64_t y_stride);
}  // namespace amx

// The table whose x16 kernel prefills repacked weights, given the decode and prefill tables: the
// prefill table where it has x16 kernels (the amx table's AMX int8 tiles, unless
// KAMERA_PREFILL_AMX_INT8=0), else the decode table.
const QuantKernels& x16_prefill_kernels(const QuantKernels& dk, const QuantKernels& pk);

// Bytes of a row of cols activations as k.vec_dot_rows takes them for weight type t.
size_t act_bytes_of(const QuantKernels& k, GgmlType t, int64_t cols);

// Every path compiled in, scalar first.
const QuantKernels* const* all_kernels(int* count);
// True when this CPU can run path k (ignores KAMERA_ISA).
bool cpu_supports(const QuantKernels& k);

}  // namespace kamera::quant
