// The position-free chunk cache: forms canonicals and patches through the engine, keeps them in
// the store, and assembles sequences from cached chunks at arbitrary positions with zero forwards.
//
// - canonical: C_B = KV(B | anchor), one forward of [anchor · B], rope channel pre-rotation;
// - deficit: D = KV(B | anchor · A) - C_B, one conditioned forward of [anchor · A · B];
// - patch: the top-m SVD of D per layer and channel;
// - serve: rows(B) = C_B + U_m S_m V_m^T written into pool pages, positions set as metadata.
//
// A sequence is [anchor][chunk 0][chunk 1]...; chunk i starts where chunk i-1's extent ends, and
// its antecedents are chunks 0..i-1. Chunk 0 (no antecedent) is served from its canonical exactly:
// that is a prefix-cache hit.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "model/forward.h"
#include "store/store.h"

namespace kamera {

enum class ServePolicy { Blind, Patch, Reprefill };

// The engine input for a chunk's tokens or embedding rows at the given absolute positions (the
// content and the positions must outlive the input).
ForwardInput forward_input(const ChunkContent& c, std::span<const Pos> positions);
// The rows of chunk c that see each other in the decoder of cfg: every row of an embedding chunk
// (a picture) under a Gemma 3 decoder, as the model's mask and llama.cpp's mtmd
// (mtmd_decode_use_non_causal: the gemma3 projectors) decode them; none for every other family
// (qwen2vl, qwen3vl, kimi, idefics3, mini-VL: causal) and for token chunks.
NonCausalSpan picture_rows(const ModelConfig& cfg, const ChunkContent& c);

struct ServeOptions {
  ServePolicy policy = ServePolicy::Patch;
  PatchOptions patch;
  bool form_on_miss = true;            // Patch: form a missing patch (one forward) or serve blind
  DType canonical_dtype = DType::F32;  // storage dtype of canonicals formed on a miss
};

enum class SegmentSource { Canonical, PatchHit, PatchFormed, Blind, Reprefilled };

struct SegmentReport {
  ChunkId id;
  int first_token = 0;  // index in the sequence
  int n_tokens = 0;
  int32_t position = 0;  // position of the chunk's start
  SegmentSource source = SegmentSource::Canonical;
};

struct ServeReport {
  std::vector<SegmentReport> segments;
  int forwards = 0;             // forward passes run (canonical or patch formation, reprefill)
  int64_t tokens_computed = 0;  // tokens that went through a forward
  int64_t tokens_reused = 0;    // chunk tokens written from the store
  int next_position = 0;        // where a query after the chunks starts
};

// Paces the forwards of a cache. A forward is first offered to run_in_step, which may run it
// (some or all of its tokens) inside the engine's steps, in pieces batched with other work (the
// server's decode steps: chunked prefill). What it leaves runs here in pieces of at most
// allowance() tokens, and spent(n) is told after each (it may run other work before it returns).
// The result is the unpaced forward's (Engine::forward_step).
class ForwardPacer {
 public:
  virtual ~ForwardPacer() = default;
  virtual int allowance() = 0;  // tokens the next piece may run, at least 1
  virtual void spent(int tokens) = 0;
  // True when some tokens of cur ran elsewhere (cur advanced); false: run them here.
  virtual bool run_in_step(ForwardCursor& cur) {
    (void)cur;
    return false;
  }
};

class ChunkCache {
 public:
  // anchor: the fixed prefix every canonical is formed behind (BOS by default).
  ChunkCache(const Model& model, Engine& engine, KvPool& pool, ChunkStore& store,
             std::vector<int32_t> anchor);

  const std::vector<int32_t>& anchor() const { return anchor_; }
  int32_t anchor_extent() const { return int32_t(anchor_.size()); }
  int context_length() const { return model_.cfg.ctx_len; }
  const Model& model() const { return model_; }
  KvPool& pool() { return pool_; }
  Engine& engine() { return engine_; }
  ChunkId id_of(const ChunkContent& c) const;
  ChunkStore& store() { return store_; }

  // The canonical of a chunk, formed with one forward of [anchor · chunk] on a miss.
  // formed (optional) tells whether this call ran the forward (a miss in every store tier).
  Result<std::shared_ptr<const CanonicalEntry>> canonical(const ChunkContent& c,
                                                          DType dtype = DType::F32,
                                                          bool* formed = nullptr);

  // Conditioned KV of each chunk (position-free rows) from one forward over [anchor · chunks].
  Result<std::vector<ChunkKV>> conditioned(std::span<const ChunkContent> chunks);

  // The patch of `chunk` behind the ordered `antecedents`; formed on a miss when form_on_miss
  // (returns nullptr on a miss otherwise). stats (optional) receives the deficit's anatomy when a
  // patch is formed.
  Result<std::shared_ptr<const PatchEntry>> patch(std::span<const ChunkContent> antecedents,
                                                  const ChunkContent& chunk,
                                                  const PatchOptions& opts,
                                                  bool form_on_miss = true,
                                                  std::vector<DeltaStats>* stats = nullptr);

  // The orbit patch of `chunk` behind an antecedent *set*: the mean deficit over orderings of the
  // set (all of them when there are at most max_orderings, else a seeded sample of that many),
  // factored once. One stored patch then serves every ordering of the set. Keyed by the sorted ids.
  Result<std::shared_ptr<const PatchEntry>> orbit_patch(std::span<const ChunkContent> set,
                                                        const ChunkContent& chunk,
                                                        const PatchOptions& opts,
                                                        int max_orderings = 24);

  // Builds [anchor][chunks...] in `seq`, which must be empty. Reprefill runs the forward; Blind
  // and Patch write stored rows (forming what is missing). Nothing is half-written on failure:
  // the sequence is truncated back to empty.
  Result<ServeReport> assemble(SeqId seq, std::span<const ChunkContent> chunks,
                               const ServeOptions& opts);

  // Same, naming chunks by id: each must already be in the store (a canonical entry).
  Result<ServeReport> assemble_ids(SeqId seq, std::span<const ChunkId> ids,
                                   const ServeOptions& opts);

  // Appends one cached chunk at `position` to `seq`: canonical rows, plus the patch when given.
  // Zero forwards.
  Status append_chunk(SeqId seq, const CanonicalEntry& canonical, const Patch* patch,
                      int32_t position);

  // Appends the anchor (exact: its KV is computed once and copied).
  Status append_anchor(SeqId seq);

  // Every forward of the cache runs paced by `p` from now on (null: whole).
  void set_pacer(ForwardPacer* p) { pacer_ = p; }

  // Runs a forward of the chunk's tokens/rows at `position` appended to `seq`. hidden (optional):
  // every row's final hidden state is appended to it (ForwardOptions::hidden: embeddings).
  Result<std::vector<float>> forward_chunk(SeqId seq, const ChunkContent& c, int32_t position,
                                           LogitsMode logits = LogitsMode::None,
                                           const AttentionMask* mask = nullptr,
                                           ForwardObserver* observer = nullptr,
                                           std::vector<float>* hidden = nullptr);

 private:
  Status check_positions(std::span<const ChunkContent> chunks) const;
  Result<std::shared_ptr<const ChunkKV>> anchor_kv();
  // The options a patch is formed and stored under: never wider than the pool (see
  // stored_dtype in chunk_cache.cpp), at the model's head width.
  PatchOptions stored_options(const PatchOptions& opts) const;

  const Model& model_;
  Engine& engine_;
  KvPool& pool_;
  ChunkStore& store_;
  std::vector<int32_t> anchor_;
  std::shared_ptr<const ChunkKV> anchor_kv_;
  std::vector<float> delta_scratch_;
  ForwardPacer* pacer_ = nullptr;
};

// Frees a scratch sequence when it goes out of scope.
class ScopedSequence {
 public:
  explicit ScopedSequence(KvPool& pool) : pool_(pool), seq_(pool.create_sequence()) {}
  ScopedSequence(KvPool& pool, SeqId adopt) : pool_(pool), seq_(adopt) {}  // frees `adopt`
  ~ScopedSequence() { pool_.free_sequence(seq_); }
  ScopedSequence(const ScopedSequence&) = delete;
  ScopedSequence& operator=(const ScopedSequence&) = delete;
  SeqId id() const { return seq_; }

 private:
  KvPool& pool_;
  SeqId seq_;
};

}  // namespace kamera
