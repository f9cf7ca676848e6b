// The scheduler: one thread that owns the engine, the KV pool and the windows. It decodes every
// active generation together, one batched forward per step (continuous batching), and between
// two steps advances the work that needs the engine otherwise: the admission of queued
// generations (their prompt assembled by the prompt assembler from the prefix and segment indexes,
// or from the chunk store, and prefilled) and queued operations
// (chunk uploads, window edits). That work runs as sliced tasks (serve/sliced_task.h): each
// engine step gives them a budget of forward tokens, round-robin, so one client's long prefill
// delays the others' next tokens by one slice at most, and a short request is admitted while a
// long one is still running. While generations decode, the tasks' forward pieces run inside the
// decode step itself, batched with its rows (chunked prefill), in the steps that the prefill's
// share of the engine's time allows (prefill_share of the decoding's time, or more while more
// generations wait for their first token than decode); with nothing decoding, the forwards of
// several admissions run together in one batched forward per step. A step's prefill tokens are
// split equally over the forwards offered to it, so admissions that arrive together get their
// first tokens together.
//
// Tasks that touch windows or delete from the store (every operation, and completions after a
// window) are exclusive: one runs at a time, in queue order, as before slicing. Completions
// without a window touch only their own sequences and the store, so they run beside them.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "cache/prompt_assembler.h"
#include "context/context.h"
#include "serve/generation.h"
#include "serve/metrics.h"
#include "serve/sliced_task.h"
#include "serve/window_registry.h"

namespace kamera {

struct SchedulerOptions {
  int max_queue = 64;             // jobs waiting before submissions are refused
  int max_active = 16;            // generations decoding (or being admitted) at once
  int prefill_slice_tokens = 64;  // forward tokens of tasks per engine step (one slice)
  // While generations decode, prefill slices take at most this share of the decoding's time (they
  // ride along with the steps the share allows), or more while more admissions are in flight than
  // rows decode (share_now); 0: a slice every step.
  double prefill_share = 0.5;
  bool control_tokens_in_text = false;  // ServerOptions::control_tokens_in_text
  // Long segments' canonicals are formed after kIdleBeforeBackground of idleness, or with this
  // also while generations decode with no admission in flight or queued (the task then yields to
  // any admission): a server under steady load still stores its segments for the others, at the
  // cost of their forwards and patches.
  bool compact_while_decoding = false;
  // A queued generation that shares at least this many prompt tokens (a common prefix, or
  // segments) with a generation being admitted, none of which the caches hold yet, waits until
  // that admission has kept them, then reuses them instead of computing them beside it (0: never
  // wait). Agents that start together with one system prompt compute it once, not once each.
  int hold_shared_tokens = 64;
  // Speculative decoding: None, or Ngram (prompt-lookup drafts from the request's own prompt and
  // output, generate/ngram_draft.h; up to spec_draft_max tokens a step, adapted to the
  // acceptance). Exact: a draft token is kept only where the sampler's acceptance rule keeps it
  // (Sampler::sample_draft), so outputs follow plain decoding's distribution (greedy: its tokens).
  // Draft: a draft model's greedy proposals (serve/draft_model.h: `draft`, with its own limits).
  enum class Spec { None, Ngram, Draft } spec = Spec::None;
  int spec_draft_max = 8;
  // Forced drafting, with any `spec`: a constrained choice's next tokens that its constraint
  // leaves no choice for (TokenConstraint::forced, up to spec_draft_max) head the step's draft;
  // the n-gram or draft model's proposal continues after them. Always accepted (the masked
  // distribution is all on them): k forced tokens cost one forward of k + 1 rows, not k + 1.
  // Text: also the longest token where the grammar's next text is fixed but not its tokens (a
  // guess, checked as any draft token).
  enum class Forced { Off, On, Text } spec_forced = Forced::On;
  std::shared_ptr<DraftModel> draft = nullptr;  // Spec::Draft's model (outlives the generations)
};

class Scheduler {
 public:
  // An operation run on the scheduler thread: run = false when the server stops first.
  using Op = std::function<void(bool run)>;

  Scheduler(Context& ctx, WindowRegistry& windows, ServerMetrics& metrics, SchedulerOptions o);
  ~Scheduler();
  void start();
  // Answers queued work with errors, ends active generations ("abort") and joins the thread.
  void stop();

  // Queue generations (a batch of prompts: together, or none of them) or an operation; false when
  // the queue is full or the server stopping.
  bool submit_all(std::vector<std::unique_ptr<Generation>> gens);
  bool post(Op op);
  int queued() const { return queued_.load(); }
  // Told every change of the segment index (before start(); SegmentIndex::Observer), on the
  // scheduler thread.
  void observe_segments(SegmentIndex::Observer o) {
    if (SegmentIndex* s = assembler_.segments()) s->set_observer(std::move(o));
  }
  int64_t prefill_pauses() const { return pacer_.pauses(); }

 private:
  struct Job {
    std::unique_ptr<Generation> gen;  // when set: a generation to admit
    Op op;                            // otherwise: an operation
    bool exclusive() const { return !gen || !gen->req.window_id.empty(); }
  };
  // A job in flight: its sliced work, and for an admission the generation it admits.
  struct Task {
    std::unique_ptr<Generation> gen;
    bool exclusive = false;
    bool admitted = false;    // the generation decodes from now on
    bool background = false;  // a canonical formed off the request path: yields to the others
    std::unique_ptr<SlicedTask> run;
  };
  bool enqueue(Job j);
  void loop();
  std::vector<Job> take_batch();
  // Prompt tokens of g that an admission of `busy` is computing and the caches do not hold yet.
  int64_t shared_in_flight(const Generation& g, std::span<const Generation* const> busy) const;
  bool exclusive_in_flight() const;
  int generations_in_flight() const;
  int rows_in_flight() const;
  void start_task(Job j);
  void step_tasks();
  int admissions_in_flight() const;
  bool batching_admissions() const;
  double share_now() const;
  int slice_budget() const;
  void account_prefill(double step_s, int piece_tokens, int decode_rows);
  void drain_tasks();
  int64_t pages_to_come(const Generation& g) const;
  int64_t pages_to_admit(const Generation& g) const;
  int64_t pages_short(const Generation& g, int64_t reserved) const;
  bool admit(Generation& g);
  bool exceeds_context(const Generation& g, int64_t end) const;
  Status refuse_context(Generation& g, Assembly& a, int64_t end);
  Status admit_window(Generation& g, Assembly& a);
  Status admit_chunks(Generation& g, Assembly& a);
  Status admit_plan(Generation& g, Assembly& a);
  Result<std::pair<std::vector<ChunkContent>, ChunkContent>> resolve(const GenRequest& r);
  void count_segment(SegmentSource s);
  void remember(Generation& g, bool with_reply);
  void keep_segments(Generation& g);
  bool background_due(bool admitting) const;
  void start_background();  // the next queued canonical, when the engine is idle
  void make_room(const Generation& g, int64_t reserved);
  void release(Generation& g);
  int active_rows() const;
  void note_pages();  // the pool's pages in use, for /metrics
  void note_prefill_speed(int64_t tokens, double seconds);
  Status start_choices(Generation& g, std::vector<float> logits, int32_t next_pos);
  bool step_choice(Generation& g, Generation::Choice& c, std::span<float> logits);
  bool emit(Generation& g, Generation::Choice& c, GenStep s, int64_t made);
  void propose_all();  // every decoding choice's draft for this step
  void propose_forced(const Generation& g, Generation::Choice& c);
  void propose(const Generation& g, Generation::Choice& c);
  int draft_room(const Generation& g, const Generation::Choice& c) const;
  void propose_with_model();
  void verify_draft(Generation& g, Generation::Choice& c, std::span<float> logits);
  bool drop_drafts(std::span<Engine::DecodeRow> rows,
                   std::span<const std::pair<Generation*, Generation::Choice*>> owner);
  void end_choice(Generation& g, Generation::Choice& c, FinishReason reason);
  void finish(Generation& g, FinishReason reason, int last = -1);
  void fail(Generation& g, const Error& e);
  void fail_context(Generation& g, int64_t prompt_positions);
  void decode_step();

  Context& ctx_;
  WindowRegistry& windows_;
  ServerMetrics& metrics_;
  SchedulerOptions opts_;
  std::vector<std::unique_ptr<Generation>> active_;  // scheduler thread (and its tasks) only
  std::vector<std::unique_ptr<Task>> tasks_;         // in flight, resumed round-robin
  size_t next_task_ = 0;
  SlicePacer pacer_;
  PromptAssembler& assembler_;  // the context's: text prompts are served from its caches
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::atomic<int> queued_{0};
  double last_sweep_ = 0;  // of expired windows
  double last_busy_ = 0;   // when the engine last had work (background work waits for idleness)
  static constexpr double kIdleBeforeBackground = 0.3;  // seconds
  double decode_s_ = 0;  // moving average of a decode step's seconds (without prefill pieces)
  double credit_s_ = 0;  // prefill time the share allows now (account_prefill)
  double token_s_ = 0;   // moving average of a prefill token's seconds (its cost to a step)
  double tasks_s_ = 0;   // seconds the tasks ran beside decoding in this step (step_tasks)
  bool step_unshared_ = false;                 // this step's budget was sized with nothing decoding
  static constexpr int kMaxSlicesPerStep = 8;  // prefill slices one step carries at most
  // The measured prefill speed (usage.kamera.timings): tokens and seconds of the admissions
  // that recomputed at least kSpeedMinTokens, each older one weighted down by kSpeedDecay.
  double speed_tokens_ = 0, speed_s_ = 0;
  static constexpr int64_t kSpeedMinTokens = 16;
  static constexpr double kSpeedDecay = 0.75;
};

}  // namespace kamera
