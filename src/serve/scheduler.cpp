#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/log.h"

namespace kamera {

Scheduler::Scheduler(Context& ctx, WindowRegistry& windows, ServerMetrics& metrics,
                     SchedulerOptions o)
    : ctx_(ctx), windows_(windows), metrics_(metrics), opts_(o), assembler_(ctx.assembler()) {
  ctx_.cache().set_pacer(&pacer_);
  metrics_.seg = &assembler_.counters();
  metrics_.prefix_budget = assembler_.prefix_budget();
  metrics_.segment_budget = assembler_.segments() ? assembler_.segment_budget_pages() *
                                                        assembler_.segments()->page_bytes()
                                                  : 0;
  const PromptAssembler::CachedStats c = assembler_.cached_stats();
  metrics_.cached_budget_pages = c.budget_pages;
  metrics_.cached_page_bytes = c.page_bytes;
}

Scheduler::~Scheduler() {
  stop();
  ctx_.cache().set_pacer(nullptr);
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
        GenerationFailed f;
        f.error.kind = ServeError::Kind::Stopping;
        f.error.error = Error{ErrorCode::OutOfMemory, "the server is stopping"};
        j.gen->out(std::move(f));
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

// The jobs that can start now, in queue order within each kind: an exclusive job while no other
// runs; a generation while there is room to decode it. A job that must wait keeps the later jobs
// of its kind behind it. Empty when stopping.
std::vector<Scheduler::Job> Scheduler::take_batch() {
  std::vector<Job> batch;
  std::unique_lock<std::mutex> lock(mu_);
  // Wakes at least every second: expired windows are swept even when nothing is asked; with
  // background work queued, every 50 ms (it starts once the engine has been idle long enough).
  const auto wake = assembler_.background_waiting() ? std::chrono::milliseconds(50)
                                                    : std::chrono::milliseconds(1000);
  cv_.wait_for(lock, wake,
               [&] { return stopping_ || !queue_.empty() || !active_.empty() || !tasks_.empty(); });
  if (stopping_) return batch;
  bool exclusive_busy = exclusive_in_flight(), exclusive_wait = false, gen_wait = false;
  const int in_flight = generations_in_flight();
  int gens = 0, rows = rows_in_flight();  // generations admitted in this batch; their choices
  int64_t reserved = 0;                 // pages the admissions in flight and of this batch may take
  std::vector<const Generation*> busy;  // admissions in flight, and those of this batch
  for (const auto& t : tasks_) {
    if (!t->gen) continue;
    reserved += pages_to_admit(*t->gen);
    if (opts_.hold_shared_tokens > 0) busy.push_back(t->gen.get());
  }
  for (auto it = queue_.begin(); it != queue_.end();) {
    Generation* g = it->gen.get();
    bool wait = it->exclusive() && (exclusive_busy || exclusive_wait);
    if (g && !wait) wait = gen_wait || rows + g->req.n > opts_.max_active;
    if (g && !wait && (in_flight > 0 || gens > 0)) {
      make_room(*g, reserved);
      wait = pages_short(*g, reserved) > 0;
    }
    if (wait) {
      exclusive_wait = exclusive_wait || it->exclusive();
      gen_wait = gen_wait || g;
      ++it;
      continue;
    }
    if (g && opts_.hold_shared_tokens > 0 &&
        shared_in_flight(*g, busy) >= opts_.hold_shared_tokens) {
      metrics_.admissions_held += !g->held;
      g->held = true;
      ++it;  // it waits for that admission alone: the generations behind it may start
      continue;
    }
    if (g && opts_.hold_shared_tokens > 0) busy.push_back(g);
    if (g) reserved += pages_to_admit(*g);
    exclusive_busy = exclusive_busy || it->exclusive();
    gens += g != nullptr;
    rows += g ? g->req.n : 0;
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  queued_ = int(queue_.size());
  return batch;
}

bool Scheduler::exclusive_in_flight() const {
  for (const auto& t : tasks_)
    if (t->exclusive) return true;
  return false;
}

int Scheduler::generations_in_flight() const {
  int n = int(active_.size());
  for (const auto& t : tasks_) n += t->gen != nullptr;
  return n;
}

// The choices decoding, and those of the generations being admitted.
int Scheduler::rows_in_flight() const {
  int n = active_rows();
  for (const auto& t : tasks_) n += t->gen ? t->gen->req.n : 0;
  return n;
}

// Pages a generation may still take: each choice's remaining tokens, plus a partial page.
int64_t Scheduler::pages_to_come(const Generation& g) const {
  const int64_t page = ctx_.pool().page_tokens();
  int64_t pages = 0;
  for (const Generation::Choice& c : g.choices)
    if (!c.done) pages += (g.max_tokens - int64_t(c.gen->tokens().size()) + page - 1) / page + 1;
  return pages;
}

// Pages an admission of g may take: the tokens of its prompt that the prefix index does not hold
// (a fork shares the rest) and those it may generate (its max_tokens, else the server's default
// or the rest of the context; with the prompt, at most the context), a page more per part and two
// for partial pages; each further choice its own generated tokens. A prompt whose length is known
// only once resolved (chunk parts, a window) may take a whole context.
int64_t Scheduler::pages_to_admit(const Generation& g) const {
  const int64_t page = ctx_.pool().page_tokens(), ctx = ctx_.model().cfg.ctx_len;
  const std::vector<int32_t>& ids = g.req.plan.ids;
  const bool known = g.req.window_id.empty() && !ids.empty();
  const int64_t prompt = known ? std::min<int64_t>(int64_t(ids.size()), ctx) : ctx;
  const int want = g.req.gen.max_tokens > 0 ? g.req.gen.max_tokens : g.req.default_max_tokens;
  const int64_t out =
      std::clamp<int64_t>(want > 0 ? want : ctx, 1, std::max<int64_t>(1, ctx - prompt));
  int64_t held = 0;
  if (known && !g.req.plan.has_media()) held = assembler_.held_prefix(g.req.plan).n_tokens;
  const int64_t extra = int64_t(g.req.parts.size()) + 2;
  return (prompt - held + out + page - 1) / page + extra +
         int64_t(g.req.n - 1) * ((out + page - 1) / page + 2);
}

// Pages `g` lacks to fit for sure (0 or less: it fits): what it may take (pages_to_admit) against
// the free pages less what the active generations may still take and the `reserved` pages of the
// admissions about to run. So a decode step never finds the pool full: a generation that does not
// fit waits in the queue instead of failing.
int64_t Scheduler::pages_short(const Generation& g, int64_t reserved) const {
  int64_t committed = reserved;
  for (const auto& a : active_) committed += pages_to_come(*a);
  return pages_to_admit(g) + committed - ctx_.pool().n_free_pages();
}

// Cached KV (prefix entries and segment occurrences, least recently used first:
// PromptAssembler::shrink_cached) gives back the pages `g` lacks, all but the prefix entry g's
// prompt would be served from, while there are others.
void Scheduler::make_room(const Generation& g, int64_t reserved) {
  if (assembler_.cached_pages() == 0 || pages_short(g, reserved) <= 0) return;
  PrefixIndex* prefix = assembler_.prefix();
  const PrefixIndex::EntryId own = assembler_.held_prefix(g.req.plan).entry;
  auto give_back = [&] {
    for (int64_t lack; (lack = pages_short(g, reserved)) > 0;) {
      const int64_t held = assembler_.cached_pages();
      if (held == 0 || assembler_.shrink_cached(held - lack) >= held) break;  // the rest is pinned
    }
  };
  if (own >= 0 && prefix->pin(own).ok()) {
    give_back();
    prefix->unpin(own);
  }
  give_back();  // its own entry too, if the others were not enough
}

// The prompt tokens of g that an admission in `busy` computes and the caches do not hold yet
// (PromptAssembler::shared_in_flight); 0 after a window.
int64_t Scheduler::shared_in_flight(const Generation& g,
                                    std::span<const Generation* const> busy) const {
  if (!g.req.window_id.empty()) return 0;
  std::vector<const PromptPlan*> plans;
  for (const Generation* b : busy) plans.push_back(&b->req.plan);
  return assembler_.shared_in_flight(g.req.plan, plans);
}

void Scheduler::loop() {
  for (;;) {
    std::vector<Job> batch = take_batch();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    if (now_s() - last_sweep_ > 1.0 && !exclusive_in_flight()) {  // no window in an edit
      windows_.expire();
      last_sweep_ = now_s();
    }
    for (Job& j : batch) start_task(std::move(j));
    step_tasks();
    if (!active_.empty() || pacer_.offered()) decode_step();
    // A background task in flight is not the engine being busy: the next one follows it at once
    // (one at a time), while any admission pauses it.
    const size_t background = size_t(
        std::count_if(tasks_.begin(), tasks_.end(), [](const auto& t) { return t->background; }));
    const bool admitting = !batch.empty() || tasks_.size() > background || queued_ > 0;
    if (background == 0 && background_due(admitting)) start_background();
    if (admitting || !active_.empty()) last_busy_ = now_s();
    note_pages();
  }
  drain_tasks();
  for (auto& g : active_) finish(*g, FinishReason::Abort);
  active_.clear();
}

// A queued canonical starts when nothing is being admitted, and the engine has been idle for
// kIdleBeforeBackground or (compact_while_decoding) is decoding: at most one at a time.
bool Scheduler::background_due(bool admitting) const {
  if (admitting || !assembler_.background_waiting()) return false;
  if (!active_.empty()) return opts_.compact_while_decoding;
  return now_s() - last_busy_ > kIdleBeforeBackground;
}

// The oldest queued segment's canonical (PromptAssembler::compact_one), as a task: its forward runs
// in slices, and waits while any admission is in flight. Only with room to spare in the pool.
void Scheduler::start_background() {
  if (!assembler_.background_room()) return;
  auto t = std::make_unique<Task>();
  t->exclusive = true;  // it writes to the store
  t->background = true;
  t->run = std::make_unique<SlicedTask>([this] {
    try {
      assembler_.background_one();       // a canonical, else an idle repair (cache/idle_repair.h)
    } catch (const std::exception& e) {  // never let an exception end a task
      log().warn("background work: {}", e.what());
    }
  });
  tasks_.push_back(std::move(t));
}

// A job becomes a task; it starts running at its first turn (step_tasks).
void Scheduler::start_task(Job j) {
  auto t = std::make_unique<Task>();
  t->exclusive = j.exclusive();
  t->gen = std::move(j.gen);
  Task* task = t.get();
  Op op = std::move(j.op);
  t->run = std::make_unique<SlicedTask>([this, task, op = std::move(op)] {
    if (!task->gen) return op(true);  // operations catch what they throw (Server::on_scheduler)
    try {
      task->admitted = admit(*task->gen);
    } catch (const std::exception& e) {  // never let an exception end a task's thread
      release(*task->gen);
      fail(*task->gen, make_error(ErrorCode::Internal, "internal error: {}", e.what()));
    }
  });
  tasks_.push_back(std::move(t));
}

// One engine step's turn of the tasks, round-robin from where the last step stopped: each task
// not waiting for its offered forward runs until it offers one (while generations decode), uses
// up what is left of the step's budget, or ends; a background canonical only when it is the one
// task in flight. A task that ends without a forward (a lookup,
// a delete) costs none. With nothing decoding, the tasks run their own pieces until the budget
// is used up.
void Scheduler::step_tasks() {
  const bool mixing = !active_.empty() || batching_admissions();
  const int budget = slice_budget();
  pacer_.new_step(budget, mixing);
  // A budget sized for admissions batched alone stays theirs even when some of them start
  // decoding during this turn and their rows join the step: the step is charged to no share.
  step_unshared_ = mixing && active_.empty();
  tasks_s_ = 0;
  if (mixing && budget == 0) return;  // the share is spent: this step decodes alone
  const double t0 = now_s();
  for (size_t turns = tasks_.size(); turns > 0 && !tasks_.empty(); --turns) {
    if (!mixing && pacer_.used_up()) break;
    if (next_task_ >= tasks_.size()) next_task_ = 0;
    Task& t = *tasks_[next_task_];
    const bool yields = t.background && tasks_.size() > 1;  // admissions go first
    if (yields || pacer_.waiting(t.run.get()) || !t.run->resume()) {
      ++next_task_;
      continue;
    }
    const bool admitted = t.admitted;
    if (admitted) active_.push_back(std::move(t.gen));
    tasks_.erase(tasks_.begin() + std::ptrdiff_t(next_task_));
    if (admitted && !mixing) break;  // it decodes now: the rest of the budget was sized without
  }
  if (mixing) tasks_s_ = now_s() - t0;  // charged to the prefill's share (account_prefill)
  metrics_.prefill_pauses = pacer_.pauses();
}

// Admissions in flight: generations waiting for their first token.
int Scheduler::admissions_in_flight() const {
  return int(
      std::count_if(tasks_.begin(), tasks_.end(), [](const auto& t) { return t->gen != nullptr; }));
}

// With nothing decoding and several admissions in flight, their forwards' slices run together in
// one batched forward per step (as the decode steps carry them), not one forward each: agents
// arriving together are prefilled as one batch and get their first tokens together.
bool Scheduler::batching_admissions() const {
  return active_.empty() && admissions_in_flight() >= 2;
}

// The prefill's share of the decoding's time now: --prefill-share, or more while more
// generations wait for their first token than decode (each waiting one weighs as much as a
// decoding one: 8 admissions beside 2 streams take 4 decode steps' time per step). 0: no share.
double Scheduler::share_now() const {
  if (opts_.prefill_share <= 0) return 0;
  const int rows = active_rows();
  return std::max(opts_.prefill_share, rows > 0 ? double(admissions_in_flight()) / rows : 0.0);
}

// Forward tokens for the tasks in the next step. While generations decode, a step carries what
// the prefill's share allows (account_prefill): the tokens whose measured cost fits what the share
// earns per step, so that every step grows by about the share of a decode step (the streams'
// gaps by as much), rather than a few steps by a whole slice; at most a slice (a slice per unit of
// the share past 1, one per admission, up to kMaxSlicesPerStep), and at least a few tokens (a short
// prompt is admitted in a step or two) while the share is not spent. Admissions batched with
// nothing decoding: a slice each, up to kMaxSlicesPerStep.
int Scheduler::slice_budget() const {
  const int slice = std::max(1, opts_.prefill_slice_tokens);
  const int admissions = admissions_in_flight();
  if (active_.empty()) return slice * std::clamp(admissions, 1, kMaxSlicesPerStep);
  if (opts_.prefill_share <= 0) return slice;
  if (credit_s_ < 0) return 0;
  const int least = std::min(slice, 4);
  if (token_s_ <= 0) return least;
  const double share = share_now();
  const int slices = std::clamp(std::min(int(std::ceil(share)), admissions), 1, kMaxSlicesPerStep);
  const double allow = credit_s_ + share * decode_s_;
  return int(std::clamp(allow / token_s_, double(least), double(slice * slices)));
}

// What the tasks cost a step (the time they ran beside the decoding, and what a step with pieces
// took over a plain one) is charged against the prefill's share: every step earns the share
// (share_now) of a decode step's time, so over time the prefill takes at most that share of the
// decoding's time (a third of the engine at the default 0.5). A token's cost is measured on the
// pieces (or, without any, on the tokens the tasks ran themselves; their time also holds their
// other work). A step with no decode rows, or whose budget was sized for admissions batched alone
// (step_unshared_: admissions that arrived together, some of which started decoding in its turn),
// charges nothing: charged, its whole batch would hold the other admissions for as many steps
// as the share needs to earn it back, while the rows admitted with them decode.
void Scheduler::account_prefill(double step_s, int piece_tokens, int decode_rows) {
  if (piece_tokens == 0) decode_s_ = decode_s_ > 0 ? 0.8 * decode_s_ + 0.2 * step_s : step_s;
  const double piece_s =
      piece_tokens > 0 ? std::max(0.0, step_s - (decode_rows > 0 ? decode_s_ : 0.0)) : 0.0;
  const int own = pacer_.used() - piece_tokens;
  const int n = piece_tokens > 0 ? piece_tokens : own;
  if (n > 0) {
    const double t = (piece_tokens > 0 ? piece_s : tasks_s_) / n;
    token_s_ = token_s_ > 0 ? 0.8 * token_s_ + 0.2 * t : t;
    assembler_.note_token_seconds(token_s_);
  }
  if (decode_rows == 0 || step_unshared_) return;
  const double share = share_now();
  credit_s_ -= tasks_s_ + piece_s;
  credit_s_ = std::min(credit_s_ + share * decode_s_, std::max(1.0, share) * decode_s_);
}

// The server stops: every task runs to its end without pausing; admitted generations are then
// ended with the active ones.
void Scheduler::drain_tasks() {
  pacer_.drain();  // forwards offered to steps that will not come: their tasks run them
  for (auto& t : tasks_) {
    while (!t->run->resume()) {
    }
    if (t->admitted) active_.push_back(std::move(t->gen));
  }
  tasks_.clear();
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
  GenerationFailed f;
  f.error.kind = ServeError::Kind::ContextLength;
  f.error.error = Error{ErrorCode::InvalidArgument, msg};
  f.error.param = param;
  g.out(std::move(f));
}

void Scheduler::fail(Generation& g, const Error& e) {
  GenerationFailed f;
  f.error.error = e;
  g.out(std::move(f));
}

void Scheduler::note_pages() {
  const KvPool& pool = ctx_.pool();
  const int64_t used = pool.n_pages() - pool.n_free_pages();
  metrics_.kv_pages_used = used;
  if (used > metrics_.kv_pages_used_max) metrics_.kv_pages_used_max = used;
  metrics_.kv_page_bytes =
      pool.n_pages() ? int64_t(pool.arena_bytes() / size_t(pool.n_pages())) : 0;
  metrics_.kv_pages = pool.n_pages();
  metrics_.kv_bytes = int64_t(pool.arena_bytes());
  metrics_.kv_window_pages = pool.n_window_pages();
  const int64_t window_used = pool.n_window_pages() - pool.n_free_window_pages();
  metrics_.kv_window_pages_used = window_used;
  if (window_used > metrics_.kv_window_pages_used_max)
    metrics_.kv_window_pages_used_max = window_used;
  if (const PrefixIndex* prefix = assembler_.prefix()) {
    const PrefixIndex::Stats s = prefix->stats();
    metrics_.prefix_entries = s.entries;
    metrics_.prefix_tokens = s.tokens_held;
    metrics_.prefix_approximate_tokens = s.tokens_approximate;
    metrics_.prefix_evictions = s.evictions;
  }
  if (const SegmentIndex* segments = assembler_.segments()) {
    const SegmentIndex::Stats s = segments->stats();
    metrics_.segment_occurrences = s.occurrences;
    metrics_.segment_bytes = s.bytes;
    metrics_.segment_evictions = s.evictions;
    metrics_.segment_compacted = s.compacted;
  }
  const PromptAssembler::CachedStats c = assembler_.cached_stats();
  metrics_.cached_budget_pages = c.budget_pages;
  metrics_.cached_page_bytes = c.page_bytes;
  metrics_.cached_pages = c.pages;
  metrics_.cached_prefix_pages = c.prefix_pages;
  metrics_.cached_segment_pages = c.segment_pages;
  metrics_.cached_shared_pages = c.shared_pages;
  metrics_.cached_patch_pages = c.patch_pages;
  metrics_.cached_evictions = c.evictions;
}

// An admission recomputed `tokens` in `seconds` (its assembly, its prefill, and the decode steps
// its slices rode along with): the server's prefill speed, a decayed average of such admissions.
// Short prefills are left out: their time is mostly the fixed cost of a forward, not the tokens'.
void Scheduler::note_prefill_speed(int64_t tokens, double seconds) {
  if (tokens < kSpeedMinTokens || seconds <= 0) return;
  speed_tokens_ = kSpeedDecay * speed_tokens_ + double(tokens);
  speed_s_ = kSpeedDecay * speed_s_ + seconds;
  metrics_.prefill_tokens_per_s = speed_tokens_ / speed_s_;
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
