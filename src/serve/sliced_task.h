// Scheduler work whose forwards run in slices between decode steps (serve/scheduler.h): chunk
// uploads, window edits, and the admission of a completion (its chunks assembled, its prompt
// prefilled).
//
// A task runs on a stack of its own (core/fiber.h) on the scheduler thread, only while the
// scheduler has resumed it: exactly one of the scheduler and its tasks runs at any time, so the
// engine, the KV pool and the windows have one user and need no locks, and a task costs a stack,
// never a thread (the server's thread count does not grow with its requests). A task hands control
// back when a slice of its forwards is used up (SlicePacer, which the chunk cache calls between the
// pieces of every forward) or when its work ends. The cursor of a task is where its stack waits: a
// forward in the middle (Engine::forward_step), or between two.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

#include "cache/chunk_cache.h"
#include "core/fiber.h"

namespace kamera {

class SlicedTask {
 public:
  // `work` starts at the first resume().
  explicit SlicedTask(std::function<void()> work);
  ~SlicedTask();  // runs the work to its end first if it has not ended
  SlicedTask(const SlicedTask&) = delete;
  SlicedTask& operator=(const SlicedTask&) = delete;

  // Scheduler thread: runs the task until it pauses or ends; true once it has ended.
  bool resume();
  // Inside the task: hands control back until the next resume().
  void pause();
  // The task running now, or null (the scheduler itself, any other thread).
  static SlicedTask* current();

 private:
  Fiber fiber_;
};

// The prefill budget of the engine steps, shared by the tasks. While generations decode, a task's
// forward is offered to the decode steps and the task waits: each step runs the next piece of
// every offered forward inside its batch (Engine::decode with pieces, as vLLM's chunked prefill
// batches prefill chunks with decodes), within the step's budget, and the task is resumed once its
// forward is done, so a long prefill costs no thread switch per piece. Otherwise (nothing decodes,
// or a forward that cannot be batched: an observer, all logits, hidden rows) the task runs its
// pieces itself and pauses once a step's budget is used up.
class SlicePacer : public ForwardPacer {
 public:
  int allowance() override { return draining_ ? (1 << 30) : std::max(1, left_); }
  void spent(int tokens) override;
  bool run_in_step(ForwardCursor& cur) override;

  // Scheduler thread. A new step's budget; mixing: generations decode in it (else the offered
  // forwards go back to their tasks).
  void new_step(int budget, bool mixing);
  bool used_up() const { return left_ <= 0; }
  // Forward tokens run in this step so far (by the tasks and in the step's pieces).
  int used() const { return budget_ - left_; }
  // Whether `t` waits for its offered forward (it is not to be resumed).
  bool waiting(const SlicedTask* t) const;
  // Whether forwards wait for the next step.
  bool offered() const { return !offers_.empty(); }
  // The pieces of this step (what is left of its budget, over the offered forwards in turn);
  // then ran() once the step ran them (ok) or failed (their tasks run them themselves).
  std::vector<Engine::Piece> take_pieces();
  void ran(bool ok);
  // From now on nothing pauses (the server stops: work in flight runs to its end).
  void drain();
  int64_t pauses() const { return pauses_.load(); }

 private:
  struct Offer {
    ForwardCursor* cur;
    SlicedTask* task;
    int piece = 0;  // tokens in the step being run
  };
  void release_all();
  int left_ = 0, budget_ = 0;
  bool mixing_ = false, draining_ = false;
  std::vector<Offer> offers_;
  size_t next_ = 0;                 // the offer the next step starts with
  std::atomic<int64_t> pauses_{0};  // read by /metrics
};

}  // namespace kamera
