#include "serve/sliced_task.h"

namespace kamera {

namespace {

thread_local SlicedTask* tl_current = nullptr;

}  // namespace

SlicedTask::SlicedTask(std::function<void()> work) : fiber_(std::move(work)) {}

SlicedTask::~SlicedTask() {
  while (!resume()) {
  }
}

bool SlicedTask::resume() {
  SlicedTask* outer = tl_current;
  tl_current = this;
  const bool ended = fiber_.resume();
  tl_current = outer;
  return ended;
}

void SlicedTask::pause() {
  fiber_.yield();
}

SlicedTask* SlicedTask::current() {
  return tl_current;
}

void SlicePacer::spent(int tokens) {
  left_ -= tokens;
  if (left_ > 0 || draining_) return;
  SlicedTask* t = SlicedTask::current();
  if (!t) return;  // not a task (the scheduler thread itself): nothing to hand back to
  ++pauses_;
  t->pause();
}

bool SlicePacer::run_in_step(ForwardCursor& cur) {
  SlicedTask* t = SlicedTask::current();
  if (!mixing_ || draining_ || !t || cur.opt.observer || cur.opt.logits == LogitsMode::All ||
      cur.opt.hidden)  // a decode step's pieces give no hidden rows (Engine::decode)
    return false;
  const int before = cur.done;
  offers_.push_back({&cur, t, 0});
  ++pauses_;
  t->pause();  // decode steps run its pieces; the task is resumed when it is done or given back
  return cur.done > before;
}

void SlicePacer::new_step(int budget, bool mixing) {
  left_ = budget_ = budget;
  mixing_ = mixing;
  if (!mixing) release_all();
}

bool SlicePacer::waiting(const SlicedTask* t) const {
  for (const Offer& o : offers_)
    if (o.task == t) return true;
  return false;
}

std::vector<Engine::Piece> SlicePacer::take_pieces() {
  std::vector<Engine::Piece> pieces;
  const size_t n = offers_.size();
  for (size_t k = 0; k < n && left_ > 0; ++k) {
    Offer& o = offers_[(next_ + k) % n];
    // An equal part of what is left (a forward that needs less leaves the rest to the others), so
    // that admissions arriving together advance together; never splitting a non-causal span (a
    // Gemma 3 picture: ForwardCursor::piece).
    const int fair = (left_ + int(n - k) - 1) / int(n - k);
    o.piece = o.cur->piece(std::min(fair, std::max(1, o.cur->opt.max_batch)));
    left_ -= o.piece;
    pieces.push_back({o.cur, o.piece});
  }
  if (n > 0) next_ = (next_ + 1) % n;
  return pieces;
}

void SlicePacer::ran(bool ok) {
  if (!ok) return release_all();
  std::erase_if(offers_, [](const Offer& o) { return o.cur->finished(); });
  for (Offer& o : offers_) o.piece = 0;
}

void SlicePacer::release_all() {
  offers_.clear();  // each task runs what is left of its forward itself
  next_ = 0;
}

void SlicePacer::drain() {
  draining_ = true;
  release_all();
}

}  // namespace kamera
