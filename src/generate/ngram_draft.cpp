#include "generate/ngram_draft.h"

#include <algorithm>

namespace kamera {

NgramDrafter::NgramDrafter(std::span<const int32_t> context, NgramParams p)
    : p_(p), last_(size_t(std::max(1, p.n_max))) {
  p_.n_max = std::max(1, p_.n_max);
  p_.n_min = std::clamp(p_.n_min, 1, p_.n_max);
  p_.k_max = std::max(1, p_.k_max);
  k_ = std::clamp(p_.k_start, 1, p_.k_max);
  ctx_.reserve(context.size() + 256);
  for (int32_t t : context) push(t);
  prompt_ = ctx_.size();
}

// Tokens are 32-bit: two fit a key exactly; three are mixed (a match is then checked).
uint64_t NgramDrafter::key(size_t end, int n) const {
  uint64_t h = 0;
  for (int i = n; i > 0; --i) {
    const uint64_t t = uint32_t(ctx_[end - size_t(i)]);
    h = n <= 2 ? (h << 32) | t : (h ^ t) * 0x9E3779B97F4A7C15ull + (h >> 29);
  }
  return h;
}

bool NgramDrafter::same(size_t a, size_t b, int n) const {
  for (int i = 1; i <= n; ++i)
    if (ctx_[a - size_t(i)] != ctx_[b - size_t(i)]) return false;
  return true;
}

// The n-grams that end where the new token starts now have a token after them.
void NgramDrafter::push(int32_t token) {
  const size_t end = ctx_.size();
  for (int n = 1; n <= p_.n_max && size_t(n) <= end; ++n) {
    bool valid = true;
    for (int i = 1; i <= n && valid; ++i) valid = ctx_[end - size_t(i)] >= 0;
    if (valid) last_[size_t(n - 1)][key(end, n)] = uint32_t(end);
  }
  ctx_.push_back(token);
}

void NgramDrafter::sync(std::span<const int32_t> output) {
  for (size_t i = ctx_.size() - prompt_; i < output.size(); ++i) push(output[i]);
}

std::vector<int32_t> NgramDrafter::draft(int k) {
  std::vector<int32_t> out;
  if (wait_ > 0) {
    --wait_;
    return out;
  }
  const size_t end = ctx_.size();
  for (int n = p_.n_max; n >= p_.n_min && k > 0; --n) {
    if (size_t(n) > end) continue;
    const auto& map = last_[size_t(n - 1)];
    const auto it = map.find(key(end, n));
    if (it == map.end() || !same(it->second, end, n)) continue;
    for (size_t i = it->second; i < end && int(out.size()) < k && ctx_[i] >= 0; ++i)
      out.push_back(ctx_[i]);
    if (!out.empty()) break;
  }
  return out;
}

void NgramDrafter::feedback(int drafted, int accepted) {
  if (drafted <= 0) return;
  k_ = accepted >= drafted ? std::min(p_.k_max, 2 * k_) : std::clamp(accepted + 1, 1, p_.k_max);
  if (accepted > 0) {
    backoff_ = 0;
    return;
  }
  wait_ = backoff_;
  backoff_ = std::clamp(2 * backoff_, 1, std::max(1, p_.backoff_max));
}

}  // namespace kamera
