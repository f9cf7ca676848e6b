// Fidelity metrics of the measurement protocol (docs/METHOD.md): next-token KL to the
// re-prefill reference, eta, flip-recover, argmax agreement.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kamera {

// KL(p || q) in nats, p = softmax(ref_logits), q = softmax(arm_logits), evaluated in double.
double kl_from_logits(std::span<const float> ref_logits, std::span<const float> arm_logits);

// Mean KL over rows (query positions) of two row-major n_rows x n_vocab logit blocks.
double mean_kl_rows(std::span<const float> ref, std::span<const float> arm, int n_vocab);

// eta = 1 - mean(kl_arm) / mean(kl_blind) (ratio of means); nullopt when blind's mean is 0.
std::optional<double> eta(std::span<const double> kl_arm, std::span<const double> kl_blind);
// Per-item median of 1 - kl_arm / kl_blind over items where kl_blind > 0.
std::optional<double> eta_median(std::span<const double> kl_arm, std::span<const double> kl_blind);

// Flip-recover: among items whose blind argmax differs from the reference's, the share whose arm
// argmax equals the reference's. nullopt when there are no flips.
std::optional<double> flip_recover(std::span<const int32_t> ref, std::span<const int32_t> blind,
                                   std::span<const int32_t> arm);
double argmax_agree(std::span<const int32_t> ref, std::span<const int32_t> arm);

double mean(std::span<const double> v);
double median(std::vector<double> v);

}  // namespace kamera
