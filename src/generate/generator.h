// The generation loop, one step at a time: logits in; logit_bias, repetition penalties and the
// token constraint applied; a token sampled; the end conditions checked (the model's whole
// end-of-generation set, stop strings, the token limit, cancellation, a constraint that cannot
// follow); the text that may be shown out, in whole UTF-8 characters, never a possible beginning of
// a stop string, special tokens as text only when asked.
//
// Every generating caller runs it: `kamera generate` and `kamera chat` (through run_generation
// below), the VL chat, and the server's scheduler, which decodes many sequences in one batched
// forward and calls step() for each with its row of logits.
//
//   Generator gen(tok, params);
//   for (auto logits = prefill(...);;) {
//     GenStep s = gen.step(logits);
//     show(s.text);
//     if (s.done) break;
//     logits = forward(s.token);
//   }
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "generate/constraint.h"
#include "generate/logits.h"
#include "generate/stop_text.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace kamera {

struct GenerateParams {
  int max_tokens = 256;  // tokens to sample at most (the caller caps it to the context)
  SamplerParams sampling;
  PenaltyParams penalties;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<std::string> stop;  // the text ends before the first one that appears
  bool ignore_eog = false;        // sample past the end-of-generation set (and BOS)
  bool special = false;           // control tokens print their text (else nothing)
  // Without `special`, user-defined tokens spelled like control tokens (<|fim_middle|>, ...)
  // print nothing either, as llama.cpp retypes them control (the terminal chat sets it).
  bool text_only = false;
  int logprobs = -1;  // < 0: none; k >= 0: the chosen token's and the k most likely
};

// Abort: the server stopped while the generation ran (never set by the loop itself).
enum class FinishReason { None, Stop, Length, Cancelled, Abort };
// "stop", "length", "cancelled", "abort" ("" for None).
const char* finish_reason_name(FinishReason r);

// A token's log-probability under the distribution it was sampled from (after logit_bias,
// penalties and the constraint's mask, at temperature 1), with the most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  std::string bytes;  // its text (a piece of a character when it splits one)
  float logprob = 0;
  struct Alt {
    int32_t token;
    std::string bytes;
    float logprob;
  };
  std::vector<Alt> top;
};

struct GenStep {
  int32_t token = -1;  // the sampled token; when !done, the caller forwards it
  bool done = false;
  FinishReason reason = FinishReason::None;
  std::string text;                    // text that may be shown now
  std::vector<TokenLogprob> logprobs;  // of the tokens whose text starts in what is shown now
};

class Generator {
 public:
  // tok may be null (a model without a vocabulary: no text, no end set, no stop strings).
  // `history`: the prompt's tokens (the penalties look at its tail; the first token's text
  // follows its last one). `constraint` and `cancel` may be null and must outlive the loop.
  Generator(const Tokenizer* tok, GenerateParams p, std::span<const int32_t> history = {},
            TokenConstraint* constraint = nullptr, const std::atomic<bool>* cancel = nullptr);

  // One step on the logits of the last token (modified in place). After done, returns done
  // again with nothing. With a `draft` (>= 0: speculative decoding's proposed next token), the
  // token is chosen by Sampler::sample_draft after the same logit_bias, penalties and mask: the
  // draft when accepted (never a token the mask forbids), else a token drawn so that the step's
  // distribution is the plain step's; the caller tells acceptance by s.token == draft.
  GenStep step(std::span<float> logits, int32_t draft = -1);
  // Ends the generation from outside (the context is full, an error): the held text is shown.
  GenStep finish(FinishReason reason);

  bool done() const { return done_; }
  FinishReason reason() const { return reason_; }
  // The completion's text (cut before a stop string) and its sampled tokens (the
  // end-of-generation token that ended it not included).
  const std::string& text() const { return stop_.text(); }
  // The stop string that ended it (empty: none did).
  const std::string& stop_sequence() const { return stop_.matched(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const GenerateParams& params() const { return p_; }

 private:
  bool ends_generation(int32_t token) const;
  std::string token_bytes(int32_t token) const;
  void add_logprob(std::span<const float> logits, int32_t token);
  std::vector<TokenLogprob> release_logprobs(size_t upto);

  const Tokenizer* tok_;
  GenerateParams p_;
  Sampler sampler_;
  Penalties penalties_;
  TokenConstraint* constraint_;
  const std::atomic<bool>* cancel_;
  Utf8Stream utf8_;
  StopText stop_;
  int32_t prev_ = -1;
  std::vector<int32_t> tokens_;
  std::vector<std::pair<size_t, TokenLogprob>> held_lp_;  // (text offset, entry) not yet shown
  bool done_ = false;
  FinishReason reason_ = FinishReason::None;
};

// The loop on one sequence: `forward(token)` appends the token to the sequence and returns the
// next logits; `on_text` receives the text as it may be shown. Returns how it ended.
using ForwardFn = std::function<Result<std::vector<float>>(int32_t token)>;
Result<FinishReason> run_generation(Generator& gen, std::vector<float> logits,
                                    const ForwardFn& forward,
                                    const std::function<void(std::string_view)>& on_text);

}  // namespace kamera
