// Rows of the KV pool in their storage dtype (f32, f16 or bf16) and their conversions to and
// from f32. Attention, the chunk cache and the patch writer convert one row at a time on read and
// round once on write; nothing keeps an f32 copy of the whole cache.
//
// The conversions are vectorised where the CPU has the instructions (F16C for f16, AVX512-BF16
// for the f32 -> bf16 direction) and fall back to the scalar core/dtype conversions otherwise.
// All paths round to nearest even and agree bit for bit on finite normal values and zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace kamera {

// f32, f16 or bf16: the dtypes a KV pool, a canonical or a patch factor may be stored in.
bool is_kv_dtype(DType t);
// "f32" | "f16" | "bf16"; nullopt for anything else (q8_0 included).
std::optional<DType> kv_dtype_from_name(std::string_view name);
size_t kv_elem_bytes(DType t);  // 4 or 2

// dst[0..n) = src[0..n) stored as t, widened to f32 (exact).
void kv_load_row(DType t, const void* src, float* dst, int64_t n);
// dst[0..n) = src[0..n) rounded to t (nearest even; f32 copies).
void kv_store_row(DType t, const float* src, void* dst, int64_t n);

// The scalar paths (tests compare the vectorised ones against them).
void kv_load_row_scalar(DType t, const void* src, float* dst, int64_t n);
void kv_store_row_scalar(DType t, const float* src, void* dst, int64_t n);

}  // namespace kamera
