// Output-aware patches (docs/PATCHES.md): the rank-m correction that minimises the error of each
// layer's attention output instead of the KV entries' Frobenius error.
//
//   K channel:  min ||(delta - X) M^{1/2}||_F     M: second moment of the queries reading the
//                                                 keys, in the keys' de-rotated frame
//                                                 (block-diagonal over KV heads)
//   V channel:  min ||D^{1/2} (delta - X) G^{1/2}||_F   D: attention mass of each row,
//                                                       G: Gram of the (group-summed) W_o
//
// Both are one weighted low-rank problem: the SVD of W_r^{1/2} delta W_c^{1/2} truncated to rank
// m, mapped back with the inverse weights. The factors are stored exactly as a rank-m SVD patch
// (U_m S_m: n x m, V_m^T: m x width), so serving and bytes do not change.
#pragma once

#include <span>
#include <vector>

#include "reuse/patch.h"

namespace kamera {

enum class PatchKind { Svd, Output };

// Weights of one (layer, channel) deficit (n x width). Empty: identity.
struct ChannelWeights {
  std::vector<double> rows;  // n row weights (>= 0)
  std::vector<double> gram;  // width x width symmetric PSD column weight
};

// Per (layer, channel), index layer * n_channels + channel (as ChunkKV::blocks).
struct OutputWeights {
  int n_layers = 0, n_channels = 0;
  std::vector<ChannelWeights> blocks;
  double lambda = 1e-3;  // regulariser relative to the mean weight (rows) / mean diagonal (gram)
  const ChannelWeights& at(int layer, int ch) const {
    return blocks[size_t(layer) * n_channels + ch];
  }
};

// The rank-m X minimising ||diag(r)^{1/2} (A - X) C^{1/2}||_F, where r = row_w + lambda mean(row_w)
// and C = gram + lambda tr(gram)/cols I (identity when empty): us (rows x m) and vt (m x cols)
// with X = us vt. Computed in double. Fails on a rank outside [1, min(rows, cols)] or bad sizes.
Status weighted_truncated_svd(const float* a, int rows, int cols, int m,
                              std::span<const double> row_w, std::span<const double> gram,
                              double lambda, std::vector<float>& us, std::vector<float>& vt);

// The weighted error ||diag(r)^{1/2} E C^{1/2}||_F^2 of an error matrix E (rows x cols), with the
// same regularised weights (tests, diagnostics).
double weighted_error(const float* e, int rows, int cols, std::span<const double> row_w,
                      std::span<const double> gram, double lambda);

// The output-aware patch of target - base: as form_patch (same options, ranks, per-head slices,
// factor dtype), each block factored under its weights (a per-head slice uses its diagonal block
// of the column Gram).
Result<Patch> form_output_patch(const ChunkKV& target, const ChunkKV& base,
                                const PatchOptions& opts, const OutputWeights& weights);

}  // namespace kamera
