#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KAMERA_PAUSE() _mm_pause()
#else
#define KAMERA_PAUSE() std::this_thread::yield()
#endif

#include "core/status.h"

namespace kamera {

namespace {

int default_spin_us(int n_threads) {
  if (const char* env = std::getenv("KAMERA_POOL_SPIN_US"); env != nullptr && *env != '\0')
    return std::clamp(std::atoi(env), 0, 100000);
  const unsigned cpus = std::thread::hardware_concurrency();
  return cpus != 0 && unsigned(n_threads) > cpus ? 0 : 200;
}

}  // namespace

static int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      spin_us_(default_spin_us(n_threads_)),
      piece_end_ns_(size_t(n_threads_), 0) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker between its check and its wait sees it
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

// The waiter announces itself in `sleepers` before its last check and the waker bumps the state
// before it reads `sleepers` (both sequentially consistent), so one of them sees the other; the
// mutex orders the notify after the waiter's wait began.
template <class Done>
void ThreadPool::wait_for(const Done& done, std::condition_variable& cv,
                          std::atomic<int>& sleepers) {
  if (done()) return;
  if (spin_us_ > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (done()) return;
        KAMERA_PAUSE();
      }
      if (std::chrono::steady_clock::now() > until) break;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  sleepers.fetch_add(1);
  cv.wait(lock, done);
  sleepers.fetch_sub(1);
}

void ThreadPool::wake(std::condition_variable& cv, const std::atomic<int>& sleepers) {
  if (sleepers.load() == 0) return;
  { std::lock_guard<std::mutex> lock(mu_); }
  cv.notify_all();
}

static void run_piece(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int pieces,
                      int index) {
  const int64_t begin = n * index / pieces;
  const int64_t end = n * (index + 1) / pieces;
  if (begin < end) fn(begin, end, index);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_pieces(n, [&fn](int64_t a, int64_t b, int) { fn(a, b); });
}

void ThreadPool::parallel_pieces(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int pieces = int(std::min<int64_t>(n, n_threads_));
  if (pieces == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t start = steady_ns();
  job_ = &fn;
  job_n_ = n;
  job_pieces_ = pieces;
  pending_.store(n_threads_ - 1);  // every worker checks in, with or without a piece
  generation_.fetch_add(1);
  wake(start_cv_, start_sleepers_);
  run_piece(fn, n, pieces, 0);
  piece_end_ns_[0] = steady_ns();
  wait_for([this] { return pending_.load(std::memory_order_acquire) == 0; }, done_cv_,
           done_sleepers_);
  job_ = nullptr;
  const auto [first, last] =
      std::minmax_element(piece_end_ns_.begin(), piece_end_ns_.begin() + pieces);
  stats_.jobs += 1;
  stats_.job_ms += double(*last - start) * 1e-6;
  stats_.tail_ms += double(*last - *first) * 1e-6;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    wait_for([&] { return stop_.load(std::memory_order_relaxed) || generation_.load() != seen; },
             start_cv_, start_sleepers_);
    if (stop_.load()) return;
    seen = generation_.load();
    if (index < job_pieces_) {
      run_piece(*job_, job_n_, job_pieces_, index);
      piece_end_ns_[size_t(index)] = steady_ns();
    }
    if (pending_.fetch_sub(1) == 1) wake(done_cv_, done_sleepers_);
  }
}

}  // namespace kamera
