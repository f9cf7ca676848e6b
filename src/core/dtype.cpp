#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"

namespace kamera {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::Q8_0:
      return "q8_0";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

size_t dtype_row_bytes(DType t, int64_t n) {
  switch (t) {
    case DType::F32:
      return size_t(n) * 4;
    case DType::F16:
    case DType::BF16:
      return size_t(n) * 2;
    case DType::Q8_0:
      return size_t(n / kQ8BlockSize) * kQ8BlockBytes;
  }
  return 0;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // zero or subnormal: value = mant * 2^-24
    const float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan
    return uint16_t(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
  }
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {
    // result is subnormal or zero: round(|f| * 2^24) to nearest even
    const float v = float_of(ax) * 16777216.0f;  // exact scaling by a power of two
    const float r = std::nearbyint(v);           // default rounding mode: nearest even
    return uint16_t(sign | uint16_t(r));
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits, nearest even
  uint32_t m = ax + 0xc8000000u;  // exponent - 112
  const uint32_t round_bit = 0x1000, sticky = 0x0fff;
  uint32_t out = m >> 13;
  if ((m & round_bit) && ((m & sticky) || (out & 1))) out += 1;
  return uint16_t(sign | out);
}

float bf16_to_f32(uint16_t b) {
  return float_of(uint32_t(b) << 16);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    case DType::Q8_0: {
      KAMERA_ASSERT(n % kQ8BlockSize == 0);
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t b = 0; b < n / kQ8BlockSize; ++b) {
        const uint8_t* blk = s + b * kQ8BlockBytes;
        uint16_t d16;
        std::memcpy(&d16, blk, 2);
        const float d = f16_to_f32(d16);
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int j = 0; j < kQ8BlockSize; ++j) dst[b * kQ8BlockSize + j] = d * float(q[j]);
      }
      return;
    }
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  auto* d8 = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(d8 + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(d8 + 2 * i, &h, 2);
      }
      return;
    case DType::Q8_0: {
      KAMERA_ASSERT(n % kQ8BlockSize == 0);
      for (int64_t b = 0; b < n / kQ8BlockSize; ++b) {
        const float* x = src + b * kQ8BlockSize;
        float amax = 0.0f;
        for (int j = 0; j < kQ8BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = d8 + b * kQ8BlockBytes;
        const uint16_t d16 = f32_to_f16(d);
        std::memcpy(blk, &d16, 2);
        auto* q = reinterpret_cast<int8_t*>(blk + 2);
        for (int j = 0; j < kQ8BlockSize; ++j) q[j] = int8_t(std::lround(x[j] * id));
      }
      return;
    }
  }
}

}  // namespace kamera
