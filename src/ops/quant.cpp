// matmul over weights in their file type: activation quantization, the decode and prefill
// drivers (threading, panels, scratch), and the choice of kernel tables for this CPU.
#include "ops/quant.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"

namespace kamera {

namespace quant {

const QuantKernels& avx512_bf16_kernels() {
  static const QuantKernels k = [] {
    QuantKernels t = avx512_vnni_kernels();  // decode and dequantization
    t.name = "avx512_bf16";
    t.level = IsaLevel::Avx512Vnni;
    t.needs_bf16 = true;
    t.panel = PanelFormat::BF16;
    t.to_panel = bf16::to_bf16;
    t.packed_x_bytes = bf16::packed_x_bytes;
    t.pack_x = bf16::pack_x;
    t.gemm = bf16::gemm;
    return t;
  }();
  return k;
}

const QuantKernels& amx_kernels() {
  static const QuantKernels k = [] {
    QuantKernels t = avx512_bf16_kernels();
    t.name = "amx";
    t.level = IsaLevel::Amx;
    t.packed_x_bytes = amx::packed_x_bytes;
    t.pack_x = amx::pack_x;
    t.gemm = amx::gemm;
    return t;
  }();
  return k;
}

const QuantKernels* const* all_kernels(int* count) {
  static const QuantKernels* const k[] = {&scalar_kernels(),      &avx2_kernels(),
                                          &avx512_kernels(),      &avx512_vnni_kernels(),
                                          &avx512_bf16_kernels(), &amx_kernels()};
  *count = int(std::size(k));
  return k;
}

bool cpu_supports(const QuantKernels& k) {
  return cpu_isa_level() >= k.level && (!k.needs_bf16 || cpu_features().avx512_bf16);
}

namespace {

// The best table at or below the ISA level in use (KAMERA_ISA caps it) for which `usable`
// holds.
template <class Pred>
const QuantKernels& best(Pred usable) {
  int n = 0;
  const QuantKernels* const* k = all_kernels(&n);
  const QuantKernels* pick = k[0];
  for (int i = 0; i < n; ++i)
    if (k[i]->level <= isa_level() && cpu_supports(*k[i]) && usable(*k[i])) pick = k[i];
  return *pick;
}

// Per-thread scratch that only grows.
std::vector<uint8_t>& scratch(int slot) {
  thread_local std::vector<uint8_t> bufs[3];
  return bufs[slot];
}

uint8_t* grow(std::vector<uint8_t>& v, size_t bytes) {
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

void add_bias(const float* bias, float* y, int64_t n, int64_t rows) {
  if (bias == nullptr) return;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) y[i * rows + r] += bias[r];
}

// Repacked Q8_0: groups of 16 rows split across threads, through the path's kernel for the
// layout, or (a path without one) each group unpacked and multiplied row by row.
void decode_q8_0x16(const QuantKernels& k, const WeightView& w, const uint8_t* act,
                    size_t act_bytes, int64_t n, float* y, ThreadPool& pool) {
  const int64_t nb = w.cols / 32;
  std::vector<int32_t> sums(size_t(n * nb));
  for (int64_t i = 0; i < n; ++i)
    q8_0_block_sums(act + size_t(i) * act_bytes, w.cols, sums.data() + i * nb);
  pool.parallel_for(w.rows / kQ8x16Rows, [&](int64_t g0, int64_t g1) {
    if (k.vec_dot_q8_0x16 != nullptr) {
      k.vec_dot_q8_0x16(w.cols, w.data, g0, g1, act, act_bytes, sums.data(), int(n), y, w.rows);
      return;
    }
    uint8_t* rows = grow(scratch(2), kQ8x16Rows * w.row_bytes);
    for (int64_t g = g0; g < g1; ++g) {
      unpack_q8_0x16_rows(w, g * kQ8x16Rows, kQ8x16Rows, rows);
      k.vec_dot_rows(w.type, w.cols, rows, w.row_bytes, 0, kQ8x16Rows, act, act_bytes, int(n),
                     y + g * kQ8x16Rows, w.rows);
    }
  });
}

// Row r of w in the file's row layout: the view's bytes, or unpacked into `tmp`.
const uint8_t* file_row(const WeightView& w, int64_t r, std::vector<uint8_t>& tmp) {
  if (w.layout == WeightLayout::Rows) return w.row(r);
  uint8_t* out = grow(tmp, w.row_bytes);
  unpack_q8_0x16_rows(w, r, 1, out);
  return out;
}

// Each activation row quantized once to the dot type, then rows of W split across threads.
void decode(const QuantKernels& k, const WeightView& w, const float* x, int64_t n, float* y,
            ThreadPool& pool) {
  const GgmlType dt = dot_type_of(w.type);
  const size_t act_bytes = act_row_bytes(w.type, w.cols);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  std::vector<uint8_t> q;
  if (dt != GgmlType::F32) {
    q.resize(act_bytes * size_t(n));
    for (int64_t i = 0; i < n; ++i)
      quantize_act_ref(dt, x + i * w.cols, q.data() + size_t(i) * act_bytes, w.cols);
    act = q.data();
  }
  if (w.layout == WeightLayout::Q8_0x16) return decode_q8_0x16(k, w, act, act_bytes, n, y, pool);
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1) {
    k.vec_dot_rows(w.type, w.cols, w.data, w.row_bytes, r0, r1, act, act_bytes, int(n), y, w.rows);
  });
}

// Weight rows per panel: dequantized once, multiplied against every activation row. A multiple
// of 32 (the amx gemm computes whole 32-row blocks and drops the rows past the panel's end).
constexpr int64_t kPanelRows = 64;

void prefill(const QuantKernels& k, const WeightView& w, const float* x, int64_t n, float* y,
             ThreadPool& pool) {
  const void* xp = x;
  std::vector<uint8_t> packed;
  if (k.pack_x != nullptr) {
    // Packed layouts keep blocks of 16 rows contiguous, so threads pack blocks of rows apart.
    packed.resize(k.packed_x_bytes(n, w.cols));
    const size_t block_bytes = k.packed_x_bytes(16, w.cols);
    pool.parallel_for((n + 15) / 16, [&](int64_t b0, int64_t b1) {
      const int64_t r0 = 16 * b0, r1 = std::min(n, 16 * b1);
      k.pack_x(x + r0 * w.cols, r1 - r0, w.cols, packed.data() + size_t(b0) * block_bytes);
    });
    xp = packed.data();
  }
  const size_t elem = k.panel == PanelFormat::F32 ? 4 : 2;
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  pool.parallel_for(n_panels, [&](int64_t p0, int64_t p1) {
    auto* f32 = reinterpret_cast<float*>(grow(scratch(0), size_t(kPanelRows * w.cols) * 4));
    uint8_t* panel = k.to_panel == nullptr ? reinterpret_cast<uint8_t*>(f32)
                                           : grow(scratch(1), size_t(kPanelRows * w.cols) * elem);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = p * kPanelRows, nr = std::min(kPanelRows, w.rows - r0);
      for (int64_t j = 0; j < nr; ++j) {
        float* row = f32 + j * w.cols;
        k.dequantize(w.type, file_row(w, r0 + j, scratch(2)), row, w.cols);
        if (k.to_panel != nullptr) k.to_panel(row, panel + size_t(j * w.cols) * elem, w.cols);
      }
      k.gemm(n, nr, w.cols, xp, panel, w.cols, y + r0, w.rows);
    }
  });
}

}  // namespace

// Decode: the highest integer path (the bf16 and amx tables decode with avx512_vnni's kernels).
const QuantKernels& decode_kernels() {
  static const QuantKernels& k =
      best([](const QuantKernels& t) { return t.panel == PanelFormat::F32; });
  return k;
}

// Prefill: the highest path, except avx512_bf16: its vdpbf16ps tiles measured slower than the
// avx512 f32 tiles on the Xeon (AMX) this was tuned on (77-80 vs 111-144 GFLOP/s per core at
// k = 896 and 4864), so CPUs with AVX512-BF16 but no AMX prefill in f32. It stays tested.
const QuantKernels& prefill_kernels() {
  static const QuantKernels& k =
      best([](const QuantKernels& t) { return &t != &avx512_bf16_kernels(); });
  return k;
}

void matmul_with(const QuantKernels& dk, const QuantKernels& pk, const WeightView& w,
                 const float* x, int64_t n, const float* bias, float* y, ThreadPool& pool) {
  KAMERA_ASSERT(w.data != nullptr && n >= 0);
  if (n == 0 || w.rows == 0) return;
  if (n <= kQuantDecodeMaxRows || w.cols % 32 != 0) {
    decode(dk, w, x, n, y, pool);
  } else {
    prefill(pk, w, x, n, y, pool);
  }
  add_bias(bias, y, n, w.rows);
}

}  // namespace quant

Result<WeightView> make_weight_view(GgmlType type, const void* data, int64_t rows, int64_t cols) {
  if (!ggml_type_is_weight(uint32_t(type)))
    return make_error(ErrorCode::Unsupported, "weight type {} is not supported",
                      ggml_type_name(type));
  if (rows < 0 || cols < 1)
    return make_error(ErrorCode::InvalidArgument, "weight of {} x {} values: bad shape", rows,
                      cols);
  const auto rb = ggml_row_bytes(type, cols);
  if (!rb)
    return make_error(ErrorCode::InvalidArgument,
                      "{} weight rows must be a multiple of {} values, but cols is {}",
                      ggml_type_name(type), ggml_block_size(type), cols);
  if (data == nullptr && rows > 0)
    return make_error(ErrorCode::InvalidArgument, "weight of {} x {} {}: no data", rows, cols,
                      ggml_type_name(type));
  return WeightView{type, static_cast<const uint8_t*>(data), rows, cols, *rb};
}

void matmul(const WeightView& w, const float* x, int64_t n, const float* bias, float* y,
            ThreadPool& pool) {
  quant::matmul_with(quant::decode_kernels(), quant::prefill_kernels(), w, x, n, bias, y, pool);
}

void dequantize_rows(const WeightView& w, int64_t first, int64_t count, float* out) {
  KAMERA_ASSERT(first >= 0 && count >= 0 && first + count <= w.rows);
  const quant::QuantKernels& k = quant::decode_kernels();
  std::vector<uint8_t> tmp;
  for (int64_t r = 0; r < count; ++r)
    k.dequantize(w.type, quant::file_row(w, first + r, tmp), out + r * w.cols, w.cols);
}

std::string kernel_path(GgmlType t) {
  const quant::QuantKernels& d = quant::decode_kernels();
  const quant::QuantKernels& p = quant::prefill_kernels();
  const GgmlType dt = quant::dot_type_of(t);
  const char* panel = p.panel == quant::PanelFormat::F32 ? "f32" : "bf16";
  return fmt::format("decode {} {}-dot, prefill {} {}-gemm", d.name,
                     dt == GgmlType::F32 ? "f32" : ggml_type_name(dt), p.name, panel);
}

}  // namespace kamera
