// Correlation of paired samples (an estimate against a measured KL): Pearson on the values,
// Spearman on their ranks (ties get their mean rank).
#pragma once

#include <span>
#include <vector>

namespace kamera {

// NAN when fewer than 2 pairs, the spans differ in length, or either side is constant.
double pearson(std::span<const double> x, std::span<const double> y);
double spearman(std::span<const double> x, std::span<const double> y);
// 1-based ranks, ties averaged.
std::vector<double> ranks(std::span<const double> x);

}  // namespace kamera
