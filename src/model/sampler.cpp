#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/kernels.h"

namespace kamera {

namespace {

// Buckets of the nucleus histogram: 1/16 nat of log-probability each, below the best token;
// the last one holds everything more than 24 nats below it.
constexpr int kPerNat = 16;
constexpr int kBuckets = 24 * kPerNat + 1;

// Orders tokens as a full sort would: higher logit first, the lower id on ties.
struct Before {
  const float* l;
  bool operator()(int32_t a, int32_t b) const { return l[a] > l[b] || (l[a] == l[b] && a < b); }
};

// Moves to the front of ids[lo, hi) the shortest prefix, in `before` order, whose weight reaches
// `need`; returns its end. A weighted quickselect: linear on average, nothing sorted but the
// last few elements.
size_t weighted_prefix(std::vector<int32_t>& ids, size_t lo, size_t hi, double need, const float* w,
                       Before before) {
  while (hi - lo > 32) {
    // median of three as pivot
    int32_t a = ids[lo], b = ids[lo + (hi - lo) / 2], c = ids[hi - 1];
    if (before(b, a)) std::swap(a, b);
    if (before(c, b)) std::swap(b, c);
    if (before(b, a)) std::swap(a, b);
    const int32_t pivot = b;
    auto first = ids.begin() + std::ptrdiff_t(lo), last = ids.begin() + std::ptrdiff_t(hi);
    auto mid = std::partition(first, last, [&](int32_t t) { return before(t, pivot); });
    double left = 0;
    for (auto it = first; it != mid; ++it) left += w[*it];
    if (left >= need) {
      hi = size_t(mid - ids.begin());
      continue;
    }
    need -= left;
    lo = size_t(mid - ids.begin());
    std::iter_swap(ids.begin() + std::ptrdiff_t(lo), std::find(mid, last, pivot));
    if (double(w[pivot]) >= need) return lo + 1;
    need -= w[pivot];
    ++lo;
  }
  std::sort(ids.begin() + std::ptrdiff_t(lo), ids.begin() + std::ptrdiff_t(hi), before);
  for (size_t i = lo; i < hi; ++i) {
    if (double(w[ids[i]]) >= need) return i + 1;
    need -= w[ids[i]];
  }
  return hi;
}

}  // namespace

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// Keeps the k most likely tokens: the k-th largest logit by a linear selection on the values,
// then every token above it and, of those equal to it, the lowest ids.
void Sampler::keep_top_k(std::span<const float> logits, int k) {
  vals_.assign(logits.begin(), logits.end());
  std::nth_element(vals_.begin(), vals_.begin() + (k - 1), vals_.end(), std::greater<float>());
  const float kth = vals_[size_t(k - 1)];
  ids_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > kth) ids_.push_back(int32_t(i));
  for (size_t i = 0; i < logits.size() && ids_.size() < size_t(k); ++i)
    if (logits[i] == kth) ids_.push_back(int32_t(i));
  all_ = false;
}

// Keeps the nucleus of the candidates: the shortest most-likely prefix whose weight reaches
// top_p of theirs. One pass sums the weight by bucket of log-probability; the tokens of the
// buckets before the one the prefix ends in are all in it, and only that bucket is ordered.
void Sampler::keep_nucleus(std::span<const float> logits) {
  double mass[kBuckets] = {};
  const float scale = inv_t_ * float(kPerNat);
  auto bucket = [&](int32_t t) {
    if (!(w_[size_t(t)] > 0.0f)) return -1;  // masked or underflowed: never a candidate
    const float d = (mx_ - logits[size_t(t)]) * scale;
    return d >= float(kBuckets - 1) ? kBuckets - 1 : int(d);
  };
  const size_t n = all_ ? logits.size() : ids_.size();
  auto id = [&](size_t i) { return all_ ? int32_t(i) : ids_[i]; };
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = id(i);
    const int b = bucket(t);
    if (b >= 0) mass[b] += w_[size_t(t)], total += w_[size_t(t)];
  }
  const double target = double(p_.top_p) * total;
  int edge = 0;
  double before = 0;
  while (edge < kBuckets - 1 && before + mass[edge] < target) before += mass[edge++];
  keep_.clear();
  edge_.clear();
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = id(i);
    const int b = bucket(t);
    if (b >= 0 && b < edge) keep_.push_back(t);
    if (b == edge) edge_.push_back(t);
  }
  const size_t cut =
      weighted_prefix(edge_, 0, edge_.size(), target - before, w_.data(), Before{logits.data()});
  keep_.insert(keep_.end(), edge_.begin(), edge_.begin() + std::ptrdiff_t(cut));
  std::swap(ids_, keep_);
  all_ = false;
}

// Keeps the tokens at least min_p times as likely as the best (whose weight is 1).
void Sampler::keep_min_p() {
  if (all_) {
    ids_.clear();
    for (size_t i = 0; i < w_.size(); ++i)
      if (w_[i] >= p_.min_p) ids_.push_back(int32_t(i));
    all_ = false;
    return;
  }
  std::erase_if(ids_, [&](int32_t t) { return w_[size_t(t)] < p_.min_p; });
}

double Sampler::filter(std::span<const float> logits) {
  const size_t n = logits.size();
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = v > mx ? v : mx;
  if (!(mx > -std::numeric_limits<float>::infinity())) return 0;  // every token masked
  mx_ = mx;
  inv_t_ = 1.0f / p_.temperature;
  w_.resize(n);
  for (size_t i = 0; i < n; ++i) w_[i] = (logits[i] - mx) * inv_t_;
  exp_inplace(w_.data(), int(n));
  all_ = true;
  if (p_.top_k > 0 && size_t(p_.top_k) < n) keep_top_k(logits, p_.top_k);
  if (p_.top_p < 1.0f) keep_nucleus(logits);
  if (p_.min_p > 0.0f) keep_min_p();
  double s = 0;
  if (all_) {
    for (float w : w_) s += w;
  } else {
    for (int32_t t : ids_) s += w_[size_t(t)];
  }
  return s;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || logits.size() < 2) return argmax(logits);
  const double sum = filter(logits);
  if (!(sum > 0)) return argmax(logits);  // every token masked
  const bool all = all_;
  const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * sum;
  double acc = 0;
  int32_t last = -1;
  const size_t n = all ? w_.size() : ids_.size();
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = all ? int32_t(i) : ids_[i];
    if (!(w_[t] > 0.0f)) continue;
    acc += w_[t];
    last = t;
    if (r < acc) return t;
  }
  return last;
}

int32_t Sampler::sample_draft(std::span<const float> logits, int32_t draft) {
  if (p_.temperature <= 0.0f || logits.size() < 2) return argmax(logits);
  const double sum = filter(logits);
  if (!(sum > 0)) return argmax(logits);  // every token masked
  const bool all = all_;
  const size_t n = all ? w_.size() : ids_.size();
  auto id = [&](size_t i) { return all ? int32_t(i) : ids_[i]; };
  double wd = 0;  // the draft's weight, when it is a candidate
  if (draft >= 0 && size_t(draft) < w_.size() && w_[size_t(draft)] > 0.0f)
    for (size_t i = 0; i < n && wd == 0; ++i)
      if (id(i) == draft) wd = w_[size_t(draft)];
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (wd > 0 && u(rng_) * sum < wd) return draft;
  const double rest = sum - wd;
  if (!(rest > 0)) return draft;  // only the draft was left (its probability was 1)
  const double r = u(rng_) * rest;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = id(i);
    if (t == draft || !(w_[size_t(t)] > 0.0f)) continue;
    acc += w_[size_t(t)];
    last = t;
    if (r < acc) return t;
  }
  return last;
}

std::vector<Candidate> Sampler::candidates(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || logits.size() < 2) return {{argmax(logits), 1.0}};
  const double sum = filter(logits);
  if (!(sum > 0)) return {{argmax(logits), 1.0}};
  const bool all = all_;
  std::vector<Candidate> out;
  const size_t n = all ? w_.size() : ids_.size();
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = all ? int32_t(i) : ids_[i];
    if (w_[t] > 0.0f) out.push_back({t, w_[t] / sum});
  }
  return out;
}

}  // namespace kamera
