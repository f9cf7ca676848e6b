// matmul over weights in their file type: activation quantization, the decode and prefill
// drivers (threading, panels, scratch), and the choice of kernel tables for this CPU.
#include "ops/quant.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/ggml_q8_0.h"
#include "ops/quant_blocks.h"
#include "ops/quant_kernels.h"
#include "ops/quant_ref.h"
#include "ops/quant_repack.h"
#include "ops/row_passes.h"

namespace kamera {

namespace quant {

const PassPrefetch& pass_prefetch() {
  static const PassPrefetch p = [] {
    auto num = [](const char* name, int64_t dflt) {
      const char* e = std::getenv(name);
      return e != nullptr && *e != '\0' ? int64_t(std::atoll(e)) : dflt;
    };
    return PassPrefetch{num("KAMERA_PASS_AHEAD", 4096), int(num("KAMERA_PASS_HINT", 0)),
                        num("KAMERA_PASS_FROM_END", 0) != 0};
  }();
  return p;
}

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
    t.vec_dot_rows = bf16::vec_dot_rows;
    t.acts_to_bf16 = bf16::to_bf16;
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
    t.has_x16 = amx::has_x16;
    t.vec_dot_x16 = amx::vec_dot_x16;
    return t;
  }();
  return k;
}

const QuantKernels* const* all_kernels(int* count) {
  static const QuantKernels* const k[] = {
      &scalar_kernels(),      &avx2_kernels(),        &avx2_vnni_kernels(), &avx512_kernels(),
      &avx512_vnni_kernels(), &avx512_bf16_kernels(), &amx_kernels()};
  *count = int(std::size(k));
  return k;
}

size_t act_bytes_of(const QuantKernels& k, GgmlType t, int64_t cols) {
  return t == GgmlType::BF16 && k.acts_to_bf16 != nullptr ? size_t(cols) * 2
                                                          : act_row_bytes(t, cols);
}

bool cpu_supports(const QuantKernels& k) {
  return cpu_isa_level() >= k.level && (!k.needs_bf16 || cpu_features().avx512_bf16) &&
         (!k.needs_avx_vnni || cpu_features().avx_vnni);
}

namespace {

// The best table at or below the ISA level in use (KAMERA_ISA caps it) for which `usable`
// holds: the last such in all_kernels' order (avx2_vnni after avx2, where AVX-VNNI is enabled).
template <class Pred>
const QuantKernels& best(Pred usable) {
  int n = 0;
  const QuantKernels* const* k = all_kernels(&n);
  const QuantKernels* pick = k[0];
  for (int i = 0; i < n; ++i)
    if (k[i]->level <= isa_level() && cpu_supports(*k[i]) &&
        (!k[i]->needs_avx_vnni || avx_vnni_enabled()) && usable(*k[i]))
      pick = k[i];
  return *pick;
}

// Per-thread scratch that only grows.
std::vector<uint8_t>& scratch(int slot) {
  thread_local std::vector<uint8_t> bufs[4];
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

// Row r of w in the file's row layout: the view's bytes, or unpacked into `tmp`.
const uint8_t* file_row(const WeightView& w, int64_t r, std::vector<uint8_t>& tmp) {
  if (w.layout == WeightLayout::Rows) return w.row(r);
  uint8_t* out = grow(tmp, w.row_bytes);
  unpack_x16_rows(w, r, 1, out);
  return out;
}

// The activation rows of one decode call, quantized once per dot type (q8_0 with its block
// sums, q8_1, q8_K; bf16 for BF16 weights on tables that take it; the f32 rows as they are) and
// shared by every product that reads them.
struct DecodeActs {
  const QuantKernels& k;
  const float* x;
  int64_t n, cols;
  ThreadPool& pool;
  std::vector<uint8_t> q[4];  // q8_0, q8_1, q8_K, bf16
  std::vector<int32_t> sums;  // q8_0 block sums

  static int slot(GgmlType dt) {
    return dt == GgmlType::Q8_0 ? 0 : dt == GgmlType::Q8_1 ? 1 : dt == GgmlType::Q8_K ? 2 : 3;
  }
  const uint8_t* rows(GgmlType t) {
    const bool bf16 = t == GgmlType::BF16 && k.acts_to_bf16 != nullptr;
    const GgmlType dt = bf16 ? GgmlType::BF16 : dot_type_of(t);
    if (dt == GgmlType::F32) return reinterpret_cast<const uint8_t*>(x);
    std::vector<uint8_t>& v = q[slot(dt)];
    const size_t ab = act_bytes_of(k, t, cols);
    if (v.empty()) {
      v.resize(ab * size_t(n));
      if (dt == GgmlType::Q8_0) sums.resize(size_t(n * cols / 32));
      auto quantize = [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          if (bf16) {
            k.acts_to_bf16(x + i * cols, v.data() + ab * i, cols);
            continue;
          }
          if (dt == GgmlType::Q8_0 && k.quantize_q8_0 != nullptr) {
            k.quantize_q8_0(x + i * cols, v.data() + ab * i, cols);
          } else if (dt == GgmlType::Q8_K && k.quantize_q8_K != nullptr) {
            k.quantize_q8_K(x + i * cols, v.data() + ab * i, cols);
          } else {
            quantize_act_ref(dt, x + i * cols, v.data() + ab * i, cols);
          }
          if (dt == GgmlType::Q8_0)
            q8_0_block_sums(v.data() + ab * i, cols, sums.data() + i * (cols / 32));
        }
      };
      if (n > kQuantDecodeMaxRows) {
        pool.parallel_for(n, quantize);
      } else {
        quantize(0, n);
      }
    }
    return v.data();
  }
};

// One product of a decode call: its activation rows, and its work in units (groups of 16 rows
// when repacked, else rows) of unit_bytes weight bytes each.
struct DecodeJob {
  const WeightView* w;
  float* y;
  const uint8_t* act;
  size_t act_bytes;
  int64_t units;
  size_t unit_bytes;
};

// The last group of a repacked matrix whose rows are not a multiple of 16: the kernel's 16
// outputs per activation row go to a scratch block, and the real rows on to y.
void run_tail_group(const QuantKernels& k, const DecodeJob& j, const int32_t* sums, int n,
                    int64_t g) {
  const WeightView& w = *j.w;
  auto* t = reinterpret_cast<float*>(grow(scratch(3), size_t(n) * kRepackRows * sizeof(float)));
  k.vec_dot_x16(w.layout, w.cols, w.data + size_t(g) * kRepackRows * w.row_bytes, 0, 1, j.act,
                j.act_bytes, sums, n, t, kRepackRows);
  const int64_t r0 = g * kRepackRows;
  for (int i = 0; i < n; ++i)
    std::memcpy(j.y + i * w.rows + r0, t + i * kRepackRows, size_t(w.rows - r0) * sizeof(float));
}

// Units [u0, u1) of job j: the layout's kernel, or (a path without one) the groups unpacked and
// multiplied row by row, or the file's rows.
void run_units(const QuantKernels& k, const DecodeJob& j, const int32_t* sums, int n, int64_t u0,
               int64_t u1) {
  const WeightView& w = *j.w;
  const int64_t whole = w.rows / kRepackRows;  // groups of 16 real rows
  if (w.layout == WeightLayout::Rows) {
    k.vec_dot_rows(w.type, w.cols, w.data, w.row_bytes, u0, u1, j.act, j.act_bytes, n, j.y, w.rows);
  } else if (k.has_x16 != nullptr && k.has_x16(w.layout)) {
    if (u0 < std::min(u1, whole))
      k.vec_dot_x16(w.layout, w.cols, w.data, u0, std::min(u1, whole), j.act, j.act_bytes, sums, n,
                    j.y, w.rows);
    if (u1 > whole) run_tail_group(k, j, sums, n, whole);
  } else {
    uint8_t* rows = grow(scratch(2), kRepackRows * w.row_bytes);
    for (int64_t g = u0; g < u1; ++g) {
      const int64_t count = std::min(kRepackRows, w.rows - g * kRepackRows);
      unpack_x16_rows(w, g * kRepackRows, count, rows);
      k.vec_dot_rows(w.type, w.cols, rows, w.row_bytes, 0, count, j.act, j.act_bytes, n,
                     j.y + g * kRepackRows, w.rows);
    }
  }
}

// Bytes per chunk of decode's stealing split (KAMERA_DECODE_CHUNK; 0: the static split).
int64_t decode_chunk_bytes() {
  static const int64_t c = [] {
    const char* e = std::getenv("KAMERA_DECODE_CHUNK");
    return e != nullptr && *e != '\0' ? int64_t(std::atoll(e)) : int64_t(0);
  }();
  return c;
}

// One thread's share of a decode call's chunks, [front, back) packed in one word: the owner takes
// chunks from the front, a thread done with its own share from the back.
struct alignas(64) ChunkShare {
  std::atomic<uint64_t> fb{0};
  static uint64_t pack(uint64_t f, uint64_t b) { return f << 32 | b; }
  // Takes the front (or back) chunk; false when the share is empty.
  bool take(bool front, int64_t* chunk) {
    uint64_t s = fb.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = s >> 32, b = s & 0xffffffffu;
      if (f >= b) return false;
      const uint64_t next = front ? pack(f + 1, b) : pack(f, b - 1);
      if (fb.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
        *chunk = int64_t(front ? f : b - 1);
        return true;
      }
    }
  }
};

// Decode: every activation row quantized once per dot type, then all the products' weight bytes
// split evenly across the threads in one parallel_for (piece p streams the units that start in
// bytes [p/P, (p+1)/P) of the total), so products of one input wait at one barrier, not one each.
void decode(const QuantKernels& k, std::span<const Product> ps, const float* x, int64_t n,
            int64_t cols, ThreadPool& pool) {
  DecodeActs acts{k, x, n, cols, pool, {}, {}};
  std::vector<DecodeJob> jobs;
  size_t total = 0;
  for (const Product& p : ps) {
    const WeightView& w = *p.w;
    const bool grouped = w.layout != WeightLayout::Rows;
    const int64_t units = grouped ? x16_group_count(w.rows) : w.rows;
    const size_t ub = (grouped ? kRepackRows : 1) * w.row_bytes;
    jobs.push_back({&w, p.y, acts.rows(w.type), act_bytes_of(k, w.type, cols), units, ub});
    total += size_t(units) * ub;
  }
  // The units that start in bytes [lo, hi) of the total.
  auto run_bytes = [&](size_t lo, size_t hi) {
    size_t at = 0;  // the job's first byte
    for (const DecodeJob& j : jobs) {
      const size_t end = at + size_t(j.units) * j.unit_bytes;
      auto first_at_or_after = [&](size_t b) {
        return b <= at ? int64_t(0)
                       : std::min<int64_t>(j.units,
                                           int64_t((b - at + j.unit_bytes - 1) / j.unit_bytes));
      };
      if (end > lo && at < hi) {
        const int64_t u0 = first_at_or_after(lo), u1 = first_at_or_after(hi);
        if (u0 < u1) run_units(k, j, acts.sums.data(), int(n), u0, u1);
      }
      at = end;
    }
  };
  const int64_t chunk = decode_chunk_bytes();
  const int threads = pool.size();
  constexpr int kMaxShares = 64;
  if (chunk > 0 && threads > 1 && threads <= kMaxShares && int64_t(total) > chunk * threads) {
    const int64_t n_chunks = std::min<int64_t>(int64_t(total) / chunk, int64_t(1) << 31);
    std::array<ChunkShare, kMaxShares> shares;
    for (int p = 0; p < threads; ++p)
      shares[size_t(p)].fb.store(ChunkShare::pack(uint64_t(n_chunks * p / threads),
                                                  uint64_t(n_chunks * (p + 1) / threads)));
    auto run_chunk = [&](int64_t c) {
      run_bytes(
          size_t(double(total) * double(c) / double(n_chunks)),
          c + 1 == n_chunks ? total : size_t(double(total) * double(c + 1) / double(n_chunks)));
    };
    pool.parallel_pieces(threads, [&](int64_t, int64_t, int p) {
      int64_t c = 0;
      while (shares[size_t(p)].take(true, &c)) run_chunk(c);
      for (int v = 1; v < threads; ++v)
        while (shares[size_t((p + v) % threads)].take(false, &c)) run_chunk(c);
    });
    return;
  }
  const int pieces = int(std::min<int64_t>(threads, int64_t(total / 4096) + 1));
  pool.parallel_for(pieces, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      run_bytes(total * size_t(p) / size_t(pieces), total * size_t(p + 1) / size_t(pieces));
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
  // BF16 weights in their file's rows are already a bf16 panel: no dequantizing round trip; nor
  // F16 or BF16 rows where the table's gemm_f16 / gemm_bf16 widens them while it packs.
  const bool in_panel_format =
      w.layout == WeightLayout::Rows && k.panel == PanelFormat::BF16 && w.type == GgmlType::BF16;
  const auto row_gemm = w.layout != WeightLayout::Rows || k.pack_x != nullptr ? nullptr
                        : w.type == GgmlType::F16                             ? k.gemm_f16
                        : w.type == GgmlType::BF16                            ? k.gemm_bf16
                                                                              : nullptr;
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  pool.parallel_for(n_panels, [&](int64_t p0, int64_t p1) {
    auto* f32 = reinterpret_cast<float*>(grow(scratch(0), size_t(kPanelRows * w.cols) * 4));
    uint8_t* panel = k.to_panel == nullptr ? reinterpret_cast<uint8_t*>(f32)
                                           : grow(scratch(1), size_t(kPanelRows * w.cols) * elem);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = p * kPanelRows, nr = std::min(kPanelRows, w.rows - r0);
      if (in_panel_format) {  // the weight rows are the panel
        k.gemm(n, nr, w.cols, xp, w.row(r0), w.cols, y + r0, w.rows);
        continue;
      }
      if (row_gemm != nullptr) {  // the file's rows, widened while the gemm packs them
        row_gemm(n, nr, w.cols, xp, w.row(r0), w.cols, y + r0, w.rows);
        continue;
      }
      for (int64_t j = 0; j < nr; ++j) {
        float* row = f32 + j * w.cols;
        k.dequantize(w.type, file_row(w, r0 + j, scratch(2)), row, w.cols);
        if (k.to_panel != nullptr) k.to_panel(row, panel + size_t(j * w.cols) * elem, w.cols);
      }
      k.gemm(n, nr, w.cols, xp, panel, w.cols, y + r0, w.rows);
    }
  });
}

// x's rows as the weight type's integer dot products see them: each row quantized to the dot type
// dt (q8_0 or q8_K) exactly as decode quantizes it (k's quantizer) and expanded back to f32 (d x q
// per value).
// A GEMM over f32 panels of the dequantized weights then sums the same products as the integer
// kernels, to f32 rounding: prefill computes what decode (and ggml's CPU matmul, which quantizes
// the activations at every batch size) computes.
void round_through_dot_type(const QuantKernels& k, GgmlType dt, const float* x, int64_t n,
                            int64_t cols, float* out, ThreadPool& pool) {
  const size_t ab = *ggml_row_bytes(dt, cols);
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    uint8_t* q = grow(scratch(2), ab);
    for (int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * cols;
      float* o = out + i * cols;
      if (dt == GgmlType::Q8_0 && k.quantize_q8_0 != nullptr) {
        k.quantize_q8_0(xi, q, cols);
      } else if (dt == GgmlType::Q8_K && k.quantize_q8_K != nullptr) {
        k.quantize_q8_K(xi, q, cols);
      } else {
        quantize_act_ref(dt, xi, q, cols);
      }
      auto expand = [&](const auto* b, int64_t per_block, auto scale) {
        for (int64_t j = 0; j < cols; ++j)
          o[j] = scale(b[j / per_block]) * float(b[j / per_block].qs[j % per_block]);
      };
      if (dt == GgmlType::Q8_K) {
        expand(reinterpret_cast<const BlockQ8_K*>(q), 256, [](const BlockQ8_K& b) { return b.d; });
      } else {
        expand(reinterpret_cast<const BlockQ8_0*>(q), 32,
               [](const BlockQ8_0& b) { return f16_to_f32(b.d); });
      }
    }
  });
}

bool switched_on(const char* name);

// Prefill of products whose weights go through dequantized panels. Quantized weights multiply x
// rounded through their dot type (once per dot type, shared by the products) in f32 panels: the
// decode table's GEMM where the prefill table's panels are bf16 (bf16 would round the weights
// and activations again). Q4_1 and Q5_1 take the integer kernels instead: their dot adds the
// weight's min times q8_1's s, an f16 of d x sum(q), which expanded values would not round.
// KAMERA_PREFILL_DOT_ACTS=0 multiplies x as it is, in pk's panels.
void prefill_panels(const QuantKernels& dk, const QuantKernels& pk, std::span<const Product> ps,
                    const float* x, int64_t n, ThreadPool& pool) {
  static const bool dot_acts = switched_on("KAMERA_PREFILL_DOT_ACTS");
  std::vector<float> rounded[2];  // q8_0, q8_K
  for (const Product& p : ps) {
    const WeightView& w = *p.w;
    const GgmlType dt = dot_type_of(w.type);
    if (w.rows == 0) continue;
    if (dt == GgmlType::F32 || !dot_acts) {
      prefill(pk, w, x, n, p.y, pool);
      continue;
    }
    if (dt == GgmlType::Q8_1) {
      decode(dk, {&p, 1}, x, n, w.cols, pool);
      continue;
    }
    std::vector<float>& r = rounded[dt == GgmlType::Q8_0 ? 0 : 1];
    if (r.empty()) {
      r.resize(size_t(n * w.cols));
      round_through_dot_type(dk, dt, x, n, w.cols, r.data(), pool);
    }
    prefill(pk.panel == PanelFormat::F32 ? pk : dk, w, r.data(), n, p.y, pool);
  }
}

// An on-by-default switch: false only when the variable is "0".
bool switched_on(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}

// The avx512_bf16 table where the CPU (and KAMERA_ISA) allow it, else k.
const QuantKernels& bf16_if_supported(const QuantKernels& k) {
  const QuantKernels& b = avx512_bf16_kernels();
  return b.level <= isa_level() && cpu_supports(b) ? b : k;
}

}  // namespace

// Decode: the highest integer path (the bf16 and amx tables decode with avx512_vnni's kernels,
// BF16 weights aside).
const QuantKernels& decode_kernels() {
  static const QuantKernels& k =
      best([](const QuantKernels& t) { return t.panel == PanelFormat::F32; });
  return k;
}

// BF16 weights decode through the avx512_bf16 table's vdpbf16ps rows (activations rounded to
// bf16 once per call, as llama.cpp does for BF16 files) where the CPU has AVX512-BF16, unless
// KAMERA_DECODE_BF16=0.
const QuantKernels& decode_kernels(GgmlType t) {
  static const bool bf16_dots = switched_on("KAMERA_DECODE_BF16");
  return t == GgmlType::BF16 && bf16_dots ? bf16_if_supported(decode_kernels()) : decode_kernels();
}

// Prefill: the highest path, except avx512_bf16: its vdpbf16ps tiles measured slower than the
// avx512 f32 tiles on the Xeon (AMX) this was tuned on (77-80 vs 111-144 GFLOP/s per core at
// k = 896 and 4864), so CPUs with AVX512-BF16 but no AMX prefill in f32. It stays tested.
const QuantKernels& prefill_kernels() {
  static const QuantKernels& k =
      best([](const QuantKernels& t) { return &t != &avx512_bf16_kernels(); });
  return k;
}

// BF16 weights are exact in bf16 panels: where the CPU has AVX512-BF16 they prefill through its
// vdpbf16ps tiles (activations rounded to bf16, as llama.cpp does for BF16 files), unless
// KAMERA_PREFILL_BF16=0. On the 2-core AMD host (Zen 5, no AMX), 0.5b BF16 file, pp512, three
// interleaved rounds: 445 / 368 / 429 tok/s against 340 / 341 / 291 through f32 panels.
const QuantKernels& prefill_kernels(GgmlType t) {
  static const bool bf16_tiles = switched_on("KAMERA_PREFILL_BF16");
  const QuantKernels& k = prefill_kernels();
  if (t != GgmlType::BF16 || !bf16_tiles || k.panel == PanelFormat::BF16) return k;
  return bf16_if_supported(k);
}

const QuantKernels& x16_prefill_kernels(const QuantKernels& dk, const QuantKernels& pk) {
  static const bool amx_int8 = switched_on("KAMERA_PREFILL_AMX_INT8");
  return pk.has_x16 != nullptr && (amx_int8 || pk.level != IsaLevel::Amx) ? pk : dk;
}

void matmul_many_with(const QuantKernels& dk, const QuantKernels& pk, std::span<const Product> ps,
                      const float* x, int64_t n, ThreadPool& pool) {
  KAMERA_ASSERT(n >= 0);
  if (n == 0 || ps.empty()) return;
  const int64_t cols = ps[0].w->cols;
  bool decodes = n <= kQuantDecodeMaxRows;
  for (const Product& p : ps) {
    KAMERA_ASSERT(p.w->data != nullptr && p.w->cols == cols);
    decodes = decodes || p.w->cols % 32 != 0;
  }
  // Prefill over repacked weights runs the layouts' integer kernels too (activations quantized
  // once; the prefill table's where it has them: the amx table's tiles, 16 rows at a time, unless
  // KAMERA_PREFILL_AMX_INT8=0; else decode's, 4 rows per pass over a group, or on the avx2
  // paths their prefill kernel, each group unpacked once per call) unless
  // KAMERA_PREFILL_X16=0; other weights go through dequantized panels.
  static const bool x16_prefill = switched_on("KAMERA_PREFILL_X16");
  const QuantKernels& xk = x16_prefill_kernels(dk, pk);
  if (decodes) {
    decode(dk, ps, x, n, cols, pool);
  } else {
    std::vector<Product> ints, panels;
    for (const Product& p : ps) {
      const bool x16 = x16_prefill && dk.has_x16 != nullptr && dk.has_x16(p.w->layout);
      (x16 ? ints : panels).push_back(p);
    }
    if (!panels.empty()) prefill_panels(dk, pk, panels, x, n, pool);
    if (!ints.empty()) decode(xk, ints, x, n, cols, pool);
  }
  for (const Product& p : ps) add_bias(p.bias, p.y, n, p.w->rows);
}

void matmul_with(const QuantKernels& dk, const QuantKernels& pk, const WeightView& w,
                 const float* x, int64_t n, const float* bias, float* y, ThreadPool& pool) {
  const Product p{&w, bias, y};
  matmul_many_with(dk, pk, {&p, 1}, x, n, pool);
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
  const quant::Product p{&w, bias, y};
  if (ggml_q8_0::applies(w)) return ggml_q8_0::matmul({&p, 1}, x, n, pool);
  quant::matmul_with(quant::decode_kernels(w.type), quant::prefill_kernels(w.type), w, x, n, bias,
                     y, pool);
}

void matmul_many(std::span<const quant::Product> ps, const float* x, int64_t n, ThreadPool& pool) {
  if (ps.empty()) return;
  auto ggml_order = [](const quant::Product& p) { return ggml_q8_0::applies(*p.w); };
  if (std::any_of(ps.begin(), ps.end(), ggml_order)) {  // Numerics::Ggml (ops/ggml_q8_0.h)
    std::vector<quant::Product> ggml, other;
    for (const quant::Product& p : ps) (ggml_order(p) ? ggml : other).push_back(p);
    ggml_q8_0::matmul(ggml, x, n, pool);
    return matmul_many(other, x, n, pool);
  }
  // Products of one input whose types decode or prefill through different tables run as two
  // groups (the common case, one pair of tables, allocates nothing: this runs per layer on every
  // decoded token).
  const GgmlType t0 = ps[0].w->type;
  const quant::QuantKernels &dk = quant::decode_kernels(t0), &pk = quant::prefill_kernels(t0);
  auto same_tables = [&](const quant::Product& p) {
    return &quant::decode_kernels(p.w->type) == &dk && &quant::prefill_kernels(p.w->type) == &pk;
  };
  if (std::all_of(ps.begin(), ps.end(), same_tables))
    return quant::matmul_many_with(dk, pk, ps, x, n, pool);
  std::vector<quant::Product> same, other;
  for (const quant::Product& p : ps) (same_tables(p) ? same : other).push_back(p);
  quant::matmul_many_with(dk, pk, same, x, n, pool);
  if (!other.empty()) matmul_many(other, x, n, pool);
}

void dequantize_rows(const WeightView& w, int64_t first, int64_t count, float* out) {
  KAMERA_ASSERT(first >= 0 && count >= 0 && first + count <= w.rows);
  const quant::QuantKernels& k = quant::decode_kernels();
  std::vector<uint8_t> tmp;
  for (int64_t r = 0; r < count; ++r)
    k.dequantize(w.type, quant::file_row(w, first + r, tmp), out + r * w.cols, w.cols);
}

std::string kernel_path(GgmlType t) {
  const quant::QuantKernels& d = quant::decode_kernels(t);
  const quant::QuantKernels& p = quant::prefill_kernels(t);
  const GgmlType dt = quant::dot_type_of(t);
  const char* panel = p.panel == quant::PanelFormat::F32 ? "f32" : "bf16";
  const bool bf16_dot = t == GgmlType::BF16 && d.acts_to_bf16 != nullptr;
  // Weights the loader repacks (KAMERA_REPACK=0 keeps the file's rows) decode and prefill through
  // the layout's integer kernel.
  const WeightLayout l = quant::x16_layout_of(t);
  const bool x16 = l != WeightLayout::Rows && d.has_x16 != nullptr && d.has_x16(l);
  const bool amx_tiles =
      x16 && quant::x16_prefill_kernels(d, p).level == IsaLevel::Amx && quant::amx::tiles_x16(l);
  const char* repacked = !x16        ? ""
                         : amx_tiles ? "; repacked x16: integer decode, prefill on amx int8 tiles"
                         : d.needs_avx_vnni ? "; repacked x16 avx-vnni: integer decode and prefill"
                                            : "; repacked x16: integer decode and prefill";
  return fmt::format("decode {} {}-dot, prefill {} {}-gemm{}", d.name,
                     bf16_dot              ? "bf16"
                     : dt == GgmlType::F32 ? "f32"
                                           : ggml_type_name(dt),
                     p.name, panel, repacked);
}

}  // namespace kamera
