// Speculative decoding with a draft model (SchedulerOptions::Spec::Draft, kamera serve
// --model-draft): a smaller model of the target's vocabulary, run by its own engine over its own
// KV pool, proposes each step's next tokens greedily; the target checks them in its step's forward
// (serve/scheduler_spec.cpp) by the same acceptance rule as prompt-lookup drafts, so outputs are
// plain decoding's (greedy: token for token; sampled: in distribution).
//
// Each choice that drafts has a DraftSequence: a sequence of the draft's pool that mirrors the
// target's (the prompt's tokens, then the output). Before a draft it is brought up to the choice's
// tokens: rolled back to the longest prefix it shares with them (the rejected draft tokens go),
// then the rest forwarded. One call drafts for every choice of a step together: the catch-ups run
// as pieces of one batched forward, then each draft token of every choice still drafting is one
// batched decode row.
//
//   KAMERA_ASSIGN_OR_RETURN(auto d, DraftModel::load("draft.gguf", target, opts));
//   std::vector<DraftModel::Ask> asks = {{&seq, history, k, bias}};
//   d->draft(asks);   // asks[i].out: up to k tokens
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "context/context.h"

namespace kamera {

struct DraftOptions {
  int max = 8;         // draft tokens per step at most (--draft-max)
  int min = 0;         // a shorter draft is dropped (--draft-min)
  float p_min = 0.75;  // drafting stops at a token the draft gives less than this (--draft-p-min)
  int n_threads = 2;
  int64_t kv_tokens = 0;       // the draft's pool (0: four times its context)
  std::string tokenizer_path;  // llama2.c checkpoints' tokenizer.bin
};

// Whether a draft model can propose tokens for the target: the same tokenizer kind, BOS/EOS and
// their use, vocabularies within 128 ids of each other and every token text below the smaller one
// equal (from id 5 on; llama.cpp's rule). The error names the first difference.
Status check_draft_vocabulary(const Model& target, const Model& draft);

// The draft's mirror of one choice's sequence; frees its pool sequence when destroyed.
class DraftSequence {
 public:
  explicit DraftSequence(KvPool& pool) : pool_(&pool) {}
  ~DraftSequence();
  DraftSequence(const DraftSequence&) = delete;
  DraftSequence& operator=(const DraftSequence&) = delete;

 private:
  friend class DraftModel;
  KvPool* pool_;
  SeqId seq_ = -1;
  std::vector<int32_t> fed_;  // the tokens whose KV the sequence holds, in order
};

class DraftModel {
 public:
  // Loads the draft and checks its vocabulary against the target's.
  static Result<std::unique_ptr<DraftModel>> load(const std::string& path, const Model& target,
                                                  const DraftOptions& o);
  const DraftOptions& options() const { return opts_; }
  const Model& model() const { return ctx_->model(); }
  std::unique_ptr<DraftSequence> sequence() {
    return std::make_unique<DraftSequence>(ctx_->pool());
  }

  struct Ask {
    DraftSequence* seq;
    std::span<const int32_t> history;  // the choice's tokens so far (prompt, then output)
    int k;                             // tokens wanted at most
    std::span<const std::pair<int32_t, float>> bias;  // the request's logit_bias
    std::vector<int32_t> out = {};                    // the draft
  };
  // Fills every ask's draft. A draft that cannot be made (the draft's context or pool is full)
  // is empty; its sequence starts over next time.
  void draft(std::span<Ask> asks);

 private:
  DraftModel(std::unique_ptr<Context> ctx, DraftOptions o) : ctx_(std::move(ctx)), opts_(o) {}
  bool catch_up(std::span<Ask*> asks);  // every ask's sequence holds its history but the last
  // Greedy choice on one row of logits: the token and its probability (after the bias).
  std::pair<int32_t, float> pick(std::span<const float> logits, const Ask& a) const;
  void reset(DraftSequence& s);

  std::unique_ptr<Context> ctx_;
  DraftOptions opts_;
  int target_vocab_ = 0;
};

}  // namespace kamera
