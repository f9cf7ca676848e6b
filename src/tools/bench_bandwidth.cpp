// The read-bandwidth probe of bench_bandwidth.h: wide independent loads, several sums in flight.
#include "tools/bench_bandwidth.h"

#include <cstdint>
#include <cstring>

#include "core/clock.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace kamera::cli {

namespace {

constexpr size_t kPieceBytes = size_t(1) << 20;

// 16-byte lanes (SSE2 on any x86-64 build), four sums in flight so the loads overlap.
typedef uint64_t Lane __attribute__((vector_size(16)));

uint64_t read_sum(const unsigned char* p, size_t bytes) {
  Lane s0{}, s1{}, s2{}, s3{};
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    Lane a, b, c, d;
    std::memcpy(&a, p + i, 16);
    std::memcpy(&b, p + i + 16, 16);
    std::memcpy(&c, p + i + 32, 16);
    std::memcpy(&d, p + i + 48, 16);
    s0 += a;
    s1 += b;
    s2 += c;
    s3 += d;
  }
  uint64_t tail = 0;
  for (; i < bytes; ++i) tail += p[i];
  const Lane s = s0 + s1 + s2 + s3;
  return s[0] + s[1] + tail;
}

}  // namespace

WeightStreamProbe::WeightStreamProbe(const Model& m) {
  auto add = [&](const Weight& w) {
    if (w.empty()) return;
    for (size_t o = 0; o < w.bytes(); o += kPieceBytes)
      pieces_.push_back({w.raw() + o, std::min(kPieceBytes, w.bytes() - o)});
    bytes_ += double(w.bytes());
  };
  for (const LayerWeights& L : m.layers)
    for (const Weight* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) add(*w);
  add(m.output_weight());
}

double WeightStreamProbe::read_once(ThreadPool& pool) const {
  std::vector<uint64_t> sums(size_t(pool.size()), 0);
  const double t0 = now_ms();
  pool.parallel_pieces(int64_t(pieces_.size()), [&](int64_t b, int64_t e, int piece) {
    uint64_t s = 0;
    for (int64_t i = b; i < e; ++i)
      s += read_sum(pieces_[size_t(i)].data, pieces_[size_t(i)].bytes);
    sums[size_t(piece)] = s;
  });
  const double ms = now_ms() - t0;
  // The sums are used, so the loads cannot be dropped.
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return ms;
}

}  // namespace kamera::cli
