// The low-rank conditioning patch: per layer and channel, the deficit
//   delta = KV(B | A) - KV(B | anchor only)     (both position-free, n_B x width)
// truncated to its top-m singular triplets, stored as U_m S_m (n_B x m) and V_m^T (m x width).
// Serving adds U_m S_m V_m^T back onto the canonical: one GEMM per layer and channel.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/pool.h"
#include "reuse/chunk_kv.h"

namespace kamera {

inline constexpr int kFullRank = -1;

struct LayerSet {
  enum class Kind { All, DeepHalf, List } kind = Kind::All;
  std::vector<int> list;  // for Kind::List

  std::vector<int> resolve(int n_layers) const;  // sorted, unique, in range
  std::string describe() const;                  // "all", "deep-half", "0,3,4"
  static Result<LayerSet> parse(const std::string& s);
};

enum class SvdMethod { Auto, Gesdd, Randomized };

struct PatchOptions {
  int rank = 32;  // kFullRank: min(n_tokens, width) of each factored matrix
  LayerSet layers;
  bool per_head = false;     // factor each KV head's slice of a channel separately
  DType dtype = DType::F32;  // storage of the factors (f32 or bf16)
  SvdMethod method = SvdMethod::Auto;
  int head_dim = 0;       // needed when per_head
  bool cap_rank = false;  // clamp rank to min(n_tokens, width) of each block instead of failing
};

// One factored block: columns [col_begin, col_begin + cols) of a (layer, channel).
struct PatchFactor {
  int layer = 0, channel = 0, col_begin = 0, cols = 0, rows = 0, rank = 0;
  ChannelMatrix us;  // rows x rank: U_m S_m
  ChannelMatrix vt;  // rank x cols: V_m^T

  // The factor of columns [col_begin, col_begin + cols) of (layer, channel) from row-major f32
  // us (rows x rank) and vt (rank x cols), stored as `dtype`.
  static PatchFactor from_f32(int layer, int channel, int col_begin, int rows, int cols, int rank,
                              const float* us, const float* vt, DType dtype);
};

struct Patch {
  int n_tokens = 0;
  PatchOptions options;
  std::vector<PatchFactor> factors;
  size_t bytes() const;
};

// What the factorization saw, per (layer, channel): the paper's Fig. 3 quantities.
struct DeltaStats {
  int layer = 0, channel = 0;
  double delta_norm = 0;               // ||delta||_F
  double conditioned_norm = 0;         // ||KV(B|A)||_F
  std::vector<float> singular_values;  // all of them, descending (whole channel width)
  int rank90 = 0;                      // smallest rank holding 90% of ||delta||_F^2
};

// Factors target - base (the deficit; base is usually the canonical). Fails on mismatched shapes
// or a rank < 1 (other than full).
Result<Patch> form_patch(const ChunkKV& target, const ChunkKV& base, const PatchOptions& opts,
                         std::vector<DeltaStats>* stats = nullptr);
// Factors mean(targets) - base: the orbit patch when targets are the chunk's KV conditioned on
// every ordering of one antecedent set.
Result<Patch> form_patch_mean(std::span<const ChunkKV* const> targets, const ChunkKV& base,
                              const PatchOptions& opts, std::vector<DeltaStats>* stats = nullptr);

// Writes canonical + U_m S_m V_m^T into tokens [begin, begin + kv.n_tokens) of a pool sequence
// (rows must be writable) in one pass per (layer, channel): the low-rank product goes through one
// GEMM of fixed shape into `scratch`, so the bytes written do not depend on where the pages are.
// patch may be null (blind: the canonical alone).
void write_patched_rows(const ChunkKV& canonical, const Patch* patch, KvPool& pool, SeqId seq,
                        int begin, std::vector<float>& scratch);
// Adds the patch onto an f32 ChunkKV (analysis and tests).
void apply_patch(const Patch& patch, ChunkKV& kv);

// Truncated SVD of a rows x cols row-major matrix: us (rows x m) = U_m S_m, vt (m x cols).
// Returns all singular values (min(rows, cols), descending) in `sigma` when not null.
Status truncated_svd(const float* a, int rows, int cols, int m, SvdMethod method,
                     std::vector<float>& us, std::vector<float>& vt,
                     std::vector<float>* sigma = nullptr);

}  // namespace kamera
