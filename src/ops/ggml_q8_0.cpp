// Q8_0 products in ggml's x86 order (ops/ggml_q8_0.h): the scalar reference, the kernel choice,
// and the driver (activation quantization, threads over weight rows, biases).
#include "ops/ggml_q8_0.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/quant_blocks.h"
#include "ops/quant_ref.h"

namespace kamera::ggml_q8_0 {

using quant::BlockQ8_0;

float dot_ref(int64_t cols, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float acc[8] = {};
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float d = f16_to_f32(wb[b].d) * f16_to_f32(ab[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t s = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) s += int32_t(wb[b].qs[j]) * int32_t(ab[b].qs[j]);
      acc[l] = std::fma(d, float(s), acc[l]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

void rows_ref(int64_t cols, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
              const uint8_t* act, size_t act_bytes, int n_act, float* y, int64_t y_stride) {
  for (int64_t r = r0; r < r1; ++r)
    for (int a = 0; a < n_act; ++a)
      y[a * y_stride + r] = dot_ref(cols, w + size_t(r) * row_bytes, act + size_t(a) * act_bytes);
}

RowsFn rows_kernel() {
  static const RowsFn k = isa_level() >= IsaLevel::Avx2 ? rows_avx2 : rows_ref;
  return k;
}

const char* path_name() {
  return rows_kernel() == rows_avx2 ? "ggml-order avx2 q8_0-dot, decode and prefill"
                                    : "ggml-order scalar q8_0-dot, decode and prefill";
}

bool applies(const WeightView& w) {
  return w.numerics == Numerics::Ggml && w.type == GgmlType::Q8_0 &&
         w.layout == WeightLayout::Rows && w.cols % 32 == 0;
}

// Weight rows per unit of work: one thread's share is whole units.
constexpr int64_t kUnitRows = 16;

void matmul(std::span<const quant::Product> ps, const float* x, int64_t n, ThreadPool& pool) {
  if (ps.empty() || n == 0) return;
  const int64_t cols = ps[0].w->cols;
  const size_t ab = quant::act_row_bytes(GgmlType::Q8_0, cols);
  std::vector<uint8_t> act(ab * size_t(n));
  auto quantize = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      quant::quantize_act_ref(GgmlType::Q8_0, x + i * cols, act.data() + ab * size_t(i), cols);
  };
  if (n > kQuantDecodeMaxRows) {
    pool.parallel_for(n, quantize);
  } else {
    quantize(0, n);
  }
  std::vector<int64_t> first_unit{0};  // product p's units are [first_unit[p], first_unit[p+1])
  for (const quant::Product& p : ps)
    first_unit.push_back(first_unit.back() + (p.w->rows + kUnitRows - 1) / kUnitRows);
  const RowsFn rows = rows_kernel();
  pool.parallel_for(first_unit.back(), [&](int64_t u0, int64_t u1) {
    for (size_t p = 0; p < ps.size(); ++p) {
      const WeightView& w = *ps[p].w;
      const int64_t a = std::max(u0, first_unit[p]), b = std::min(u1, first_unit[p + 1]);
      if (a >= b) continue;
      const int64_t r0 = (a - first_unit[p]) * kUnitRows;
      const int64_t r1 = std::min(w.rows, (b - first_unit[p]) * kUnitRows);
      rows(cols, w.data, w.row_bytes, r0, r1, act.data(), ab, int(n), ps[p].y, w.rows);
    }
  });
  for (const quant::Product& p : ps) {
    if (p.bias == nullptr) continue;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < p.w->rows; ++r) p.y[i * p.w->rows + r] += p.bias[r];
  }
}

}  // namespace kamera::ggml_q8_0
