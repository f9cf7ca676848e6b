// The forward pass: token ids or embedding rows in, KV written into the paged pool, logits out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kv/pool.h"
#include "model/model.h"
#include "ops/attention.h"
#include "ops/attention_mla.h"
#include "ops/rope.h"

namespace kamera {

struct ForwardInput {
  std::span<const int32_t> tokens;    // token ids, or empty when embeddings are given
  const float* embeddings = nullptr;  // n x dim rows (e.g. a vision encoder's output)
  int n = 0;                          // number of new tokens
  std::span<const Pos> positions;     // n positions, any values (need not be contiguous)

  static ForwardInput from_tokens(std::span<const int32_t> ids, std::span<const Pos> pos) {
    return {ids, nullptr, int(ids.size()), pos};
  }
};

enum class LogitsMode { None, Last, All };

struct ForwardOptions {
  LogitsMode logits = LogitsMode::Last;
  // Extra masking: query indices are within this input, key indices within the sequence.
  const AttentionMask* mask = nullptr;
  int max_batch = 512;  // tokens per micro-batch (bounds scratch memory)
  // Diagnostics for the evaluation suite:
  int capture_layer = -1;                         // >= 0: the hidden rows entering this layer are
  std::vector<float>* captured_hidden = nullptr;  //   appended here (n x dim)
  std::vector<float>* key_mass = nullptr;  // += attention weight per sequence token, summed over
                                           //   layers, heads and queries (resized as needed)
};

// In-context recompute of chosen tokens already in a sequence (the token-selection baselines of
// the evaluation suite: CacheBlend, EPIC, VLCache, partial re-prefill): from layer `from_layer`
// up, the chosen tokens' K/V rows are recomputed from their hidden states and overwrite the pool
// rows, and their queries attend to the sequence as it stands (reused rows of the others,
// recomputed rows of the chosen).
struct RecomputePlan {
  std::vector<int> tokens;  // sequence indices, ascending
  int from_layer = 0;
  const float* hidden = nullptr;  // rows entering from_layer (tokens x dim), or null: embeddings
  std::span<const int32_t> ids;   // token ids when hidden is null (from_layer 0)
  // CacheBlend's gradual filtering: at select_layer keep only the `keep` tokens whose recomputed
  // V deviates most (mean squared) from the reused one; the others stop there.
  int select_layer = -1;
  int keep = 0;
};

struct RecomputeStats {
  int64_t token_layers = 0;  // (token, layer) pairs recomputed: the FLOP count is proportional
  int64_t rows_written = 0;  // (token, layer) K/V rows overwritten in the pool (each: all channels)
  double flops = 0;          // forward FLOPs spent (GEMMs and attention; 2 per multiply-add)
};

// Runs one model over sequences of a KV pool whose layout is model.kv_layout(). Not thread-safe;
// one Engine per serving thread.
class Engine {
 public:
  Engine(const Model& model, int n_threads);

  const Model& model() const { return model_; }
  const RopeCache& rope() const { return rope_; }
  ThreadPool& threads() { return pool_; }

  // Appends the input tokens to `seq` (their KV written to the pool), attends each to the
  // sequence before it, and returns logits: none, the last row, or n rows of n_vocab.
  // Fails before touching the pool on bad input or when the pool is full.
  Result<std::vector<float>> forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                     const ForwardOptions& opt = {});

  // One decode step of several sequences in one forward (continuous batching): appends
  // rows[i].token at rows[i].pos to rows[i].seq and returns rows.size() x n_vocab logits. The
  // weight products run once over all rows; attention runs per sequence. On failure (a full pool)
  // no sequence is changed.
  struct DecodeRow {
    SeqId seq;
    int32_t token;
    Pos pos;
  };
  Result<std::vector<float>> decode(KvPool& kv, std::span<const DecodeRow> rows);

  // See RecomputePlan. Every attention family (MHA/GQA, MLA).
  Status recompute(KvPool& kv, SeqId seq, const RecomputePlan& plan,
                   RecomputeStats* stats = nullptr);

 private:
  // g.n consecutive new tokens of one sequence (tokens g.first..), at batch rows g.row0..
  struct RowGroup {
    SeqId seq;
    int first, n, row0;
    const AttentionMask* mask;
    std::span<const int> tokens = {};  // when set: row t is token tokens[t] (not first + t)
    int token(int t) const { return tokens.empty() ? first + t : tokens[t]; }
  };
  Status check_layout(const KvPool& kv) const;
  void load_rows(const ForwardInput& in, int off, int n, float* x) const;
  Status run_batch(KvPool& kv, std::span<const RowGroup> groups, LogitsMode logits,
                   std::vector<float>& out, const ForwardOptions* diag = nullptr);
  void grow_scratch(int n);
  void qkv_projections(const LayerWeights& L, int n);
  void output_and_ffn(const LayerWeights& L, float* x, int n);
  void mla_attention_block(KvPool& kv, int layer, int n, std::span<const RowGroup> groups,
                           const float* cos, const float* sin, float* key_mass = nullptr);

  const Model& model_;
  ThreadPool pool_;
  RopeCache rope_;
  AttentionWorkspace attn_ws_;
  MlaWorkspace mla_ws_;
  // Scratch (rows x width), grown on demand.
  std::vector<float> x_, xb_, q_, k_, v_, att_, gate_, up_, tmp_;
};

}  // namespace kamera
