// Storage dtypes of weights and cached channels, and their conversions to and from f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kamera {

enum class DType : uint8_t { F32, F16, BF16, Q8_0 };

// Q8_0 (ggml): blocks of 32 values, one f16 scale then 32 int8 quants (34 bytes per block).
inline constexpr int kQ8BlockSize = 32;
inline constexpr int kQ8BlockBytes = 2 + kQ8BlockSize;

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of n values; for Q8_0 n must be a multiple of 32 (checked by the caller).
size_t dtype_row_bytes(DType t, int64_t n);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even, saturating to inf
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);  // round to nearest even; NaN stays NaN

// Convert n values of `src` (stored as t) to f32.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Convert n f32 values to storage type t (Q8_0: n multiple of 32).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace kamera
