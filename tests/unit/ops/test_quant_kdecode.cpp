// The decode kernels of the repacked q4_K, q5_K and q6_K layouts on every x86 path that has
// them (ops/quant_x86.inc: avx512_vnni's k45_x16_block and q6_kx16_block, which the amx table's
// decode uses too; ops/quant_x16_avx2.inc: avx2's and avx2_vnni's k45_x8_block and
// q6_kx8_block; 1 to 4 activation rows per pass) against a scalar model of what they compute: per
// super-block the exact integer sums (q4_K / q5_K: isum = sum_j sc_j dot_j and msum = sum_j m_j
// bsum_j; q6_K: isum = sum_g sc_g dot_g over the values less 32), then the float steps in their
// order (acc = fma(d da, isum, acc), then acc -= dmin da msum). The kernels rearrange the integer
// work (q4_K's high nibbles kept x 16 on the dpbusd paths, q5_K's fifth bits by bit select, the
// mins and q6_K's -32 through madd / vpdpwssd, scales per sub-block), so the floats must come
// out to the bit, also at the largest integers: weights at their extreme scales and quants,
// activations at +-127.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "ops/quant.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"
#include "support/quant_data.h"
#include "support/quant_paths.h"

namespace kamera::quant {
namespace {

// Row r of `rows` weight rows: random bytes (quant_data), and every fourth row at an extreme:
// q4_K all nibbles 15 with scales and mins 63; q5_K all values 31 (or 15: fifth bits clear)
// with scales and mins 63; q6_K all values 63 (or 0) with scales -128 (or 127).
std::vector<uint8_t> weights(GgmlType t, int64_t rows, int64_t cols) {
  auto w = quant_data::random_rows(t, rows, cols, 31);
  const size_t bb = size_t(ggml_block_bytes(t)), nb = size_t(cols / 256);
  for (int64_t r = 0; r < rows; r += 4)
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* blk = w.data() + (size_t(r) * nb + b) * bb;
      if (t == GgmlType::Q4_K) {
        auto* q = reinterpret_cast<BlockQ4_K*>(blk);
        std::memset(q->scales, 0xff, sizeof q->scales);
        std::memset(q->qs, 0xff, sizeof q->qs);
      } else if (t == GgmlType::Q5_K) {
        auto* q = reinterpret_cast<BlockQ5_K*>(blk);
        std::memset(q->scales, 0xff, sizeof q->scales);
        std::memset(q->qs, 0xff, sizeof q->qs);
        std::memset(q->qh, (r / 4) % 2 == 0 ? 0xff : 0, sizeof q->qh);
      } else {
        auto* q = reinterpret_cast<BlockQ6_K*>(blk);
        const bool top = (r / 4) % 2 == 0;
        std::memset(q->ql, top ? 0xff : 0, sizeof q->ql);
        std::memset(q->qh, top ? 0xff : 0, sizeof q->qh);
        std::memset(q->scales, top ? 0x80 : 0x7f, sizeof q->scales);
      }
    }
  return w;
}

// One super-block's exact integers of a weight row against a q8_K block: isum and msum. q4_K and
// q5_K share the nibble and scale layout; q5_K's fifth bit of value l of sub-block j is bit j of
// qh[l].
template <class B>
void k45_ints(const B& w, const BlockQ8_K& a, int64_t* isum, int64_t* msum) {
  *isum = *msum = 0;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k4_scale_min(w.scales, j, &sc, &m);
    int64_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      int q = (w.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if constexpr (std::is_same_v<B, BlockQ5_K>) q |= ((w.qh[l] >> j) & 1) << 4;
      dot += int64_t(q) * a.qs[32 * j + l];
    }
    *isum += sc * dot;
    *msum += int64_t(m) * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
}
int64_t q6k_isum(const BlockQ6_K& w, const BlockQ8_K& a) {
  int64_t isum = 0;
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, set = (v % 128) / 32, l = v % 32;
    const uint8_t ql = w.ql[64 * h + l + 32 * (set % 2)];
    const int lo = (set < 2 ? ql : ql >> 4) & 15, hi = (w.qh[32 * h + l] >> (2 * set)) & 3;
    isum += int64_t(w.scales[v / 16]) * ((lo | hi << 4) - 32) * a.qs[v];
  }
  return isum;
}

// The kernels' float steps over a row's super-blocks; the integers must fit int32 (checked).
float model_dot(GgmlType t, int64_t cols, const uint8_t* row, const uint8_t* act) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / 256; ++b) {
    int64_t isum = 0, msum = 0;
    float d = 0.0f, dmin = 0.0f;
    if (t == GgmlType::Q4_K) {
      const auto& w = reinterpret_cast<const BlockQ4_K*>(row)[b];
      k45_ints(w, a[b], &isum, &msum);
      d = f16_to_f32(w.d), dmin = f16_to_f32(w.dmin);
    } else if (t == GgmlType::Q5_K) {
      const auto& w = reinterpret_cast<const BlockQ5_K*>(row)[b];
      k45_ints(w, a[b], &isum, &msum);
      d = f16_to_f32(w.d), dmin = f16_to_f32(w.dmin);
    } else {
      const auto& w = reinterpret_cast<const BlockQ6_K*>(row)[b];
      isum = q6k_isum(w, a[b]);
      d = f16_to_f32(w.d);
    }
    EXPECT_LT(std::llabs(16 * isum), int64_t(1) << 31);  // q4_K's kernel holds 16 isum
    acc = std::fma(d * a[b].d, float(isum), acc);
    if (t != GgmlType::Q6_K) acc = std::fma(-(dmin * a[b].d), float(msum), acc);
  }
  return acc;
}

TEST(QuantKDecode, X86KernelsGiveTheModelsFloatsToTheBit) {
  const int64_t rows = 64, cols = 2048;
  int compared = 0, compared_vnni = 0;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const auto w = weights(t, rows, cols);
    auto v = make_weight_view(t, w.data(), rows, cols);
    ASSERT_TRUE(v.ok());
    std::vector<uint8_t> packed(x16_bytes(*v));
    repack_x16(*v, 0, x16_group_count(rows), packed.data());
    const WeightLayout l = x16_layout_of(t);
    for (int n = 1; n <= 6; ++n) {
      // Row 0 all at +127 and row 1 all at the negative extreme (the int16 partial sums of the
      // avx2 path at their bound, against the extreme weight rows), row 2 at full scale with
      // mixed signs, the others random.
      auto x = quant_data::random_activations(n * cols, uint32_t(90 + n));
      for (int64_t j = 0; j < cols; ++j) {
        x[j] = 1.0f;
        if (n > 1) x[cols + j] = -1.0f;
        if (n > 2) x[2 * cols + j] = j % 3 == 0 ? -1.0f : 1.0f;
      }
      const size_t ab = act_row_bytes(t, cols);
      std::vector<uint8_t> q(ab * size_t(n));
      for (int i = 0; i < n; ++i) quantize_act_ref(GgmlType::Q8_K, &x[i * cols], &q[ab * i], cols);
      std::vector<float> want(size_t(n * rows));
      for (int i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r)
          want[i * rows + r] = model_dot(t, cols, v->row(r), &q[ab * i]);
      for (const QuantKernels* k : supported_quant_paths()) {
        if (k->has_x16 == nullptr || !k->has_x16(l)) continue;
        SCOPED_TRACE(std::string(k->name) + " " + ggml_type_name(t) + " n=" + std::to_string(n));
        std::vector<float> got(want.size(), 1e30f);
        k->vec_dot_x16(l, cols, packed.data(), 0, x16_group_count(rows), q.data(), ab, nullptr, n,
                       got.data(), rows);
        EXPECT_EQ(got, want);
        ++compared;
        compared_vnni += k->level >= IsaLevel::Avx512Vnni;
      }
    }
  }
  if (cpu_isa_level() < IsaLevel::Avx2) GTEST_SKIP() << "CPU without AVX2";
  EXPECT_GE(compared, 3 * 6);  // the avx2 path at least, every type and row count
  if (cpu_isa_level() >= IsaLevel::Avx512Vnni) {
    EXPECT_GE(compared_vnni, 3 * 6);
  }
}

}  // namespace
}  // namespace kamera::quant
