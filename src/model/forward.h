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

// Input rows [begin, end) that attend to each other both ways: each reads the span's later rows
// too, as a Gemma 3 picture's rows do (the model's mask; llama.cpp's mtmd decodes such a chunk with
// causal attention off). Rows outside it stay causal. Empty (the default): all rows are causal.
// A forward never splits the span across micro-batches (ForwardCursor::piece).
struct NonCausalSpan {
  int begin = 0, end = 0;
  bool empty() const { return end <= begin; }
  bool operator==(const NonCausalSpan&) const = default;
};

struct ForwardInput {
  std::span<const int32_t> tokens;  // token ids, or empty when embeddings are given
  // n rows of cfg.input_width() values (e.g. a vision encoder's output): dim, or qwen3vl's
  // 1 + n_deepstack slices of dim (model/qwen3vl.h)
  const float* embeddings = nullptr;
  int n = 0;                       // number of new tokens
  std::span<const Pos> positions;  // n positions, any values (need not be contiguous)
  NonCausalSpan non_causal;        // rows that see each other (empty: none)

  static ForwardInput from_tokens(std::span<const int32_t> ids, std::span<const Pos> pos) {
    return {ids, nullptr, int(ids.size()), pos, {}};
  }
};

enum class LogitsMode { None, Last, All };

// Observation hooks of a forward, in the spirit of llama.cpp's cb_eval: the engine calls them
// while it runs, so experiments (eval/) can read intermediate values without the engine knowing
// about them. They never change what the forward computes.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // The n hidden rows (n x dim) entering `layer`.
  virtual void layer_input(int layer, const float* x, int n, int dim) {
    (void)layer, (void)x, (void)n, (void)dim;
  }
  // A buffer of at least n_keys floats (the sequence's tokens) to which attention at `layer`
  // adds the weight each key receives, summed over heads and queries; null: not wanted.
  virtual float* key_mass(int layer, int n_keys) {
    (void)layer, (void)n_keys;
    return nullptr;
  }
  // The n query rows (n x n_heads*head_dim) of a GQA `layer` as attention read them: rotated
  // to their tokens' positions (reuse/output_stats.h gathers them for output-aware patches).
  virtual void layer_queries(int layer, const float* q, int n, int width) {
    (void)layer, (void)q, (void)n, (void)width;
  }
};

struct ForwardOptions {
  LogitsMode logits = LogitsMode::Last;
  // Extra masking: query indices are within this input, key indices within the sequence.
  const AttentionMask* mask = nullptr;
  int max_batch = 512;                  // tokens per micro-batch (bounds scratch memory)
  ForwardObserver* observer = nullptr;  // optional hooks (see ForwardObserver)
  // When set, the final hidden state of every input row (after the output norm, the rows the
  // output projection reads; n x dim) is appended here: embeddings.
  std::vector<float>* hidden = nullptr;
};

// A forward run piece by piece (Engine::begin_forward, Engine::forward_step): the input was
// checked and its slots appended to the sequence; `done` tokens of it have run. Between two steps
// other work may use the engine and the pool (the sequence's later slots are not written yet),
// which is how the server interleaves a long prefill with decode steps. The input, the mask and
// the observer must outlive the cursor.
struct ForwardCursor {
  SeqId seq = -1;
  ForwardInput in;
  ForwardOptions opt;
  int first = 0;  // sequence index of the input's first token
  int done = 0;   // tokens already run
  std::vector<float> logits;
  bool finished() const { return done >= in.n; }
  int left() const { return in.n - done; }
  // The size of the next piece for a wish of `want` tokens (clamped to [1, left()]): it never ends
  // inside the input's non-causal span, whose later rows must be in the same micro-batch. A piece
  // reaching into the span stops at its start; one starting at the span runs to its end, beyond
  // `want` (and max_batch) if the span is longer.
  int piece(int want) const;
};

// Runs one model over sequences of a KV pool whose layout is model.kv_layout(). Not thread-safe;
// one Engine per serving thread.
class Engine {
 public:
  Engine(const Model& model, int n_threads);

  const Model& model() const { return model_; }
  const RopeCache& rope() const { return rope_; }
  // The rope of Local layers (model/layer_kinds.h); empty when the model has none.
  const RopeCache& local_rope() const { return rope_local_; }
  ThreadPool& threads() { return pool_; }

  // Appends the input tokens to `seq` (their KV written to the pool), attends each to the
  // sequence before it, and returns logits: none, the last row, or n rows of n_vocab.
  // Fails before touching the pool on bad input or when the pool is full; a micro-batch refused
  // later (a bounded pool's window rows, model/forward_kinds.cpp) takes the input's tokens out
  // again.
  Result<std::vector<float>> forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                     const ForwardOptions& opt = {});
  // The same forward in steps: begin_forward checks the input and appends its slots (nothing
  // runs); each forward_step runs the next max_tokens tokens (at most opt.max_batch) as one
  // micro-batch; the cursor's logits are the forward's once it is finished. Steps of any sizes
  // give forward()'s result (micro-batches attend to the rows written before them).
  Result<ForwardCursor> begin_forward(KvPool& kv, SeqId seq, const ForwardInput& in,
                                      const ForwardOptions& opt = {});
  Status forward_step(KvPool& kv, ForwardCursor& cur, int max_tokens);

  // One decode step of several sequences in one forward (continuous batching): appends
  // rows[i].token at rows[i].pos to rows[i].seq and returns rows.size() x n_vocab logits. The
  // weight products run once over all rows; attention runs per sequence. On failure (a full pool)
  // no sequence is changed. A row with a draft (speculative decoding: serve/scheduler_spec.cpp)
  // also appends the draft's tokens after `token`, at pos + 1, pos + 2, ..., and has logits on
  // each: 1 + draft.size() rows of the result, in order (each attends to the tokens before it).
  struct DecodeRow {
    SeqId seq;
    int32_t token;
    Pos pos;
    std::span<const int32_t> draft = {};
  };
  Result<std::vector<float>> decode(KvPool& kv, std::span<const DecodeRow> rows);
  // The same step, also running pieces of forwards in flight in the same batch (chunked prefill,
  // as vLLM batches prefill chunks with decodes): piece i runs the next n tokens of its cursor.
  // The weight products run once over the decode rows and the pieces' rows; attention per
  // sequence, each piece attending to the rows written before it, so a cursor advanced this way
  // gives what forward_step gives. Returns the decode rows' logits; a piece that ends its cursor
  // appends its last row's logits to it (LogitsMode::Last). Pieces must have no observer and no
  // LogitsMode::All, and sequences distinct from the rows'.
  struct Piece {
    ForwardCursor* cur;
    int n;
  };
  Result<std::vector<float>> decode(KvPool& kv, std::span<const DecodeRow> rows,
                                    std::span<const Piece> pieces);

  // --- Layer steps: the building blocks of forward(), for callers that recompute chosen
  // tokens in place (eval/'s token-recompute baselines). Rows are tokens of `seq` already in the
  // pool; x holds their hidden states (n x dim) and is updated in place.

  // Token embedding rows: x (ids.size() x dim).
  void embed(std::span<const int32_t> ids, float* x) const;
  // The cached channels `layer` computes for n rows entering it, without writing them: one
  // n x width buffer per channel of the KV layout (rope channels pre-rotation).
  void layer_channels(int layer, const float* x, int n, std::vector<std::vector<float>>& out);
  // One layer for the rows that are tokens `tokens` (ascending sequence indices) of `seq`:
  // writes their cached channels into their slots (copy-on-write first), attends each row's
  // query over the sequence up to its own token, then the output projection and FFN. The rows
  // are hidden states: qwen3vl's deepstack slices are not added to them.
  Status layer_step(KvPool& kv, SeqId seq, int layer, std::span<const int> tokens, float* x,
                    ForwardObserver* observer = nullptr);

 private:
  // g.n consecutive new tokens of one sequence (tokens g.first..), at batch rows g.row0..
  struct RowGroup {
    SeqId seq;
    int first, n, row0;
    const AttentionMask* mask;
    std::span<const int> tokens = {};  // when set: row t is token tokens[t] (not first + t)
    bool logits = true;                // LogitsMode::Last: this group's last row is wanted
    bool every_row = false;            // every row's logits are wanted (a decode row's draft)
    NonCausalSpan non_causal = {};     // sequence indices of rows that see each other (in rows)
    int token(int t) const { return tokens.empty() ? first + t : tokens[t]; }
  };
  Status check_layout(const KvPool& kv) const;
  // Window rows of a bounded pool for the groups (model/forward_kinds.cpp).
  Status window_rows(KvPool& kv, std::span<const RowGroup> groups, bool allocate);
  Status check_step(const KvPool& kv, std::span<const DecodeRow> rows,
                    std::span<const Piece> pieces) const;
  // Rows off.. of the input into x_ from batch row row0 on; their deepstack slices into ds_.
  void load_rows(const ForwardInput& in, int off, int n, int row0);
  void add_deepstack(int layer, int n, float* x) const;
  // The blocks of a mask that fall in a cursor's next n rows, shifted to them.
  static AttentionMask piece_mask(const ForwardCursor& cur, int n);
  // A cursor's non-causal span in sequence indices, or empty when the next n rows miss it.
  static NonCausalSpan piece_span(const ForwardCursor& cur, int n);
  Status run_batch(KvPool& kv, std::span<const RowGroup> groups, LogitsMode logits,
                   std::vector<float>& out, ForwardObserver* observer = nullptr,
                   std::vector<float>* hidden = nullptr);
  // Rope angles of the groups' rows at their tokens' positions (rows x n_pairs each).
  void row_angles(const KvPool& kv, std::span<const RowGroup> groups, int n);
  void run_layer(KvPool& kv, int layer, int n, std::span<const RowGroup> groups, float* x,
                 ForwardObserver* observer);
  void gqa_attention_block(KvPool& kv, int layer, int n, std::span<const RowGroup> groups,
                           float* key_mass);
  void mla_latent_rows(const LayerWeights& L, int n);  // k_: latent + k_pe rows, v_: normed latent
  void grow_scratch(int n);
  void qkv_projections(const LayerWeights& L, int n);
  void output_and_ffn(const LayerWeights& L, float* x, int n);
  void mla_attention_block(KvPool& kv, int layer, int n, std::span<const RowGroup> groups,
                           float* key_mass);
  // Per-layer kinds (model/forward_kinds.cpp, model/layer_kinds.h): the embedding row of a token
  // (gemma3 scales it), the rope angles a layer's queries turn by (null for NoRope), its
  // attention extras, gemma3's post norms, the FFN activation, the logit soft-cap.
  void token_row(int32_t id, float* dst) const;
  void layer_angles(int layer, const float** cs, const float** sn) const;
  void layer_attention_extras(int layer, AttentionExtras& ex) const;
  void post_norm(const std::vector<float>& w, float* y, int n);
  void ffn_activation(int n);
  void soft_cap(float* logits, int64_t n) const;

  const Model& model_;
  ThreadPool pool_;
  RopeCache rope_;
  AttentionWorkspace attn_ws_;
  MlaWorkspace mla_ws_;
  MoeWorkspace moe_ws_;
  // Scratch (rows x width), grown on demand.
  std::vector<float> x_, xb_, q_, k_, v_, att_, gate_, up_, tmp_;
  std::vector<float> cs_, sn_;  // rope angles of the rows (rows x n_pairs)
  RopeCache rope_local_;        // Local layers' rope (model/layer_kinds.h), when there are any
  std::vector<float> cs_local_, sn_local_;
  // Per batch row: its deepstack slices (n_deepstack x dim), or null (tokens, no deepstack)
  std::vector<const float*> ds_;
};

}  // namespace kamera
