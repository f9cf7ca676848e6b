// The harness as arms. An item is a context of chunks (the first n_exact of them an exact prefix
// every arm shares) and queries after it. An arm is an object that builds the other chunks' KV
// after that prefix in its own way (re-prefill, blind reuse, a rank-m patch, a literature
// baseline) and reports what it cost; the driver answers every query on each arm's KV and scores
// it against re-prefill's (eval/scoreboard.h).
//
//   sequence   [anchor][exact chunks][reused chunks ...][query]
//   prefix     [anchor][exact chunks]            one forward, forked copy-on-write by every arm
//   reference  prefix + reused chunks forwarded  re-prefill: its logits, and each reused chunk's
//                                                conditioned rows KV(chunk | all before it)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "context/context.h"
#include "eval/scoreboard.h"

namespace kamera {

struct EvalQuery {
  ChunkContent content;
  LogitsMode logits = LogitsMode::All;  // scored rows: every query position, or the last
  int family = 0;
  int32_t gold = -1;
};

struct EvalItem {
  std::string name;
  std::vector<ChunkContent> chunks;  // after the anchor, in order
  int n_exact = 1;                   // chunks [0, n_exact) are the shared exact prefix
  std::vector<EvalQuery> queries;    // each answered on its own fork after the chunks
};

// A chunk the arms rebuild: where it sits, its canonical and its re-prefilled rows.
struct ReusedChunk {
  const ChunkContent* content = nullptr;
  int32_t position = 0;  // position of its first token
  int first_token = 0;   // sequence index of its first token
  std::shared_ptr<const CanonicalEntry> canon;
  ChunkKV cond;  // KV(chunk | anchor, every chunk before it), position-free
};

// One item prepared by the driver for its arms.
struct PreparedItem {
  Context* ctx = nullptr;
  const EvalItem* item = nullptr;
  int index = 0;  // the item's index in its list
  std::unique_ptr<ScopedSequence> prefix;
  int anchor_tokens = 0, prefix_tokens = 0;
  std::vector<ReusedChunk> reused;
  int32_t query_position = 0;
  std::vector<int> measurements;        // one per query (Scoreboard indices)
  std::vector<std::vector<float>> ref;  // re-prefill's logits per query
  double reference_ms = 0;              // re-prefill of the reused chunks and the queries
  int reused_tokens() const;
  // Full f32 KV bytes of the reused chunks (every layer and channel).
  double reused_kv_bytes() const;
};

// What an arm built.
struct ArmBuild {
  ArmCost cost;
  // Rows it placed from the store, per reused chunk (for the KV error); empty: not from the store.
  std::vector<ChunkKV> served;
};

class Arm {
 public:
  explicit Arm(ArmKey key) : key_(std::move(key)) {}
  virtual ~Arm() = default;
  const ArmKey& key() const { return key_; }
  // Untimed work before serving the item (a factorization, a probe forward). false: the arm does
  // not apply to this item and is not scored on it.
  virtual Result<bool> prepare(const PreparedItem& it) {
    (void)it;
    return true;
  }
  // Writes the reused chunks' rows after the prefix into `seq`, a fork of it (timed).
  virtual Result<ArmBuild> build(const PreparedItem& it, SeqId seq) = 0;

 private:
  ArmKey key_;
};

class ArmDriver {
 public:
  ArmDriver(Context& ctx, Scoreboard& board) : ctx_(ctx), board_(board) {}
  Context& context() { return ctx_; }
  // The prefix, the re-prefill reference (logits of every query, the reused chunks' conditioned
  // rows), the reused chunks' canonicals, and one measurement per query (the item's existing ones
  // when it was prepared before). score_reference: also score re-prefill as arm "reprefill".
  Result<PreparedItem> prepare(const EvalItem& item, int index, bool score_reference);
  // Forks the prefix, builds the arm, answers every query, scores it. ms (optional): build and
  // queries. Returns false when the arm does not apply to the item.
  Result<bool> run(Arm& arm, const PreparedItem& it, double* ms = nullptr);
  // Logits of every query after `seq` (each on its own fork).
  Result<std::vector<std::vector<float>>> answer(const PreparedItem& it, SeqId seq);

 private:
  Context& ctx_;
  Scoreboard& board_;
};

}  // namespace kamera
