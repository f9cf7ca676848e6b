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
        j.gen->out({Event::Error,
                    "",
                    error_body({503, "the server is stopping", "server_error", "stopping"}),
                    503,
                    0,
                    {}});
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
  std::vector<std::unique_ptr<Generation>> one;
  one.push_back(std::move(g));
  return submit_all(std::move(one));
}

bool Scheduler::submit_all(std::vector<std::unique_ptr<Generation>> gens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() + gens.size() > size_t(opts_.max_queue)) {
      ++metrics_.rejected_busy;
      return false;
    }
    for (auto& g : gens) {
      Job j;
      j.gen = std::move(g);
      queue_.push_back(std::move(j));
    }
    queued_ = int(queue_.size());
  }
  cv_.notify_one();
  return true;
}

int Scheduler::active_rows() const {
  int rows = 0;
  for (const auto& g : active_) rows += int(g->choices.size());
  return rows;
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
  int gens = 0, rows = active_rows();  // generations admitted in this batch; rows decoding
  while (!queue_.empty()) {
    if (const Generation* g = queue_.front().gen.get()) {
      if (rows + g->req.n > opts_.max_active) break;
      if ((!active_.empty() || gens > 0) && !room_for(*g, gens)) break;  // wait for pages
      ++gens;
      rows += g->req.n;
    }
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_ = int(queue_.size());
  return batch;
}

// Pages a generation may still take: each choice's remaining tokens, plus a partial page.
int64_t Scheduler::pages_to_come(const Generation& g) const {
  const int64_t page = ctx_.pool().page_tokens();
  int64_t pages = 0;
  for (const Generation::Choice& c : g.choices)
    if (!c.done) pages += (g.max_tokens - int64_t(c.gen->tokens().size()) + page - 1) / page + 1;
  return pages;
}

// Whether `g` fits for sure: the free pages, less what the active generations (and `admitted`
// others about to start) may still take, hold a whole context for it. So a decode step never
// finds the pool full: a generation that does not fit waits in the queue instead of failing.
bool Scheduler::room_for(const Generation& g, int admitted) const {
  const int64_t page = ctx_.pool().page_tokens();
  const int64_t context = (ctx_.model().cfg.ctx_len + page - 1) / page;
  auto worst = [&](const Generation& x) {  // the prompt, then every further choice's own pages
    return context + int64_t(x.req.parts.size()) + 2 + int64_t(x.req.n - 1) * (context + 2);
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
      note_pages();
    }
    if (!active_.empty()) decode_step();
    note_pages();
  }
  for (auto& g : active_) finish(*g, "abort");
  active_.clear();
}

// Fails a generation whose prompt, or prompt plus the tokens it asks for, does not fit the
// context: OpenAI's context_length_exceeded, naming the field to change (the prompt, or the
// token limit when the prompt alone fits).
void Scheduler::fail_context(Generation& g, int64_t prompt_positions) {
  const int64_t ctx_len = ctx_.model().cfg.ctx_len;
  const bool prompt = prompt_positions >= ctx_len || g.req.gen.max_tokens <= 0;
  const std::string msg =
      prompt
          ? fmt::format("the prompt takes {} positions; the model's context is {}",
                        prompt_positions, ctx_len)
          : fmt::format("the prompt ({} positions) plus {} ({}) exceeds the model's context of {}",
                        prompt_positions, g.req.max_tokens_field, g.req.gen.max_tokens, ctx_len);
  const char* param = !prompt ? g.req.max_tokens_field : g.req.chat ? "messages" : "prompt";
  g.out({Event::Error,
         "",
         error_body({400, msg, "invalid_request_error", "context_length_exceeded", param}),
         400,
         0,
         {}});
}

void Scheduler::fail(Generation& g, const Error& e) {
  const HttpError h = http_error(e);
  g.out({Event::Error, "", error_body(h), h.status, 0, {}});
}

void Scheduler::note_pages() {
  const KvPool& pool = ctx_.pool();
  const int64_t used = pool.n_pages() - pool.n_free_pages();
  metrics_.kv_pages_used = used;
  if (used > metrics_.kv_pages_used_max) metrics_.kv_pages_used_max = used;
  metrics_.kv_page_bytes =
      pool.n_pages() ? int64_t(pool.arena_bytes() / size_t(pool.n_pages())) : 0;
}

// Frees what the generation holds in the pool (its choices' forks, and its window fork or its
// own sequence).
void Scheduler::release(Generation& g) {
  for (Generation::Choice& c : g.choices) {
    if (c.seq >= 0 && c.seq != g.seq) ctx_.pool().free_sequence(c.seq);
    c.seq = -1;
    c.done = true;
  }
  if (g.window_fork) {
    g.window_fork.reset();  // frees the fork's sequence
  } else if (g.seq >= 0) {
    ctx_.pool().free_sequence(g.seq);
  }
  g.seq = -1;
}

}  // namespace kamera
