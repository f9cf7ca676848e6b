// Scheduler work whose forwards run in slices between decode steps (server/scheduler.h): chunk
// uploads, window edits, and the admission of a completion (its chunks assembled, its prompt
// prefilled).
//
// A task runs on a thread of its own, but only while the scheduler has resumed it: exactly one of
// the scheduler thread and its tasks runs at any time, handing control back and forth under one
// mutex, so the engine, the KV pool and the windows still have one user at a time and need no
// locks. A task hands control back when a slice of its forwards is used up (SlicePacer, which the
// chunk cache calls between the pieces of every forward) or when its work ends. The cursor of a
// task is where its thread waits: a forward in the middle (Engine::forward_step), or between two.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"

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
  // Task thread: hands control back and waits for the next resume().
  void pause();
  // The task whose thread this is, or null (the scheduler thread, any other).
  static SlicedTask* current();

 private:
  void run();

  std::function<void()> work_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool task_turn_ = false, ended_ = false;
  std::thread thread_;
};

// The prefill budget of the engine steps, shared by the tasks. While generations decode, a task's
// forward is offered to the decode steps and the task waits: each step runs the next piece of
// every offered forward inside its batch (Engine::decode with pieces, as vLLM's chunked prefill
// batches prefill chunks with decodes), within the step's budget, and the task is resumed once its
// forward is done, so a long prefill costs no thread switch per piece. Otherwise (nothing decodes,
// or a forward that cannot be batched: an observer, all logits) the task runs its pieces itself
// and pauses once a step's budget is used up.
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
