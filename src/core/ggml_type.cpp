#include "core/ggml_type.h"

namespace kamera {

namespace {

struct Entry {
  uint32_t id;
  GgmlTypeInfo info;
};

// Geometry from ggml-common.h's block structs (sizes checked by static_asserts in
// ops/quant_blocks.h for the types kamera reads).
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4, true}},          {1, {"f16", 1, 2, true}},
    {2, {"q4_0", 32, 18, true}},       {3, {"q4_1", 32, 20, true}},
    {6, {"q5_0", 32, 22, true}},       {7, {"q5_1", 32, 24, true}},
    {8, {"q8_0", 32, 34, true}},       {9, {"q8_1", 32, 36, false}},
    {10, {"q2_K", 256, 84, true}},     {11, {"q3_K", 256, 110, true}},
    {12, {"q4_K", 256, 144, true}},    {13, {"q5_K", 256, 176, true}},
    {14, {"q6_K", 256, 210, true}},    {15, {"q8_K", 256, 292, false}},
    {16, {"iq2_xxs", 256, 66, false}}, {17, {"iq2_xs", 256, 74, false}},
    {18, {"iq3_xxs", 256, 98, false}}, {19, {"iq1_s", 256, 50, false}},
    {20, {"iq4_nl", 32, 18, true}},    {21, {"iq3_s", 256, 110, false}},
    {22, {"iq2_s", 256, 82, false}},   {23, {"iq4_xs", 256, 136, true}},
    {24, {"i8", 1, 1, false}},         {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},        {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},        {29, {"iq1_m", 256, 56, false}},
    {30, {"bf16", 1, 2, true}},        {34, {"tq1_0", 256, 54, false}},
    {35, {"tq2_0", 256, 66, false}},   {39, {"mxfp4", 32, 17, true}},
};

constexpr GgmlType kWeightTypes[] = {
    GgmlType::F32,    GgmlType::F16,    GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0, GgmlType::Q2_K,
    GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K, GgmlType::Q6_K,
    GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::BF16, GgmlType::MXFP4,
};

const GgmlTypeInfo* find(uint32_t id) {
  for (const Entry& e : kTypes)
    if (e.id == id) return &e.info;
  return nullptr;
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  const GgmlTypeInfo* i = find(id);
  if (i == nullptr) return std::nullopt;
  return *i;
}

std::string ggml_type_name(uint32_t id) {
  if (const GgmlTypeInfo* i = find(id)) return i->name;
  switch (id) {
    case 4:
      return "q4_2 (removed)";
    case 5:
      return "q4_3 (removed)";
    case 31:
      return "q4_0_4_4 (removed; repack from q4_0)";
    case 32:
      return "q4_0_4_8 (removed; repack from q4_0)";
    case 33:
      return "q4_0_8_8 (removed; repack from q4_0)";
    case 36:
      return "iq4_nl_4_4 (removed; repack from iq4_nl)";
    case 37:
      return "iq4_nl_4_8 (removed; repack from iq4_nl)";
    case 38:
      return "iq4_nl_8_8 (removed; repack from iq4_nl)";
    default:
      return "unknown";
  }
}

bool ggml_type_is_weight(uint32_t id) {
  const GgmlTypeInfo* i = find(id);
  return i != nullptr && i->is_weight;
}

std::span<const GgmlType> weight_types() {
  return kWeightTypes;
}

int ggml_block_size(GgmlType t) {
  const GgmlTypeInfo* i = find(uint32_t(t));
  return i ? i->block_size : 1;
}

int ggml_block_bytes(GgmlType t) {
  const GgmlTypeInfo* i = find(uint32_t(t));
  return i ? i->block_bytes : 0;
}

std::optional<size_t> ggml_row_bytes(GgmlType t, int64_t n) {
  const GgmlTypeInfo* i = find(uint32_t(t));
  if (i == nullptr || n < 0 || n % i->block_size != 0) return std::nullopt;
  return size_t(n / i->block_size) * size_t(i->block_bytes);
}

GgmlType ggml_type_from_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return GgmlType::F32;
    case DType::F16:
      return GgmlType::F16;
    case DType::BF16:
      return GgmlType::BF16;
    case DType::Q8_0:
      return GgmlType::Q8_0;
  }
  return GgmlType::F32;
}

}  // namespace kamera
