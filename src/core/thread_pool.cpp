#include "core/thread_pool.h"

#include <algorithm>

#include "core/status.h"

namespace kamera {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_pieces_ = pieces;
    pending_ = pieces - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  run_piece(fn, n, pieces, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n;
    int pieces;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      pieces = job_pieces_;
    }
    if (index < pieces) {
      run_piece(*job, n, pieces, index);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace kamera
