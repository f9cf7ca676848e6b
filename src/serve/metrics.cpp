#include "serve/metrics.h"

#include <fmt/format.h>

namespace kamera {

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_,
                     name, n_);
  return out;
}

}  // namespace kamera
