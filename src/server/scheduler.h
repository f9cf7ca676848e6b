// The scheduler: one thread that owns the engine, the KV pool and the windows. It admits queued
// generations (assembling their prompt from the chunk store), decodes every active generation
// together, one batched forward per step (continuous batching), and runs queued operations on
// the engine (chunk uploads, window edits) between steps.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "context/context.h"
#include "server/generation.h"
#include "server/prometheus.h"
#include "server/window_ops.h"

namespace kamera {

struct SchedulerOptions {
  int max_queue = 64;   // jobs waiting before submissions are refused
  int max_active = 16;  // generations decoding at once
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

  // Queue a generation or an operation; false when the queue is full or the server stopping.
  bool submit(std::unique_ptr<Generation> g);
  // Several generations (a batch of prompts) queued together, or none of them.
  bool submit_all(std::vector<std::unique_ptr<Generation>> gens);
  bool post(Op op);
  int queued() const { return queued_.load(); }

 private:
  struct Job {
    std::unique_ptr<Generation> gen;  // when set: a generation to admit
    Op op;                            // otherwise: an operation
  };
  bool enqueue(Job j);
  void loop();
  std::vector<Job> take_batch();
  int64_t pages_to_come(const Generation& g) const;
  bool room_for(const Generation& g, int admitted) const;
  void admit(std::unique_ptr<Generation> gp);
  Status admit_window(Generation& g, nlohmann::json& segments, int64_t& reused, int32_t& pos,
                      ChunkContent& query);
  Status admit_chunks(Generation& g, nlohmann::json& segments, int64_t& reused, int64_t& recomputed,
                      int32_t& pos, ChunkContent& query);
  Result<std::pair<std::vector<ChunkContent>, ChunkContent>> resolve(const GenRequest& r);
  void count_segment(SegmentSource s);
  void release(Generation& g);
  int active_rows() const;
  void note_pages();  // the pool's pages in use, for /metrics
  Status start_choices(Generation& g, std::vector<float> logits, int32_t next_pos);
  bool step_choice(Generation& g, Generation::Choice& c, std::span<float> logits);
  void end_choice(Generation& g, Generation::Choice& c, FinishReason reason);
  void finish(Generation& g, const char* reason, int last = -1);
  void fail(Generation& g, const Error& e);
  void fail_context(Generation& g, int64_t prompt_positions);
  void decode_step();

  Context& ctx_;
  WindowRegistry& windows_;
  ServerMetrics& metrics_;
  SchedulerOptions opts_;
  std::vector<std::unique_ptr<Generation>> active_;  // scheduler thread only
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::atomic<int> queued_{0};
  double last_sweep_ = 0;  // of expired windows
};

}  // namespace kamera
