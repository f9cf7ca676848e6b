#include "server/scheduler.h"

#include <chrono>

#include "core/log.h"
#include "server/openai.h"

namespace kamera {

using json = nlohmann::json;

Scheduler::Scheduler(Context& ctx, WindowRegistry& windows, ServerMetrics& metrics,
                     SchedulerOptions o)
    : ctx_(ctx), windows_(windows), metrics_(metrics), opts_(o) {}

Scheduler::~Scheduler() {
  stop();
}

void Scheduler::start() {
  thread_ = std::thread([this] { loop(); });
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (Job& j : queue_) {
      if (j.gen) {
        j.gen->out({Event::Error, "",
                    error_body({503, "the server is stopping", "server_error", "stopping"}), 503});
      } else {
        j.op(false);
      }
    }
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::enqueue(Job j) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || int(queue_.size()) >= opts_.max_queue) {
      ++metrics_.rejected_busy;
      return false;
    }
    queue_.push_back(std::move(j));
    queued_ = int(queue_.size());
  }
  cv_.notify_one();
  return true;
}

bool Scheduler::submit(std::unique_ptr<Generation> g) {
  Job j;
  j.gen = std::move(g);
  return enqueue(std::move(j));
}

bool Scheduler::post(Op op) {
  Job j;
  j.op = std::move(op);
  return enqueue(std::move(j));
}

// Operations always; admissions while there is room to decode them. Empty when stopping.
std::vector<Scheduler::Job> Scheduler::take_batch() {
  std::vector<Job> batch;
  std::unique_lock<std::mutex> lock(mu_);
  // Wakes at least every second: expired windows are swept even when nothing is asked.
  cv_.wait_for(lock, std::chrono::seconds(1),
               [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
  if (stopping_) return batch;
  int gens = 0;  // admitted in this batch
  while (!queue_.empty()) {
    if (const Generation* g = queue_.front().gen.get()) {
      if (int(active_.size()) + gens >= opts_.max_active) break;
      if ((!active_.empty() || gens > 0) && !room_for(*g, gens)) break;  // wait for pages
      ++gens;
    }
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_ = int(queue_.size());
  return batch;
}

// Pages a generation may still take: its remaining tokens, plus a partial page.
int64_t Scheduler::pages_to_come(const Generation& g) const {
  const int64_t page = ctx_.pool().page_tokens();
  return (g.req.max_tokens - g.generated + page - 1) / page + 1;
}

// Whether `g` fits for sure: the free pages, less what the active generations (and `admitted`
// others about to start) may still take, hold a whole context for it. So a decode step never
// finds the pool full: a generation that does not fit waits in the queue instead of failing.
bool Scheduler::room_for(const Generation& g, int admitted) const {
  const int64_t page = ctx_.pool().page_tokens();
  auto worst = [&](const Generation& x) {
    return (ctx_.model().cfg.ctx_len + page - 1) / page + int64_t(x.req.parts.size()) + 2;
  };
  int64_t committed = int64_t(admitted) * worst(g);
  for (const auto& a : active_) committed += pages_to_come(*a);
  return ctx_.pool().n_free_pages() - committed >= worst(g);
}

void Scheduler::loop() {
  for (;;) {
    std::vector<Job> batch = take_batch();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    if (now_s() - last_sweep_ > 1.0) {
      windows_.expire();
      last_sweep_ = now_s();
    }
    for (Job& j : batch) {
      if (j.gen) {
        admit(std::move(j.gen));
      } else {
        j.op(true);
      }
    }
    if (!active_.empty()) decode_step();
  }
  for (auto& g : active_) finish(*g, "abort");
  active_.clear();
}

void Scheduler::fail(Generation& g, const Error& e) {
  const HttpError h = http_error(e);
  g.out({Event::Error, "", error_body(h), h.status});
}

// Frees what the generation holds in the pool (its fork, or its own sequence).
void Scheduler::release(Generation& g) {
  if (g.window_fork) {
    g.window_fork.reset();  // frees the fork's sequence
  } else if (g.seq >= 0) {
    ctx_.pool().free_sequence(g.seq);
  }
  g.seq = -1;
}

}  // namespace kamera
