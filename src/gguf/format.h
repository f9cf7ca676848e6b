// What the GGUF reader (gguf/reader.cpp) and writer (gguf/writer.cpp) share: the format's
// constants, its value types' sizes and names, and the checked size arithmetic. Internal to gguf/.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace kamera::gguf_format {

template <class... Args>
Error corrupt(fmt::format_string<Args...> f, Args&&... args) {
  return make_error(ErrorCode::CorruptData, f, std::forward<Args>(args)...);
}
template <class... Args>
Error bad_value(fmt::format_string<Args...> f, Args&&... args) {
  return make_error(ErrorCode::InvalidArgument, f, std::forward<Args>(args)...);
}

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxGgufType = 12;  // F64
constexpr size_t kGgmlMaxName = 64;    // ggml's GGML_MAX_NAME, including the terminating NUL

inline const char* gguf_type_name(uint32_t t) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  return t <= kMaxGgufType ? kNames[t] : "unknown";
}

inline bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64:
      return true;
    default:
      return false;
  }
}

inline bool is_float_type(GgufType t) {
  return t == GgufType::F32 || t == GgufType::F64;
}

// Bytes one value of type t takes in the file; for STRING the minimum (its u64 length).
inline size_t min_value_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
    case GgufType::STRING:
      return 8;
    case GgufType::ARRAY:
      return 12;  // u32 element type + u64 count
  }
  return 1;
}

// A name as it appears in messages: at most 80 bytes, non-printable bytes as \xNN.
inline std::string printable(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > n) out += fmt::format("...({} bytes)", s.size());
  return out;
}

inline std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", ne[i]);
  return s + "]";
}

// Product of ne, or nullopt when a dimension is < 1 or the product exceeds INT64_MAX.
inline std::optional<int64_t> checked_elements(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d < 1 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// Bytes of n elements of t (a whole number of blocks), in 128 bits so it cannot overflow.
inline unsigned __int128 data_bytes(GgmlType t, int64_t n) {
  const auto un = static_cast<unsigned __int128>(n);
  return un / unsigned(ggml_block_size(t)) * unsigned(ggml_block_bytes(t));
}
inline unsigned __int128 data_bytes(DType t, int64_t n) {
  return data_bytes(ggml_type_from_dtype(t), n);
}

// "f32, f16, ..., iq4_xs": the tensor types kamera reads, for refusals.
inline std::string weight_type_list() {
  std::string s;
  for (GgmlType t : weight_types()) s += (s.empty() ? "" : ", ") + ggml_type_name(t);
  return s;
}

}  // namespace kamera::gguf_format
