#include "model/weight.h"

#include <cstring>

#include "core/thread_pool.h"
#include "ops/gemm.h"

namespace kamera {

namespace {

std::shared_ptr<const std::vector<uint8_t>> own_bytes(const void* data, size_t bytes) {
  auto v = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes) std::memcpy(v->data(), data, bytes);
  return v;
}

}  // namespace

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
  w.storage_ = own_bytes(v.data, size_t(v.rows) * v.row_bytes);
  w.view_ = v;
  w.view_.data = w.storage_->data();
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
  return type() == o.type() && rows() == o.rows() && cols() == o.cols() &&
         (bytes() == 0 || std::memcmp(raw(), o.raw(), bytes()) == 0);
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
