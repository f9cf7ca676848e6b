#include "kv/kv_row.h"

#include <immintrin.h>

#include <bit>
#include <cstring>

#include "core/cpu_features.h"
#include "core/status.h"

namespace kamera {

bool is_kv_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

std::optional<DType> kv_dtype_from_name(std::string_view name) {
  auto t = dtype_from_name(name);
  if (!t || !is_kv_dtype(*t)) return std::nullopt;
  return t;
}

size_t kv_elem_bytes(DType t) {
  KAMERA_ASSERT(is_kv_dtype(t));
  return t == DType::F32 ? 4 : 2;
}

void kv_load_row_scalar(DType t, const void* src, float* dst, int64_t n) {
  KAMERA_ASSERT(is_kv_dtype(t));
  dequantize_row(t, src, dst, n);
}

void kv_store_row_scalar(DType t, const float* src, void* dst, int64_t n) {
  KAMERA_ASSERT(is_kv_dtype(t));
  quantize_row(t, src, dst, n);
}

namespace {

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void f16_load_f16c(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
  for (; i < n; ++i) d[i] = f16_to_f32(s[i]);
}

__attribute__((target("avx,f16c"))) void f16_store_f16c(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = f32_to_f16(s[i]);
}

// vcvtneps2bf16 rounds to nearest even but treats subnormal inputs as zero; those (|x| < 2^-126)
// never occur in cached keys and values of a working model, and the scalar tail is exact.
__attribute__((target("avx512f,avx512bf16"))) void bf16_store_avx512(const float* s, uint16_t* d,
                                                                     int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + i));
    std::memcpy(d + i, &h, 32);
  }
  for (; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}
#endif

// bf16 -> f32 is a shift; the compiler vectorises this loop at any ISA level.
void bf16_load(const uint16_t* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = std::bit_cast<float>(uint32_t(s[i]) << 16);
}

bool have_f16c() {
  static const bool v = isa_level() >= IsaLevel::Avx2 && cpu_features().f16c;
  return v;
}
bool have_avx512_bf16() {
  static const bool v = isa_level() >= IsaLevel::Avx512 && cpu_features().avx512_bf16;
  return v;
}

}  // namespace

void kv_load_row(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::BF16:
      bf16_load(s, dst, n);
      return;
    case DType::F16:
#if defined(__x86_64__)
      if (have_f16c()) return f16_load_f16c(s, dst, n);
#endif
      return kv_load_row_scalar(t, src, dst, n);
    default:
      KAMERA_ASSERT(false && "kv dtype is f32, f16 or bf16");
  }
}

void kv_store_row(DType t, const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::BF16:
#if defined(__x86_64__)
      if (have_avx512_bf16()) return bf16_store_avx512(src, d, n);
#endif
      return kv_store_row_scalar(t, src, dst, n);
    case DType::F16:
#if defined(__x86_64__)
      if (have_f16c()) return f16_store_f16c(src, d, n);
#endif
      return kv_store_row_scalar(t, src, dst, n);
    default:
      KAMERA_ASSERT(false && "kv dtype is f32, f16 or bf16");
  }
}

}  // namespace kamera
