// What the engine side of the server tells the API layer about a generation, typed: the report of
// what its prompt reused (the ServeReport: a span per run of tokens, with where its KV came from),
// its text as it is decoded, how each choice ended, and the usage. The scheduler emits the events
// on the engine thread, in order; the API translators (server/completion_sink.h) turn them into
// their wire format on their own threads. Nothing here is JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cache/reuse_policy.h"
#include "cache/served_span.h"
#include "core/status.h"
#include "generate/generator.h"

namespace kamera {

// What admission made of a prompt (usage.prompt_tokens, its details and usage.kamera).
struct PromptUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // served without a forward (the anchor included)
  int64_t reused = 0, recomputed = 0;
  ReusePolicy policy = ReusePolicy::Patch;
  // The repair budget (cache/repair_plan.h): the request's, the tokens held from another context
  // (its base) and those of them recomputed in context.
  double reuse_budget = 0;
  int64_t repair_candidates = 0, repaired = 0;
  std::vector<ServedSegment> segments;
  int background_queued = 0;  // segments this request queued for a canonical (formed when idle)
  // Seconds, measured on the scheduler: waiting in the queue, from the start of the admission to
  // the first token (the prompt assembled and prefilled), and from the submission to the first
  // token. prefill_tokens_per_s: the server's measured prefill speed when the first token went
  // (Scheduler::note_prefill_speed; 0 before any prefill was long enough to measure).
  double queue_s = 0, prefill_s = 0, ttft_s = 0;
  double prefill_tokens_per_s = 0;
};

// The usage of a finished generation: its prompt's, and the tokens its choices generated.
struct Usage {
  PromptUsage prompt;
  int64_t completion_tokens = 0;
  // Speculative decoding: tokens drafted, and those of them the model accepted (each one a
  // completion token that took no forward of its own).
  int64_t drafted = 0, accepted = 0;
  int64_t forced = 0;  // of the drafted: forced by the request's constraint (always accepted)
};

// Why a generation failed: a plain failure (its code gives the HTTP status), a prompt that does
// not fit the context (`param` names the field to change), or the server stopping first.
struct ServeError {
  enum class Kind { Failed, ContextLength, Stopping } kind = Kind::Failed;
  Error error;
  std::string param;  // the request field at fault ("messages", "prompt", "max_tokens"); or none
};

// The prompt was admitted and the first token is being decoded: what it reused, told before any
// text (Anthropic's message_start carries it).
struct PromptAdmitted {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
};
// A choice's next text, the log-probabilities of its tokens, and how many tokens were generated
// since the last delta (their text is this one's).
struct TextDelta {
  int index = 0;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  int64_t tokens = 0;
};
// A choice ended (not the generation's last).
struct ChoiceEnd {
  int index = 0;
  FinishReason reason = FinishReason::Stop;
};
// The generation's last choice ended: the usage goes with it.
struct GenerationEnd {
  int index = 0;
  FinishReason reason = FinishReason::Stop;
  Usage usage;
  std::string stop_sequence;  // the request's stop string that ended the last choice, if one did
};
struct GenerationFailed {
  ServeError error;
};

using Event = std::variant<PromptAdmitted, TextDelta, ChoiceEnd, GenerationEnd, GenerationFailed>;

}  // namespace kamera
