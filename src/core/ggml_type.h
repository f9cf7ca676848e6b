// ggml tensor types as GGUF files store them: the type id, block geometry, the name llama.cpp
// prints, and whether kamera reads it. KV-cache storage dtypes stay in core/dtype.h.
//
// A quantized row of n values is n / block_size blocks of block_bytes each (layouts in
// ops/quant_blocks.h, bit for bit ggml's). Types kamera does not read (the IQ1/IQ2/IQ3 grids,
// the ternary TQ types, the removed interleaved Q4_0_4_4 family) have a name so that refusals can
// say what the file holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/dtype.h"

namespace kamera {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,  // OCP microscaling FP4: E2M1 values, one E8M0 scale per 32 (gpt-oss experts)
};

inline constexpr int kQK = 32;     // block of the legacy types (Q4_0 ... Q8_1, IQ4_NL, MXFP4)
inline constexpr int kQK_K = 256;  // super-block of the k-quants and IQ4_XS

struct GgmlTypeInfo {
  const char* name;  // as llama.cpp prints it: "q4_K", "iq4_xs", "bf16"
  int block_size;    // values per block (1 for the float types)
  int block_bytes;   // bytes per block
  bool is_weight;    // kamera reads tensors of this type as weights
};

// Information on a type id; nullopt for ids ggml never defined or has removed.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
// Name of any id: the ggml name, "q4_0_4_4 (removed)" style for removed ids, or "unknown".
std::string ggml_type_name(uint32_t id);
inline std::string ggml_type_name(GgmlType t) {
  return ggml_type_name(uint32_t(t));
}
// True for the weight types kamera reads (the 16 of kWeightTypes).
bool ggml_type_is_weight(uint32_t id);
// The weight types kamera reads, in ggml id order.
std::span<const GgmlType> weight_types();

int ggml_block_size(GgmlType t);
int ggml_block_bytes(GgmlType t);
// Bytes of a row of n values; nullopt when n is not a whole number of blocks.
std::optional<size_t> ggml_row_bytes(GgmlType t, int64_t n);

// The ggml type of a kamera storage dtype (F32, F16, BF16, Q8_0 map to themselves).
GgmlType ggml_type_from_dtype(DType t);

}  // namespace kamera
