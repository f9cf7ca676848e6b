// The read-bandwidth floor of decode: every weight matrix a one-token forward multiplies, read
// once by the pool's threads as fast as plain loads go. Its time is the least a token can cost
// when decode is bound by streaming the weights; `kamera bench decode` prints it beside every
// decode figure.
#pragma once

#include <cstddef>
#include <vector>

namespace kamera {
class ThreadPool;
struct Model;
}  // namespace kamera

namespace kamera::cli {

class WeightStreamProbe {
 public:
  // The matrices of every layer (q, k, v, o, gate, up, down) and the output head, as held
  // (mapped file pages or owned copies); MoE experts and MLA projections are not included.
  explicit WeightStreamProbe(const Model& m);

  double bytes_per_token() const { return bytes_; }
  // Reads every piece once, split across the pool's threads; returns the milliseconds taken.
  double read_once(ThreadPool& pool) const;

 private:
  struct Piece {
    const unsigned char* data;
    size_t bytes;
  };
  std::vector<Piece> pieces_;  // at most kPieceBytes each
  double bytes_ = 0;
};

// bytes / ms as GB/s (1e9 bytes per second).
inline double gb_per_s(double bytes, double ms) {
  return ms > 0 ? bytes / (ms * 1e6) : 0.0;
}

}  // namespace kamera::cli
