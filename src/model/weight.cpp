#include "model/weight.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/gemm.h"
#include "ops/quant_repack.h"

namespace kamera {

namespace {

std::shared_ptr<const std::vector<uint8_t>> own_bytes(const void* data, size_t bytes) {
  auto v = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes) std::memcpy(v->data(), data, bytes);
  return v;
}

// Drops the resident pages of [begin, end) of a read-only file mapping (whole pages, rounded
// down at both ends): they fault back in from the file if read again.
void release_mapped(const uint8_t* begin, const uint8_t* end) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(end) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

}  // namespace

// Uninitialised bytes on 64-byte boundaries; a large buffer on 2 MiB boundaries with huge pages
// asked for. Small ones stay on 4 KiB pages: rounding each to 2 MiB would cost more than they hold.
std::shared_ptr<void> Weight::block(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20, kHugeFrom = size_t(32) << 20;
  const size_t align = bytes >= kHugeFrom ? kHuge : 64;
  const size_t rounded = std::max(align, (bytes + align - 1) / align * align);
  void* p = std::aligned_alloc(align, rounded);
  KAMERA_ASSERT(p != nullptr);
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  return std::shared_ptr<void>(p, std::free);
}

size_t Weight::repacked_bytes(const Weight& src, WeightLayout layout) {
  return layout == WeightLayout::Rows ? src.bytes() : quant::x16_bytes(src.view_);
}

Weight Weight::repacked(const Weight& src, WeightLayout layout) {
  auto bytes = block(repacked_bytes(src, layout));
  return repacked_into(src, layout, bytes, static_cast<uint8_t*>(bytes.get()));
}

Weight Weight::repacked_into(const Weight& src, WeightLayout layout,
                             const std::shared_ptr<void>& block, uint8_t* dst) {
  KAMERA_ASSERT(layout == WeightLayout::Rows ||
                (quant::x16_fits(src.view()) && layout == quant::x16_layout_of(src.type())));
  const WeightView& v = src.view_;
  // Rows layout: a plain copy in the same order, in groups of 16 rows like the others.
  const int64_t groups = (v.rows + quant::kRepackRows - 1) / quant::kRepackRows;
  const size_t group_bytes = size_t(quant::kRepackRows) * v.row_bytes;
  const int64_t step = std::max<int64_t>(1, int64_t((size_t(4) << 20) / group_bytes));
  for (int64_t g0 = 0; g0 < groups; g0 += step) {
    const int64_t g1 = std::min(groups, g0 + step);
    const size_t end = std::min(src.bytes(), size_t(g1) * group_bytes);
    if (layout == WeightLayout::Rows) {
      std::memcpy(dst + size_t(g0) * group_bytes, v.data + size_t(g0) * group_bytes,
                  end - size_t(g0) * group_bytes);
    } else {
      quant::repack_x16(v, g0, g1, dst);
    }
    if (!src.owned()) release_mapped(v.data, v.data + end);
  }
  Weight w;
  w.view_ = v;
  w.view_.data = dst;
  w.view_.layout = layout;
  w.storage_ = std::shared_ptr<const void>(block, dst);  // shares the block's ownership
  return w;
}

Weight Weight::from_f32(std::vector<float> values, int64_t rows, int64_t cols) {
  KAMERA_ASSERT(rows >= 0 && cols >= 0 && values.size() == size_t(rows * cols));
  Weight w;
  if (values.empty()) return w;
  auto v = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
  std::memcpy(v->data(), values.data(), v->size());
  w.view_ = WeightView{GgmlType::F32, v->data(), rows, cols, size_t(cols) * sizeof(float)};
  w.storage_ = std::move(v);
  return w;
}

Result<Weight> Weight::borrow(GgmlType type, const void* data, int64_t rows, int64_t cols) {
  KAMERA_ASSIGN_OR_RETURN(WeightView v, make_weight_view(type, data, rows, cols));
  if (reinterpret_cast<uintptr_t>(data) % 4 != 0) return copy_of(v);
  Weight w;
  w.view_ = v;
  return w;
}

Weight Weight::copy_of(const WeightView& v) {
  Weight w;
  auto bytes = own_bytes(v.data, size_t(v.rows) * v.row_bytes);
  w.view_ = v;
  w.view_.data = bytes->data();
  w.storage_ = std::move(bytes);
  return w;
}

const float* Weight::f32() const {
  KAMERA_ASSERT(is_f32() || empty());
  return reinterpret_cast<const float*>(view_.data);
}

void Weight::rows_f32(int64_t first, int64_t count, float* out) const {
  KAMERA_ASSERT(first >= 0 && count >= 0 && first + count <= rows());
  if (is_f32()) {
    std::memcpy(out, f32() + first * cols(), sizeof(float) * size_t(count * cols()));
    return;
  }
  dequantize_rows(view_, first, count, out);
}

std::vector<float> Weight::to_f32() const {
  std::vector<float> out(size_t(rows() * cols()));
  if (!empty()) rows_f32(0, rows(), out.data());
  return out;
}

bool Weight::same_as(const Weight& o) const {
  return type() == o.type() && layout() == o.layout() && rows() == o.rows() && cols() == o.cols() &&
         (bytes() == 0 || std::memcmp(raw(), o.raw(), bytes()) == 0);
}

void linear_many(std::initializer_list<LinearOut> outs, const float* x, int n, ThreadPool& pool) {
  std::vector<quant::Product> ps;
  for (const LinearOut& o : outs) {
    if (o.w->is_f32()) {
      linear(*o.w, x, n, o.bias, o.y, pool);
    } else {
      ps.push_back({&o.w->view(), o.bias, o.y});
    }
  }
  if (!ps.empty()) matmul_many(ps, x, n, pool);
}

void linear(const Weight& w, const float* x, int n, const float* bias, float* y, ThreadPool& pool) {
  KAMERA_ASSERT(!w.empty());
  if (w.is_f32()) {
    matmul_wt(x, w.f32(), bias, y, n, int(w.cols()), int(w.rows()));
  } else {
    matmul(w.view(), x, n, bias, y, pool);
  }
}

}  // namespace kamera
